"""Restarts: blahpd killed with SIGKILL and started again on the same state directory; the
BOINC emulator stopped and started on the same state (batches, jobs and files survive)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from relkit import BLAHPD, BOINC_GAHP, select, submit_args, wait_done

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient

RUNNING, REMOVED, COMPLETED, HELD = "2", "3", "4", "5"


def _ad(**kv: object) -> str:
    parts = []
    for k, v in kv.items():
        val = '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(v, str) else v
        parts.append(f"{k} = {val}")
    return "[ " + "; ".join(parts) + " ]"


def _status(c: GahpClient, jobid: str) -> list[str]:
    res = c.call("BLAH_JOB_STATUS", jobid, timeout=60)
    assert len(res) == 4 and res[0] == "0", res
    return res


def _wait(c: GahpClient, jobid: str, want: str, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        res = _status(c, jobid)
        if res[2] == want:
            return res
        assert time.monotonic() < deadline, (jobid, want, res)
        time.sleep(0.2)


@pytest.mark.parametrize("lrms", ["fork", "slurm"])
def test_blahpd_sigkill_and_restart(tmp_path: Path, lrms: str, batch_env) -> None:
    env = batch_env(lrms)
    work = tmp_path / "work"
    work.mkdir()
    argv = [*BLAHPD, "--state-dir", str(tmp_path / "state")]

    def submit(c: GahpClient, cmd: str, args: str) -> str:
        res = c.call(
            "BLAH_JOB_SUBMIT", _ad(gridtype=lrms, Cmd=cmd, Args=args, Iwd=str(work)), timeout=60
        )
        assert res[0] == "0", res
        return res[2]

    c = GahpClient(argv, env=env)
    try:
        jobs = {
            "running": submit(c, "/bin/sleep", "120"),
            "held": submit(c, "/bin/sleep", "120"),
            "completed": submit(c, "/bin/false", ""),
            "removed": submit(c, "/bin/sleep", "120"),
        }
        for key in ("running", "held", "removed"):
            _wait(c, jobs[key], RUNNING)
        assert c.call("BLAH_JOB_HOLD", jobs["held"], timeout=60)[0] == "0"
        assert c.call("BLAH_JOB_CANCEL", jobs["removed"], timeout=60)[0] == "0"
        _wait(c, jobs["completed"], COMPLETED)
        before = {k: _status(c, v)[2] for k, v in jobs.items()}
        assert before == {
            "running": RUNNING,
            "held": HELD,
            "completed": COMPLETED,
            "removed": REMOVED,
        }
        c.proc.kill()  # SIGKILL: no shutdown of any kind
        c.proc.wait(10)
    finally:
        c.close()
    with GahpClient(argv, env=env) as c2:
        try:
            after = {k: _status(c2, v) for k, v in jobs.items()}
            assert {k: v[2] for k, v in after.items()} == before
            assert "ExitCode = 1" in after["completed"][3], after["completed"]
            assert c2.call("BLAH_JOB_RESUME", jobs["held"], timeout=60)[0] == "0"
            _wait(c2, jobs["held"], RUNNING)
        finally:  # never leave a sleeping (or stopped) job behind
            for key in ("running", "held"):
                assert c2.call("BLAH_JOB_CANCEL", jobs[key], timeout=60)[0] == "0"
        for key in ("running", "held"):
            _wait(c2, jobs[key], REMOVED)


def test_emulator_restart_keeps_batches_jobs_and_files(tmp_path: Path, input_file: Path) -> None:
    state = tmp_path / "emu"
    srv = EmulatorServer(state_dir=state, job_delay=0.05, inline_apps=True).start()
    out = tmp_path / "out"
    out.mkdir()
    try:
        with GahpClient([*BOINC_GAHP, "--timeout", "3"]) as c:
            select(c, srv)
            assert c.call(
                "BOINC_SUBMIT",
                *submit_args("keep", "uppercase", [("keep#0", input_file), ("keep#1", input_file)]),
            ) == ["NULL"]
            wait_done(c, "keep", 2)
            port = srv.port
            srv.stop()
            srv = EmulatorServer(
                state_dir=state, port=port, job_delay=0.05, inline_apps=True
            ).start()
            assert c.call("BOINC_QUERY_BATCHES", "0", "1", "keep")[2:] == [
                "2",
                "keep#0",
                "DONE",
                "keep#1",
                "DONE",
            ]
            res = c.call("BOINC_FETCH_OUTPUT", "keep#1", str(out), "e", "ALL", "0")
            assert res[0] == "NULL" and (out / "out").read_text() == "ALPHA\n"
            # the staged input is still there: a new batch uploads nothing
            srv.reset_stats()
            assert c.call(
                "BOINC_SUBMIT", *submit_args("again", "uppercase", [("again#0", input_file)])
            ) == ["NULL"]
            assert srv.stats.get("upload_files", 0) == 0
            wait_done(c, "again", 1)
    finally:
        srv.stop()
