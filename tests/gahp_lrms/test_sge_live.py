"""The sge driver against a live Son of Grid Engine (``bash .ci/sge-up.sh``; see conftest.py
for when these tests skip)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from lrms_helpers import sync_driver, wait_job, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)
# Lines that would be qsub options if SGE read "#$" directives from the script.
SGE_ARGS = ("x\n#$ -N pwned\n#$ -l h_rt=1", "$JOB_ID $HOME")


def _started_sleeper(driver: Driver, tmp_path, seconds: int = 60) -> str:
    """Submit a sleeping job and return once its process really runs."""
    marker = tmp_path / f"started-{time.monotonic_ns()}"
    jid = driver.submit(JobSpec("/bin/sh", ("-c", f"touch '{marker}'; exec sleep {seconds}")))
    wait_status(driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 15
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    return jid


def test_hold_and_release_an_idle_job(sge_driver):
    # Deferred start (qsub -a) an hour ahead: pending (IDLE), so the hold is a real qhold.
    later = (datetime.now() + timedelta(hours=1)).strftime("%Y%m%d%H%M")
    proc = sge_driver._run(
        "qsub", "-terse", "-a", later, "-o", "/dev/null", "-e", "/dev/null", "-b", "y", "true"
    )
    jid = proc.stdout.strip()
    try:
        assert sge_driver.status(jid).status is JobStatus.IDLE
        sge_driver.hold(jid)
        info = sge_driver.status(jid)
        assert info.status is JobStatus.HELD and "qhold" in info.hold_reason
        sge_driver.resume(jid)
        assert sge_driver.status(jid).status is JobStatus.IDLE
    finally:
        sge_driver.cancel(jid)
    info = sge_driver.status(jid)  # deleted while pending: no accounting record at all
    assert (info.status, info.exit_reason) == (JobStatus.REMOVED, "cancelled")


def test_suspend_and_resume_running_job(sge_driver, tmp_path):
    marker = tmp_path / "started"
    script = f"touch '{marker}'; sleep 1.5; exit 6"
    jid = sge_driver.submit(JobSpec("/bin/sh", ("-c", script)))
    wait_status(sge_driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 15
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    sge_driver.hold(jid)
    info = sge_driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason == "suspended"
    assert info.worker_node
    time.sleep(2)  # longer than the job's own sleep: it must not have ended
    assert sge_driver.status(jid).status is JobStatus.HELD
    sge_driver.hold(jid)  # already held: fine
    sge_driver.resume(jid)
    info = wait_status(sge_driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 6)


def test_running_job_hold_refused_when_configured(sge_config, tmp_path):
    driver = sync_driver("sge", {**sge_config, "suspend_running": "false"}, tmp_path)
    jid = _started_sleeper(driver, tmp_path)
    try:
        with pytest.raises(DriverError, match="cannot hold a running job"):
            driver.hold(jid)
    finally:
        driver.cancel(jid)


def test_qdel_behind_the_drivers_back_is_a_kill(sge_driver, tmp_path):
    """qacct cannot tell a qdel from a SIGKILL: only the driver's own cancels are REMOVED."""
    jid = _started_sleeper(sge_driver, tmp_path)
    sge_driver._run("qdel", jid)
    info = wait_status(sge_driver, jid, *DONE, timeout=15)
    assert (info.status, info.exit_signal) == (JobStatus.COMPLETED, 9)


def test_error_state_is_held_with_the_reason(sge_driver, tmp_path):
    missing = tmp_path / "no such dir"
    jid = sge_driver.submit(JobSpec("/bin/true", workdir=str(missing)))
    info = wait_status(sge_driver, jid, JobStatus.HELD)  # dispatched (RUNNING), then Eqw
    assert "chdir" in info.hold_reason and str(missing) in info.hold_reason
    missing.mkdir()
    sge_driver.resume(jid)  # qmod -cj: runs now that the directory exists
    info = wait_status(sge_driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)


def test_count_runs_instances_in_a_parallel_environment(sge_driver, tmp_path):
    out = tmp_path / "out"
    spec = JobSpec("/bin/sh", ("-c", "echo $NSLOTS $$; exit 0"), stdout=str(out), count=3)
    jid = sge_driver.submit(spec)
    info = wait_status(sge_driver, jid, *DONE)
    assert info.exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and {line.split()[0] for line in lines} == {"3"}
    record = sge_driver.accounting(jid)
    assert record["granted_pe"] == "smp" and record["slots"] == "3"


def test_without_parallel_environment(sge_config, tmp_path):
    config = {k: v for k, v in sge_config.items() if k != "parallel_environment"}
    driver = sync_driver("sge", config, tmp_path / "state")
    out = tmp_path / "out"
    jid = driver.submit(JobSpec("/bin/sh", ("-c", "echo $$"), stdout=str(out), count=2))
    assert wait_status(driver, jid, *DONE).exit_code == 0  # both instances in one slot
    assert len(out.read_text().split()) == 2
    with pytest.raises(DriverError, match="parallel environment"):
        driver.submit(JobSpec("/bin/true", cpus_per_node=2))


def test_accounting_lag(sge_config, tmp_path, monkeypatch):
    """Until qacct has the job's record, the last state qstat showed is reported."""
    driver = sync_driver("sge", {**sge_config, "accounting_wait_s": 2}, tmp_path)
    jid = driver.submit(JobSpec("/bin/sh", ("-c", "sleep 1; exit 4")))
    wait_status(driver, jid, JobStatus.RUNNING)
    real = driver.accounting
    lag = {"calls": 0, "until": 3}

    def lagging(native_id):
        lag["calls"] += 1
        return None if lag["calls"] <= lag["until"] else real(native_id)

    monkeypatch.setattr(driver, "accounting", lagging)
    seen = []
    info = wait_job(driver, jid, lambda i: seen.append(i.status) or i.finished)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 4)
    assert seen.count(JobStatus.RUNNING) >= 4 and lag["calls"] == 4
    # A record that never comes: after accounting_wait_s the exit status is unknown.
    jid = driver.submit(JobSpec("/bin/true"))
    lag.update(calls=0, until=10**6)
    start = time.monotonic()
    info = wait_job(driver, jid, lambda i: i.finished)
    assert info.status is JobStatus.COMPLETED and "no longer known" in info.exit_reason
    assert time.monotonic() - start >= 2


def test_unknown_job_gets_definite_answer(sge_driver):
    sge_driver.accounting_wait_s = 60.0
    start = time.monotonic()
    info = sge_driver.status("9876543")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "no longer known" in info.exit_reason
    assert time.monotonic() - start < 30  # not submitted here: no 60 s wait for accounting
    sge_driver.cancel("9876543")
    with pytest.raises(DriverError, match="not held"):
        sge_driver.resume("9876543")
    with pytest.raises(DriverError, match="cannot be held"):
        sge_driver.hold("9876543")


def test_down_qmaster_is_an_error(sge_config, tmp_path):
    config = {**sge_config, "sge_qmaster_port": "1", "command_timeout": 20}
    driver = sync_driver("sge", config, tmp_path)
    with pytest.raises(DriverError):
        driver.ping()
    with pytest.raises(DriverError):
        driver.status("1")


def test_a_job_number_given_again_is_a_new_job(sge_driver, tmp_path):
    """Grid Engine restarts its job numbers after a qmaster restart: a number this driver once
    cancelled, given to a new job, is not a cancelled job."""
    first = sge_driver.submit(JobSpec("/bin/true"))
    upcoming = [str(int(first) + n) for n in range(1, 6)]
    for number in upcoming:  # as if earlier jobs with these numbers had been cancelled
        sge_driver._record("cancelled", number)
    jid = sge_driver.submit(JobSpec("/bin/sh", ("-c", "exit 0")))
    assert jid in upcoming, (first, jid)  # no other job took the numbers meanwhile
    info = wait_status(sge_driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0), info
