"""Defects seen in HTCondor's C blahpd that our blahpd must never have, driven from the
outside: ``python -m gahp_blah`` over pipes, as the gridmanager runs it.

1. A request line of only spaces killed the C blahpd: here it gets an ``E`` line and the
   next request works (:func:`test_a_line_of_only_spaces_is_refused_and_the_server_goes_on`).
   Random blank and space-only lines are also in the fuzzing of
   ``tests/reliability/test_fuzz_servers.py::test_fuzz_blahpd``.
2. A lone CR inside a line split the request in two, and the C blahpd's replies drifted out
   of step with its requests: here such a line gets one return line, and the request ids of
   the results match what was accepted (:func:`test_a_lone_cr_inside_a_line_keeps_replies_in_step`).
3. A status query taking 30-41 s was never answered: with Slurm commands that hang past
   ``command_timeout``, BLAH_JOB_STATUS gets an answer, an error or the last known state
   (:func:`test_status_commands_that_hang_still_get_an_answer`).
4. With the controller unreachable the C blahpd reported a live job COMPLETED with exit code
   0: here, with commands failing as Slurm's do then, a live job is never COMPLETED
   (:func:`test_controller_unreachable_never_completes_a_live_job`).  The real outage
   (slurmctld and sge_qmaster stopped and started again) is tested in
   ``tests/gahp_blah/test_blahpd_registry.py::test_controller_down_last_known_states_then_the_true_ones``
   and ``::test_outage_longer_than_the_stale_limit_is_an_error``, and under HTCondor in
   ``tests/htcondor/test_htcondor_registry.py::test_controller_outage_holds_no_job``.
5. "Threads limit reached" long before any limit: 200 BLAH_JOB_STATUS in flight are all
   accepted and all answered (:func:`test_two_hundred_statuses_in_flight_are_all_answered`).
6. Exit codes without slurmdbd (``.ci/slurm-up.sh`` has ``accounting_storage/none`` and
   ``jobcomp/filetxt``): a job exiting 7 gives ``ExitCode = 7`` through blahpd on the live
   Slurm in ``tests/gahp_blah/test_blahpd_e2e.py::test_job_life_with_tricky_arguments``
   (3 and 5 across a restart and an outage in ``test_blahpd_registry.py``; the driver's
   bulk and jobcomp paths in ``tests/gahp_lrms/test_registry_live.py::
   test_finished_jobs_exact_exit_codes_from_the_bulk_query`` and
   ``tests/gahp_lrms/test_slurm_live.py::test_forgotten_job_answered_from_jobcomp``).

The Slurm tests use ``batch_env("slurm")``: they skip without Slurm and fail under
GAHP_REQUIRE_SLURM=1.  They never stop the real controller: shims in the driver's
``bin_dir`` pass through to the real commands, then hang or fail on request.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from blah_helpers import ad_string as ad

from gahp_core.testing import GahpClient

ROOT = Path(__file__).resolve().parents[2]
BLAHPD = [sys.executable, "-m", "gahp_blah"]
IDLE, RUNNING, COMPLETED = "1", "2", "4"
SLURM_COMMANDS = ("sbatch", "squeue", "scontrol", "sacct", "scancel")
# A hanging command outlasts the 30-41 s the C blahpd never answered, and the 60 s a test
# waits for an answer: only a server that gives up on it (command_timeout) can answer.
HANG_S = 120
WAIT_S = 60
UNREACHABLE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


def blahpd_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a blahpd that runs this tree's code."""
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def blahpd(tmp_path: Path, config: str = "", env: dict[str, str] | None = None) -> GahpClient:
    path = tmp_path / "blahpd.toml"
    path.write_text(f'state_dir = "{tmp_path / "state"}"\n{config}')
    return GahpClient([*BLAHPD, "--config", str(path)], env=blahpd_env(env))


# ---------------------------------------------------------------------- 1, 2: framing
@pytest.mark.parametrize("line", [b" \r\n", b"      \r\n", b"   \n", b"\t \r\n"])
def test_a_line_of_only_spaces_is_refused_and_the_server_goes_on(tmp_path, line):
    with blahpd(tmp_path) as c:
        c.send_raw(line)
        assert c.read_fields()[0] == "E"
        # Alone in its write, then with the next request in the same write.
        c.send_raw(line + b"BLAH_PING 1 fork\r\n")
        assert c.read_fields()[0] == "E"
        assert c.read_fields() == ["S"]
        assert c.wait_results(["1"]) == {"1": ["0", "No error"]}
        assert c.call("BLAH_PING", "fork") == ["0", "No error"]
        assert c.proc.poll() is None
        assert c.quit() == 0


def test_a_lone_cr_inside_a_line_keeps_replies_in_step(tmp_path):
    lines = [
        b"BLAH_PING 1 fork\r\n",
        b"BLAH_JOB_STATUS 2 fork/12345\rBLAH_PING 3 fork\r\n",  # the C blahpd: two requests
        b"BLAH_PING 4 fo\rrk\r\n",  # a CR inside an argument
        b"BLAH_PING 5\r fork\r\n",
        b"BLAH_PING 6 fork\r\n",
    ]
    with blahpd(tmp_path) as c:
        c.send_raw(b"".join(lines))
        returns = [c.read_fields() for _ in lines]  # one return line per line
        # Nothing more: the next line is the reply to the next request.
        commands = c.command("COMMANDS")
        assert commands[0] == "S" and "BLAH_PING" in commands, (returns, commands)
        assert all(r[0] in ("S", "E") for r in returns), returns
        assert returns[0] == returns[-1] == ["S"]
        reqids = ["1", "2", "4", "5", "6"]  # each line's: never 3, which the C blahpd saw
        accepted = {rid for rid, r in zip(reqids, returns, strict=True) if r == ["S"]}
        got = c.wait_results(sorted(accepted))
        # A witness: a later ping's result comes, and no result for an id never accepted
        # came before it (a ping 3 would have been answered as fast as this one).
        rid = "100"
        assert c.command("BLAH_PING", rid, "fork") == ["S"]
        later = c.wait_results([rid])
        assert later.pop(rid) == ["0", "No error"]
        got.update(later)
        assert set(got) == accepted, (returns, got)  # no result for an id never accepted
        assert got["1"] == got["6"] == ["0", "No error"]
        assert c.quit() == 0


# ---------------------------------------------------------------------- 5: many in flight
@pytest.mark.parametrize("lrms", ["fork", "slurm"])
def test_two_hundred_statuses_in_flight_are_all_answered(tmp_path, batch_env, lrms):
    env = batch_env(lrms) or {}
    n = 200
    with blahpd(tmp_path, env=env) as c:
        res = c.call(
            "BLAH_JOB_SUBMIT",
            ad(
                gridtype=lrms, Cmd="/bin/sleep", Arguments="120", Iwd=str(tmp_path), Out="/dev/null"
            ),
            timeout=60,
        )
        assert res[0] == "0", res
        jobid = res[2]
        try:
            first = 100
            c.send_raw(
                b"".join(f"BLAH_JOB_STATUS {first + i} {jobid}\r\n".encode() for i in range(n))
            )
            returns = [c.read_fields(timeout=30) for _ in range(n)]
            assert returns == [["S"]] * n, [r for r in returns if r != ["S"]][:5]
            ids = [str(first + i) for i in range(n)]
            got = c.wait_results(ids, timeout=120)
            assert set(got) == set(ids)
            states = {(r[0], r[2] if len(r) == 4 else None) for r in got.values()}
            assert states <= {("0", IDLE), ("0", RUNNING)}, states
        finally:
            assert c.call("BLAH_JOB_CANCEL", jobid, timeout=60)[0] == "0"
        assert c.quit() == 0


# ---------------------------------------------------------------------- 3, 4: a sick Slurm
class SickSlurm:
    """A ``bin_dir`` of shims for Slurm's commands: they run the real ones while ``mode`` is
    ``ok``; with ``hang`` the status commands hang for HANG_S seconds; with ``down`` the
    commands that talk to slurmctld fail as they do when it cannot be reached (``sacct -c``
    reads the jobcomp file and keeps working)."""

    def __init__(self, where: Path, env: dict[str, str]) -> None:
        real = Path(shutil.which("squeue", path=env.get("PATH")) or "/usr/bin/squeue").parent
        self.bin = where / "bin"
        self.bin.mkdir(parents=True)
        self.mode_file = where / "mode"
        self.mode = "ok"
        for name in SLURM_COMMANDS:
            hang = f'[ "$mode" = hang ] && exec sleep {HANG_S}\n' if name != "sbatch" else ""
            down = (
                f'[ "$mode" = down ] && {{ echo "{UNREACHABLE}" >&2; exit 1; }}\n'
                if name != "sacct"
                else ""
            )
            shim = self.bin / name
            shim.write_text(
                f'#!/bin/sh\nmode=$(cat "{self.mode_file}")\n{hang}{down}'
                f'exec "{real / name}" "$@"\n'
            )
            shim.chmod(0o755)

    @property
    def mode(self) -> str:
        return self.mode_file.read_text()

    @mode.setter
    def mode(self, value: str) -> None:
        self.mode_file.write_text(value)


@pytest.fixture
def sick(tmp_path, batch_env) -> SickSlurm:
    return SickSlurm(tmp_path / "shims", batch_env("slurm"))


class SlurmBlah:
    """A blahpd on the live Slurm through the shims, with a 3 s command_timeout."""

    def __init__(self, tmp_path: Path, sick: SickSlurm, env: dict[str, str], registry: bool):
        self.tmp, self.env = tmp_path, env
        self.config = (
            f'[driver.slurm]\nbin_dir = "{sick.bin}"\ncommand_timeout = 3\n'
            f"status_interval = 1\nstatus_registry = {str(registry).lower()}\n"
        )
        self.c = blahpd(tmp_path, self.config, env)

    def restart(self) -> None:
        self.c.proc.kill()
        self.c.close()
        self.c = blahpd(self.tmp, self.config, self.env)

    def submit(self) -> str:
        res = self.c.call(
            "BLAH_JOB_SUBMIT",
            ad(
                gridtype="slurm",
                Cmd="/bin/sleep",
                Arguments="300",
                Iwd=str(self.tmp),
                Out="/dev/null",
            ),
            timeout=60,
        )
        assert res[0] == "0", res
        return res[2]

    def statuses(self, *jobids: str, timeout: float = WAIT_S) -> dict[str, list[str]]:
        """BLAH_JOB_STATUS of every job, all in flight at once; each must be answered."""
        rids = {}
        for jobid in jobids:
            rid = self.c.reqid()
            assert self.c.command("BLAH_JOB_STATUS", rid, jobid) == ["S"]
            rids[rid] = jobid
        got = self.c.wait_results(list(rids), timeout=timeout)
        return {rids[rid]: res for rid, res in got.items()}

    def known_state(self, jobid: str) -> str:
        """Wait until Slurm has the job as pending or running; that state."""
        deadline = time.monotonic() + 60
        while True:
            res = self.statuses(jobid)[jobid]
            if res[0] == "0" and res[2] in (IDLE, RUNNING):
                return res[2]
            assert time.monotonic() < deadline, res
            time.sleep(0.3)


@pytest.fixture(params=[True, False], ids=["registry", "per-job"])
def slurm_blah(request, tmp_path, sick, batch_env) -> Iterator[SlurmBlah]:
    b = SlurmBlah(tmp_path, sick, batch_env("slurm"), request.param)
    yield b
    b.c.close()


def _cancel(b: SlurmBlah, sick: SickSlurm, jobid: str) -> None:
    sick.mode = "ok"
    b.restart()  # no hanging command of the old one in the way
    assert b.c.call("BLAH_JOB_CANCEL", jobid, timeout=60)[0] == "0"


def _never_wrong(res: list[str], last: str) -> None:
    """An error result, or the last known state: never silence (the caller waited for it),
    never COMPLETED."""
    assert res[0] != "0" or (len(res) == 4 and res[2] == last), (last, res)
    if res[0] != "0":
        assert res[1], res  # an error says what went wrong


def test_status_commands_that_hang_still_get_an_answer(slurm_blah, sick):
    b = slurm_blah
    jobid = b.submit()
    try:
        last = b.known_state(jobid)
        sick.mode = "hang"
        time.sleep(1.2)  # past status_interval: the registry asks Slurm again
        unknown = "slurm/987654321"
        got = b.statuses(jobid, unknown)
        _never_wrong(got[jobid], last)
        assert got[unknown][0] != "0", got[unknown]  # nothing known about it: an error
        got = b.statuses(jobid)  # and again, while the last hung command may still be killed
        _never_wrong(got[jobid], last)
    finally:
        _cancel(b, sick, jobid)


def test_controller_unreachable_never_completes_a_live_job(slurm_blah, sick):
    b = slurm_blah
    jobid = b.submit()
    try:
        last = b.known_state(jobid)
        sick.mode = "down"
        time.sleep(1.2)
        unknown = "slurm/987654321"
        for _ in range(3):
            got = b.statuses(jobid, unknown)
            _never_wrong(got[jobid], last)
            assert got[unknown][0] != "0", got[unknown]
            time.sleep(0.5)
        b.restart()  # a restarted blahpd, with only its state directory to go by
        _never_wrong(b.statuses(jobid)[jobid], last)
    finally:
        _cancel(b, sick, jobid)
