"""blahpd's status registry on the live Slurm and Grid Engine, from the outside: a restart
with jobs in every state, and the controller down for a while (slurmctld, sge_qmaster
stopped and started again): the last known states are answered, never a wrong one, then
the true states come back.

They skip without Slurm/Grid Engine and fail under GAHP_REQUIRE_SLURM/_SGE=1 (``batch_env``).
The outage tests always start the daemon again (others' tests use it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from blah_helpers import COMPLETED, HELD, IDLE, REMOVED, RUNNING, Blah, config_file, toml_value

from gahp_blah.jobids import make_job_id


def _blah(tmp: Path, lrms: str, env: dict[str, str], **options: object) -> Blah:
    """A blahpd on ``tmp/state`` with ``options`` in its ``[driver.<lrms>]`` table."""
    table = "".join(f"{k} = {toml_value(v)}\n" for k, v in options.items())
    return Blah("--config", config_file(tmp, f"[driver.{lrms}]\n{table}"), env=env)


def _submitter(b: Blah, lrms: str, tmp: Path) -> Callable[..., str]:
    """submit(cmd, args): the job id of a job of ``cmd`` on ``lrms``."""
    work = tmp / "work"
    work.mkdir(exist_ok=True)

    def submit(cmd: str, args: str = "") -> str:
        return b.submit_ok(gridtype=lrms, Cmd=cmd, Arguments=args, Iwd=str(work))

    return submit


def _idle_job(lrms: str, env: dict[str, str]) -> str:
    """A job submitted behind blahpd's back that stays pending (it starts in two hours)."""
    if lrms == "slurm":
        argv = ["sbatch", "--parsable", "--begin=now+7200", "-o", "/dev/null"]
        argv += ["--wrap", "/bin/true"]
    else:
        start = time.strftime("%Y%m%d%H%M", time.localtime(time.time() + 7200))
        qsub = sorted(Path(env["SGE_ROOT"], "bin").glob("*/qsub"))[0]
        argv = [str(qsub), "-terse", "-a", start, "-o", "/dev/null", "-e", "/dev/null"]
        argv += ["-b", "y", "/bin/true"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    return str(make_job_id(lrms, proc.stdout.strip().split(";")[0].split(".")[0]))


def _cancel_all(b: Blah, jobids: list[str]) -> None:
    for jobid in jobids:
        try:
            res = b.c.call("BLAH_JOB_CANCEL", jobid, timeout=60)
            if res[0] != "0":
                print(f"cancel {jobid}: {res}")
        except Exception as exc:  # best effort: keep cancelling the others
            print(f"cancel {jobid}: {exc}")


@pytest.fixture(params=["slurm", "sge"])
def live(request, batch_env) -> tuple[str, dict[str, str]]:
    return request.param, batch_env(request.param)


def test_restart_with_jobs_in_every_state(tmp_path: Path, live) -> None:
    lrms, env = live
    b = _blah(tmp_path, lrms, env, status_interval=1)
    submit = _submitter(b, lrms, tmp_path)
    jobs: dict[str, str] = {}
    try:
        jobs["idle"] = _idle_job(lrms, env)
        jobs["running"] = submit("/bin/sleep", "300")
        jobs["held"] = submit("/bin/sleep", "300")
        jobs["completed"] = submit("/bin/sh", "-c 'exit 3'")
        jobs["removed"] = submit("/bin/sleep", "300")
        for key in ("running", "held", "removed"):
            b.wait(jobs[key], RUNNING)
        assert b.c.call("BLAH_JOB_HOLD", jobs["held"], timeout=60)[0] == "0"
        assert b.c.call("BLAH_JOB_CANCEL", jobs["removed"], timeout=60)[0] == "0"
        b.wait(jobs["completed"], COMPLETED)
        want = {"idle": IDLE, "running": RUNNING, "held": HELD}
        want |= {"completed": COMPLETED, "removed": REMOVED}
        assert {k: b.status(v)[0] for k, v in jobs.items()} == want
        assert (tmp_path / "state" / lrms / "status-registry.jsonl").exists()
        b.restart()
        after = {k: b.status_fields(v) for k, v in jobs.items()}
        assert {k: int(v[2]) for k, v in after.items()} == want, after
        assert "ExitCode = 3" in after["completed"][3], after["completed"]
        assert b.c.call("BLAH_JOB_RESUME", jobs["held"], timeout=60)[0] == "0"
        b.wait(jobs["held"], RUNNING)
    finally:
        _cancel_all(b, [jobs[k] for k in ("idle", "running", "held") if k in jobs])
        b.close()


# ---------------------------------------------------------------------- controller outage
def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def _answers(argv: list[str], env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def _stop(pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as fh:
                if any(line.startswith("State:") and "Z" in line for line in fh):
                    return  # a zombie: gone
        except OSError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@contextmanager
def _controller_down(lrms: str, env: dict[str, str]) -> Iterator[None]:
    """Stop the batch system's controller; always start it again (its jobs recovered from
    its saved state) and wait until it answers."""
    if lrms == "slurm":
        conf = env["SLURM_CONF"]
        pidfile = Path(conf).parent / "slurmctld.pid"
        start = ["/usr/sbin/slurmctld", "-f", conf]  # no -c: keep the jobs
        probe = ["scontrol", "ping"]
    else:
        root = Path(env["SGE_ROOT"])
        pidfile = root / "spool" / "qmaster" / "qmaster.pid"
        bindir = sorted(root.glob("bin/*/sge_qmaster"))[0].parent
        start = [str(bindir / "sge_qmaster")]
        probe = [str(bindir / "qstat"), "-g", "c"]
    pid = _pid(pidfile)
    if pid is None:
        pytest.skip(f"cannot find the {lrms} controller's pid in {pidfile}")
    _stop(pid)
    try:
        yield
    finally:
        subprocess.run(start, env=env, check=True, timeout=60)
        deadline = time.monotonic() + 90
        while not _answers(probe, env):
            assert time.monotonic() < deadline, f"{lrms} controller did not come back"
            time.sleep(0.5)


@pytest.mark.batch_outage
def test_controller_down_last_known_states_then_the_true_ones(tmp_path: Path, live) -> None:
    lrms, env = live
    b = _blah(tmp_path, lrms, env, status_interval=1, command_timeout=8, stale_limit_s=600)
    submit = _submitter(b, lrms, tmp_path)
    jobs: dict[str, str] = {}
    unknown = str(make_job_id(lrms, "987654321"))
    try:
        jobs["idle"] = _idle_job(lrms, env)
        jobs["running"] = submit("/bin/sleep", "300")
        jobs["held"] = submit("/bin/sleep", "300")
        jobs["completed"] = submit("/bin/sh", "-c 'exit 3'")
        jobs["ends"] = submit("/bin/sh", "-c 'sleep 18; exit 5'")  # ends during the outage
        for key in ("running", "held", "ends"):
            b.wait(jobs[key], RUNNING)
        assert b.c.call("BLAH_JOB_HOLD", jobs["held"], timeout=60)[0] == "0"
        b.wait(jobs["completed"], COMPLETED)
        before = {k: b.status(v)[0] for k, v in jobs.items()}
        assert before == {
            "idle": IDLE,
            "running": RUNNING,
            "held": HELD,
            "completed": COMPLETED,
            "ends": RUNNING,
        }
        seen_error = False
        with _controller_down(lrms, env):
            down = time.monotonic()
            while time.monotonic() - down < 25:
                for key, jobid in jobs.items():
                    res = b.status_fields(jobid)
                    assert res[0] == "0", (key, res)  # answered, not an error
                    assert int(res[2]) == before[key], (key, res)  # and never a wrong state
                # A job the registry does not know cannot be answered: an error, no guess.
                res = b.status_fields(unknown)
                seen_error = seen_error or res[0] != "0"
                assert res[0] != "0" or int(res[2]) == COMPLETED, res
                time.sleep(1)
        assert seen_error, "the controller was down but blahpd could still ask it"
        # Back: the true states, the job that ended meanwhile included (exact exit code).
        assert b.wait(jobs["ends"], COMPLETED, timeout=120)["ExitCode"] == 5
        assert b.status(jobs["running"])[0] == RUNNING
        assert b.status(jobs["held"])[0] == HELD
        assert b.status(jobs["idle"])[0] == IDLE
        assert "ExitCode = 3" in b.status_fields(jobs["completed"])[3]
    finally:
        _cancel_all(b, [jobs[k] for k in ("idle", "running", "held", "ends") if k in jobs])
        b.close()


@pytest.mark.batch_outage
def test_outage_longer_than_the_stale_limit_is_an_error(tmp_path: Path, batch_env) -> None:
    env = batch_env("slurm")
    b = _blah(tmp_path, "slurm", env, status_interval=1, command_timeout=8, stale_limit_s=5)
    submit = _submitter(b, "slurm", tmp_path)
    jobs: list[str] = []
    try:
        jobs.append(submit("/bin/sleep", "300"))
        b.wait(jobs[0], RUNNING)
        with _controller_down("slurm", env):
            deadline = time.monotonic() + 30
            while True:
                res = b.status_fields(jobs[0])
                if res[0] != "0":
                    break
                assert int(res[2]) == RUNNING, res
                assert time.monotonic() < deadline, "stale state answered beyond the limit"
                time.sleep(0.5)
            assert "has not answered" in res[1], res
        assert b.wait(jobs[0], RUNNING, timeout=120)  # back: the true state again
    finally:
        _cancel_all(b, jobs)
        b.close()
