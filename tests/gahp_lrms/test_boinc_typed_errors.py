"""The boinc job driver acts on the BOINC client's typed errors (never on their wording): a
project that refuses the authenticator holds recovered jobs at once, a job the project no
longer knows is cancelled all the same."""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import pytest
from lrms_helpers import boinc_driver

from gahp_boinc.emulator import EmulatorServer
from gahp_lrms import JobSpec, JobStatus
from gahp_lrms.boinc import BoincDriver


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.1) as srv:
        srv.pause_volunteer()
        yield srv


make_driver = functools.partial(boinc_driver, retries=0, batch_window_s=0.2)


def submit(drv: BoincDriver, work: Path, n: int) -> list[str]:
    work.mkdir(exist_ok=True)
    ids = []
    for i in range(n):
        (work / f"in.{i}").write_text(f"job {i}\n")
        ids.append(drv.submit(JobSpec(executable="uppercase", workdir=str(work), stdin=f"in.{i}")))
    return ids


def wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("auth", ["refused", "unreadable"])
def test_recovered_jobs_are_held_at_once_when_the_project_cannot_be_addressed(
    tmp_path, emulator, auth
):
    drv = make_driver(tmp_path, emulator, batch_window_s=60)
    ids = submit(drv, tmp_path / "work", 2)
    drv._abandon_queue()  # as if its process were killed before the batch was submitted
    os.close(drv.owners.fd)
    if auth == "refused":
        (tmp_path / "auth").write_text("f" * 32 + "\n")
    else:
        (tmp_path / "auth").unlink()
    again = make_driver(tmp_path, emulator)
    wait_for(lambda: all(again.status(j).status is JobStatus.HELD for j in ids), timeout=10)
    reason = again.status(ids[0]).hold_reason or ""
    expected = "bad authenticator" if auth == "refused" else "authenticator file"
    assert reason.startswith("BOINC submission failed: ") and expected in reason
    assert emulator.store.one("SELECT COUNT(*) AS n FROM workunit")["n"] == 0


def test_cancel_of_a_job_the_project_no_longer_has(tmp_path, emulator):
    drv = make_driver(tmp_path, emulator)
    (job,) = submit(drv, tmp_path / "work", 1)
    wait_for(lambda: json.loads((drv.jobs_dir / f"{job}.json").read_text())["state"] == "submitted")
    with emulator.store.tx() as db:
        db.execute("DELETE FROM workunit WHERE name=?", (job,))
    drv.cancel(job)  # the project answers "no job ...": nothing left to abort
    assert drv.status(job).status is JobStatus.REMOVED
