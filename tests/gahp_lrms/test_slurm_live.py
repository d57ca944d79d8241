"""The slurm and pbs drivers against a live Slurm (see conftest.py for when they skip)."""

from __future__ import annotations

import subprocess
import time

import pytest
from lrms_helpers import sync_driver, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)


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
