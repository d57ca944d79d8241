"""The boinc job driver acts on the BOINC client's typed errors (never on their wording): a
project that refuses the authenticator holds recovered jobs at once, a job the project no
longer knows is cancelled all the same."""

from __future__ import annotations

import asyncio
import functools
import json
import os
from pathlib import Path

import pytest
from lrms_helpers import boinc_driver, until

from gahp_boinc.emulator import EmulatorServer
from gahp_lrms import JobSpec, JobStatus
from gahp_lrms.boinc import BoincDriver


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.1) as srv:
        srv.pause_volunteer()
        yield srv


make_driver = functools.partial(boinc_driver, retries=0, batch_window_s=0.2)


async def submit(drv: BoincDriver, work: Path, n: int) -> list[str]:
    work.mkdir(exist_ok=True)
    for i in range(n):
        (work / f"in.{i}").write_text(f"job {i}\n")
    return [
        await drv.submit(JobSpec(executable="uppercase", workdir=str(work), stdin=f"in.{i}"))
        for i in range(n)
    ]


async def held(drv: BoincDriver, ids: list[str]) -> bool:
    return [(await drv.status(j)).status for j in ids] == [JobStatus.HELD] * len(ids)


@pytest.mark.parametrize("auth", ["refused", "unreadable"])
def test_recovered_jobs_are_held_at_once_when_the_project_cannot_be_addressed(
    tmp_path, emulator, auth
):
    async def first() -> list[str]:
        drv = make_driver(tmp_path, emulator, batch_window_s=60)
        ids = await submit(drv, tmp_path / "work", 2)
        await drv.aclose()  # its process stops before the batch was submitted
        os.close(drv.owners.fd)
        return ids

    ids = asyncio.run(first())
    if auth == "refused":
        (tmp_path / "auth").write_text("f" * 32 + "\n")
    else:
        (tmp_path / "auth").unlink()

    async def second() -> str:
        again = make_driver(tmp_path, emulator)
        await until(lambda: held(again, ids), timeout=10)
        return (await again.status(ids[0])).hold_reason or ""

    reason = asyncio.run(second())
    expected = "bad authenticator" if auth == "refused" else "authenticator file"
    assert reason.startswith("BOINC submission failed: ") and expected in reason
    assert emulator.store.one("SELECT COUNT(*) AS n FROM workunit")["n"] == 0


def test_cancel_of_a_job_the_project_no_longer_has(tmp_path, emulator):
    async def main() -> JobStatus:
        drv = make_driver(tmp_path, emulator)
        (job,) = await submit(drv, tmp_path / "work", 1)
        record = drv.jobs_dir / f"{job}.json"
        await until(lambda: json.loads(record.read_text())["state"] == "submitted")
        with emulator.store.tx() as db:
            db.execute("DELETE FROM workunit WHERE name=?", (job,))
        await drv.cancel(job)  # the project answers "no job ...": nothing left to abort
        return (await drv.status(job)).status

    assert asyncio.run(main()) is JobStatus.REMOVED
