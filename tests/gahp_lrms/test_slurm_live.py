"""The slurm and pbs drivers against a live Slurm (see conftest.py for when they skip)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from lrms_helpers import TRICKY_ARGS, TRICKY_ENV, sync_driver, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)


@pytest.fixture(params=["slurm", "pbs"])
def driver(request) -> Driver:
    return request.getfixturevalue(f"{request.param}_driver")


def test_ping(driver):
    driver.ping()


def test_tricky_job_runs_with_everything_intact(driver, echo_program, tmp_path):
    work = tmp_path / "work dir%j"
    work.mkdir()
    (work / "in put.txt").write_text("line 1\nline 2\n")
    spec = JobSpec(
        str(echo_program),
        TRICKY_ARGS,
        environment={**TRICKY_ENV, "GAHP_T_EXIT": "3"},
        stdin="in put.txt",
        stdout="out %j.json",
        stderr=str(tmp_path / "err's.txt"),
        workdir=str(work),
        name="tricky name; $(x)",
        runtime_s=300,
        memory_mb=100,
    )
    jid = driver.submit(spec)
    assert jid and " " not in jid
    info = wait_status(driver, jid, *DONE)
    assert info.status is JobStatus.COMPLETED
    assert (info.exit_code, info.exit_signal) == (3, None)
    assert info.worker_node
    got = json.loads((work / "out %j.json").read_text())
    assert got["argv"] == list(TRICKY_ARGS)
    assert got["env"] == {**TRICKY_ENV, "GAHP_T_EXIT": "3"}
    assert got["cwd"] == str(work)
    assert got["stdin"] == "line 1\nline 2\n"
    assert (tmp_path / "err's.txt").read_text() == "to stderr\n"


def test_idle_running_completed_and_restart(driver, tmp_path):
    jid = driver.submit(JobSpec("/bin/sh", ("-c", "sleep 2; exit 0")))
    first = driver.status(jid).status
    assert first in (JobStatus.IDLE, JobStatus.RUNNING)
    info = wait_status(driver, jid, JobStatus.RUNNING)
    assert info.worker_node
    # A new driver object (a restarted server) still answers.
    again = sync_driver(driver.name, dict(driver.config), driver.state_dir)
    info = wait_status(again, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)


def test_killed_by_signal(slurm_driver):
    jid = slurm_driver.submit(JobSpec("/bin/sh", ("-c", "kill -KILL $$")))
    info = wait_status(slurm_driver, jid, *DONE)
    assert info.status is JobStatus.COMPLETED
    assert (info.exit_code, info.exit_signal) == (None, 9)


def test_hold_and_release_pending_job(driver, tmp_path):
    marker = tmp_path / "ran"
    jid = driver.submit(JobSpec("/bin/touch", (str(marker),), start_held=True))
    info = driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason
    driver.hold(jid)  # already held: fine
    time.sleep(0.5)
    assert not marker.exists()
    driver.resume(jid)
    info = wait_status(driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    assert marker.exists()
    with pytest.raises(DriverError):
        driver.resume(jid)


def test_hold_an_idle_job(slurm_driver):
    # Not eligible for a minute: PENDING (IDLE), so the hold is a real scontrol hold.
    proc = slurm_driver._run(
        "sbatch", "--parsable", "--begin=now+60", "-o", "/dev/null", "--wrap", "true"
    )
    jid = proc.stdout.strip()
    try:
        assert _squeue(slurm_driver, jid) == ("PENDING", "BeginTime")  # Slurm's own view
        assert slurm_driver.status(jid).status is JobStatus.IDLE
        slurm_driver.hold(jid)
        state, reason = _squeue(slurm_driver, jid)
        assert state == "PENDING" and reason.startswith("JobHeld"), (state, reason)
        info = slurm_driver.status(jid)
        assert info.status is JobStatus.HELD and info.hold_reason.startswith("JobHeld")
        slurm_driver.resume(jid)
        assert _squeue(slurm_driver, jid)[0] == "PENDING"
        assert slurm_driver.status(jid).status is JobStatus.IDLE
    finally:
        slurm_driver.cancel(jid)
    assert slurm_driver.status(jid).status is JobStatus.REMOVED


def _squeue(driver: Driver, jid: str) -> tuple[str, str]:
    """State and reason of a job as squeue shows them, independent of the driver's parsing."""
    proc = subprocess.run(
        ["squeue", "-h", "-j", jid, "-o", "%T %r"],
        env=driver.env,  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    state, _, reason = proc.stdout.strip().partition(" ")
    return state, reason


def _started_sleeper(driver: Driver, tmp_path, seconds: int = 60) -> str:
    """Submit a sleeping job and return once its process really runs (not just allocated)."""
    marker = tmp_path / f"started-{time.monotonic_ns()}"
    jid = driver.submit(JobSpec("/bin/sh", ("-c", f"touch '{marker}'; exec sleep {seconds}")))
    wait_status(driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 15
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    return jid


def test_cancel_running_job(driver, tmp_path):
    jid = _started_sleeper(driver, tmp_path)
    driver.cancel(jid)
    info = wait_status(driver, jid, *DONE, timeout=15)
    assert info.status is JobStatus.REMOVED
    driver.cancel(jid)  # cancelling a removed job is a no-op


def test_suspend_running_slurm_job(slurm_driver, tmp_path):
    marker = tmp_path / "started"
    jid = slurm_driver.submit(JobSpec("/bin/sh", ("-c", f"touch '{marker}'; sleep 1.5; exit 6")))
    wait_status(slurm_driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 15
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    slurm_driver.hold(jid)
    info = slurm_driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason == "suspended"
    slurm_driver.resume(jid)
    info = wait_status(slurm_driver, jid, *DONE)
    assert info.exit_code == 6


def test_running_job_hold_refused_when_configured(slurm_config, tmp_path):
    driver = sync_driver("slurm", {**slurm_config, "suspend_running": False}, tmp_path)
    jid = _started_sleeper(driver, tmp_path)
    try:
        with pytest.raises(DriverError, match="cannot hold a running job"):
            driver.hold(jid)
    finally:
        driver.cancel(jid)


def test_pbs_refuses_to_hold_running_job(pbs_driver, tmp_path):
    jid = _started_sleeper(pbs_driver, tmp_path)
    try:
        with pytest.raises(DriverError, match="cannot hold a running job"):
            pbs_driver.hold(jid)
    finally:
        pbs_driver.cancel(jid)


def test_count_runs_instances(driver, tmp_path):
    out = tmp_path / "out"
    spec = JobSpec("/bin/sh", ("-c", "echo $$; exit 0"), stdout=str(out), count=2)
    info = wait_status(driver, driver.submit(spec), *DONE)
    assert info.exit_code == 0
    assert len(out.read_text().split()) == 2


def test_unknown_job_gets_definite_answer(driver):
    info = driver.status("987654321")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "no longer known" in info.exit_reason
    driver.cancel("987654321")


def test_malformed_id(driver):
    with pytest.raises(DriverError, match="malformed"):
        driver.status("1; rm -rf /")


def test_forgotten_job_answered_from_jobcomp(slurm_driver, monkeypatch):
    """Once the controller has forgotten a job (MinJobAge), sacct -c (jobcomp) answers."""
    jid = slurm_driver.submit(JobSpec("/bin/sh", ("-c", "exit 4")))
    wait_status(slurm_driver, jid, *DONE)
    assert slurm_driver.lookup(jid)[0] == "scontrol"
    real_run = slurm_driver._run

    def forgetful(name, *args, **kw):
        if name == "scontrol":
            return subprocess.CompletedProcess(
                [name], 1, "", "slurm_load_jobs error: Invalid job id specified\n"
            )
        return real_run(name, *args, **kw)

    monkeypatch.setattr(slurm_driver, "_run", forgetful)
    deadline = time.monotonic() + 10
    while slurm_driver.lookup(jid)[0] == "none" and time.monotonic() < deadline:
        time.sleep(0.2)  # the jobcomp record is written when the job is purged/completes
    assert slurm_driver.lookup(jid)[0] in ("sacct", "jobcomp")
    info = slurm_driver.status(jid)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 4)


def test_pbs_wrappers_with_a_state_path_not_shell_safe(slurm_config, tmp_path):
    """Slurm's qsub wrapper too runs a script from the driver's own mkdtemp directory (the
    state path holds '@'), never from a shared one."""
    drv = sync_driver("pbs", slurm_config, tmp_path / "alice@example.org")
    jid = drv.submit(JobSpec("/bin/sh", ("-c", "exit 6")))
    info = wait_status(drv, jid, JobStatus.COMPLETED, JobStatus.REMOVED, timeout=120)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 6)
    scripts = drv._tmp_scripts  # type: ignore[attr-defined]
    assert scripts is not None and oct(scripts.stat().st_mode & 0o777) == "0o700"
    drv.aclose()
    assert not scripts.exists()
