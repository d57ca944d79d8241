"""The boinc driver on the caller's event loop, in-process against the emulator: it starts
no thread of its own, aclose leaves the queued jobs to the next process, and the
per-job exclusion keeps nothing of the jobs once their requests are answered."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from pathlib import Path

import pytest
from lrms_helpers import boinc_driver, until

from gahp_boinc.emulator import EmulatorServer
from gahp_lrms import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.boinc import BoincDriver


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.1) as srv:
        srv.pause_volunteer()
        yield srv


make_driver = functools.partial(boinc_driver, retries=0, batch_window_s=0.2, status_interval=0.2)


def specs(work: Path, n: int) -> list[JobSpec]:
    work.mkdir(exist_ok=True)
    for i in range(n):
        (work / f"in.{i}").write_text(f"job {i}\n")
    return [
        JobSpec(executable="uppercase", workdir=str(work), stdin=f"in.{i}", stdout=f"out.{i}")
        for i in range(n)
    ]


def count(emulator: EmulatorServer, table: str) -> int:
    return emulator.store.one(f"SELECT COUNT(*) AS n FROM {table}")["n"]


async def completed(drv: BoincDriver, ids: list[str]) -> bool:
    infos = [await drv.status(j) for j in ids]
    return [i.status for i in infos] == [JobStatus.COMPLETED] * len(ids)


def test_on_the_callers_loop_the_driver_starts_no_thread_of_its_own(tmp_path, emulator):
    before = {t.ident for t in threading.enumerate()}
    work = tmp_path / "work"

    async def main() -> list[str]:
        drv = make_driver(tmp_path, emulator)
        ids = await asyncio.gather(*(drv.submit(s) for s in specs(work, 6)))
        await until(lambda: count(emulator, "workunit") == 6)
        assert count(emulator, "batch") == 1
        emulator.resume_volunteer()
        await until(lambda: completed(drv, ids))
        new = [t.name for t in threading.enumerate() if t.ident not in before]
        await drv.aclose()
        return new

    new = asyncio.run(main())
    assert (work / "out.3").read_text() == "JOB 3\n"
    # the loop's own executor (asyncio's default: file work, hashing inputs) is the
    # caller's; the emulator serves each request in a thread
    assert [n for n in new if not n.startswith("asyncio_") and "process_request" not in n] == []


def test_aclose_leaves_the_queued_jobs_to_the_next_process(tmp_path, emulator):
    *jobs, late = specs(tmp_path / "work", 4)

    async def first() -> list[str]:
        drv = make_driver(tmp_path, emulator, batch_window_s=600)
        ids = [await drv.submit(s) for s in jobs]
        await drv.aclose()
        assert count(emulator, "workunit") == 0
        assert all((drv.queued_dir / j).exists() for j in ids)
        with pytest.raises(DriverError, match="stopping"):
            await drv.submit(late)
        os.close(drv.owners.fd)  # its process exits
        return ids

    ids = asyncio.run(first())

    async def second() -> None:
        again = make_driver(tmp_path, emulator)
        assert (await again.status(ids[0])).status is JobStatus.IDLE  # taken over, queued
        await until(lambda: not any((again.queued_dir / j).exists() for j in ids))
        assert count(emulator, "workunit") == 3 and count(emulator, "batch") == 1
        emulator.resume_volunteer()
        await until(lambda: completed(again, ids))

    asyncio.run(second())


def test_nothing_is_kept_per_job_once_its_requests_are_answered(tmp_path, emulator):
    async def main() -> BoincDriver:
        drv = make_driver(tmp_path, emulator, batch_window_s=60)
        ids = [await drv.submit(s) for s in specs(tmp_path / "work", 8)]
        # a cancel of a queued job submits its batch first, while statuses come and go
        await asyncio.gather(drv.cancel(ids[0]), *(drv.status(j) for j in ids * 5))
        emulator.resume_volunteer()
        await until(lambda: completed(drv, ids[1:]))
        await asyncio.gather(*(drv.queries.one(j) for j in ids))
        assert (await drv.status(ids[0])).status is JobStatus.REMOVED
        return drv

    drv = asyncio.run(main())
    assert count(emulator, "batch") == 1
    assert len(drv.job_locks) == 0 and drv.submitter.waiting() == 0
    assert drv.projects.pending_templates() == 0


def test_jobs_seen_submitted_are_answered_by_one_bulk_query(tmp_path, emulator):
    """The registry tracks a batch's jobs before their records say submitted: the first
    status round after the queue drained asks the project once, not once per job."""
    drv = make_driver(tmp_path, emulator, status_interval=3600)
    registry = drv.statuses.registry
    assert registry is not None
    tracked_when_submitted = []
    mark_submitted = drv.store.mark_submitted

    def watched(rec):
        tracked_when_submitted.append(rec.job in registry.tracked())
        mark_submitted(rec)

    drv.store.mark_submitted = watched  # type: ignore[method-assign]

    async def main() -> list[JobInfo]:
        ids = await asyncio.gather(*(drv.submit(s) for s in specs(tmp_path / "work", 20)))
        await until(lambda: not any(drv.queued_dir.iterdir()))
        emulator.reset_stats()
        return await asyncio.gather(*(drv.status(j) for j in ids))

    infos = asyncio.run(main())
    assert tracked_when_submitted == [True] * 20
    assert {i.status for i in infos} == {JobStatus.IDLE}
    assert emulator.stats["query_batch2"] == 1, emulator.stats
