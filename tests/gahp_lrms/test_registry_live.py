"""The status registry of the slurm, pbs and sge drivers on the live batch systems: one bulk
query for all jobs, changes seen within one interval, exact exit codes, unknown jobs.

They skip without Slurm/Grid Engine and fail under GAHP_REQUIRE_SLURM/_SGE=1 (``batch_env``).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from lrms_helpers import sync_driver

from gahp_lrms import Driver, JobInfo, JobSpec, JobStatus
from gahp_lrms.base import CommandDriver

INTERVAL = 2.0
DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)


def _config(system: str, env: dict[str, str]) -> dict[str, str]:
    config = {"status_interval": INTERVAL, "command_timeout": 20}
    if system in ("slurm", "pbs"):
        config["slurm_conf"] = env["SLURM_CONF"]
    else:
        config["sge_root"] = env["SGE_ROOT"]
        for key, var in (("sge_cell", "SGE_CELL"), ("sge_qmaster_port", "SGE_QMASTER_PORT")):
            if env.get(var):
                config[key] = env[var]
    return config


@pytest.fixture(params=["slurm", "pbs", "sge"])
def system(request, batch_env) -> tuple[str, dict[str, str]]:
    env = batch_env("sge" if request.param == "sge" else "slurm")
    if request.param == "pbs" and shutil.which("qsub") is None:
        pytest.skip("PBS commands not installed (slurm-wlm-torque)")
    return request.param, env


@pytest.fixture
def driver(system, tmp_path: Path):
    name, env = system
    drv = sync_driver(name, _config(name, env), tmp_path / "state")
    assert isinstance(drv.blocking, CommandDriver) and drv.statuses.registry is not None
    submitted: list[str] = []
    submit = drv.submit

    def recording_submit(spec: JobSpec) -> str:
        submitted.append(submit(spec))
        return submitted[-1]

    drv.submit = recording_submit  # type: ignore[method-assign]
    yield drv
    for native_id in submitted:  # never leave a job behind
        try:
            if not drv.query_status(native_id).finished:
                drv.cancel(native_id)
        except Exception as exc:
            print(f"cleanup of job {native_id} failed: {exc}")


def _release_behind_its_back(drv: Driver, native_id: str) -> None:
    """Release a held job with the batch system's own command (not through the driver)."""
    if drv.name == "sge":
        argv = [drv.command_path("qrls"), native_id]  # type: ignore[attr-defined]
    elif drv.name == "pbs":
        argv = ["qrls", native_id]
    else:
        argv = ["scontrol", "release", native_id]
    subprocess.run(argv, env=drv.env, check=True, capture_output=True, timeout=30)  # type: ignore[attr-defined]


def _wait(drv: Driver, native_id: str, wanted, timeout: float = 60) -> JobInfo:
    deadline = time.monotonic() + timeout
    while True:
        info = drv.status(native_id)
        if info.status in wanted:
            return info
        assert time.monotonic() < deadline, f"job {native_id}: still {info}"
        time.sleep(0.1)


def test_many_statuses_one_bulk_query_and_a_change_seen_within_one_interval(driver):
    reg = driver.statuses.registry
    jobs = [driver.submit(JobSpec("/bin/sleep", ("300",), start_held=True)) for _ in range(5)]
    driver.run(reg.refresh())
    before = reg.stats.refreshes
    direct = reg.stats.direct_queries
    for _ in range(20):  # 100 statuses within one interval
        for native_id in jobs:
            assert driver.status(native_id).status is JobStatus.HELD
    assert reg.stats.direct_queries == direct  # all from the bulk query
    assert reg.stats.refreshes - before <= 1
    _release_behind_its_back(driver, jobs[0])
    changed = time.monotonic()
    info = _wait(driver, jobs[0], (JobStatus.IDLE, JobStatus.RUNNING), timeout=INTERVAL + 20)
    seen = time.monotonic() - changed
    # Within one interval plus the time of the query itself (a loaded machine: generous).
    assert seen < INTERVAL + 5, seen
    assert info.status in (JobStatus.IDLE, JobStatus.RUNNING)
    assert all(driver.status(j).status is JobStatus.HELD for j in jobs[1:])


def test_finished_jobs_exact_exit_codes_from_the_bulk_query(driver):
    reg = driver.statuses.registry
    codes = {driver.submit(JobSpec("/bin/sh", ("-c", f"exit {n}"))): n for n in (0, 3, 42)}
    killed = driver.submit(JobSpec("/bin/sh", ("-c", "kill -KILL $$")))
    deadline = time.monotonic() + 90
    while True:
        driver.run(reg.refresh())
        infos = {j: driver.run(reg.status(j)) for j in [*codes, killed]}
        if all(i.finished for i in infos.values()):
            break
        assert time.monotonic() < deadline, infos
        time.sleep(0.5)
    assert reg.stats.direct_queries == 0  # every answer came from the bulk query
    for native_id, code in codes.items():
        info = infos[native_id]
        assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, code, None)
    if driver.name != "pbs" or getattr(driver, "slurm", None) is not None:
        assert (infos[killed].exit_code, infos[killed].exit_signal) == (None, 9)
    # Final: asked no more, the same answer from a new driver (a restarted server).
    again = sync_driver(driver.name, dict(driver.config), driver.state_dir)
    for native_id, code in codes.items():
        assert again.status(native_id).exit_code == code
    assert again.statuses.registry.stats.direct_queries == 0


def test_job_unknown_to_the_registry_and_to_the_batch_system(driver):
    live = driver.submit(JobSpec("/bin/sleep", ("300",), start_held=True))
    assert driver.status(live).status is JobStatus.HELD
    info = driver.status("987654321")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "no longer known" in (info.exit_reason or "")
    assert driver.statuses.registry.stats.direct_queries >= 1
    # A job the server did not submit (another client's) is answered too, then tracked.
    other = driver.submit(JobSpec("/bin/sleep", ("300",), start_held=True))
    fresh = sync_driver(driver.name, dict(driver.config), driver.state_dir.parent / "other")
    assert fresh.status(other).status is JobStatus.HELD
    assert other in fresh.statuses.registry.tracked()


def test_cancel_hold_resume_are_seen_at_once(driver):
    native_id = driver.submit(JobSpec("/bin/sleep", ("300",), start_held=True))
    assert driver.status(native_id).status is JobStatus.HELD
    driver.resume(native_id)
    assert driver.status(native_id).status in (JobStatus.IDLE, JobStatus.RUNNING)
    driver.cancel(native_id)
    assert driver.status(native_id).status is JobStatus.REMOVED


def test_per_job_path_remains(system, tmp_path):
    name, env = system
    drv = sync_driver(name, {**_config(name, env), "status_registry": "false"}, tmp_path)
    assert drv.statuses.registry is None
    info = drv.status("987654321")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
