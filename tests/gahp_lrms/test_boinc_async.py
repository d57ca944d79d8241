"""The boinc driver on an event loop, in-process against the emulator: on the server's loop
it starts no thread of its own, aclose leaves the queued jobs to the next process, and the
per-job exclusion keeps nothing of the jobs once their requests are answered."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from lrms_helpers import boinc_driver

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import wait_for
from gahp_lrms import DriverError, JobSpec, JobStatus


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.1) as srv:
        srv.pause_volunteer()
        yield srv


@pytest.fixture
def server_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop run by "the server" in a thread of its own, as blahpd's."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="server-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


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


def on(loop: asyncio.AbstractEventLoop, coro) -> object:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(30)


def test_on_the_servers_loop_the_driver_starts_no_thread_of_its_own(
    tmp_path, emulator, server_loop
):
    before = {t.ident for t in threading.enumerate()}
    drv = make_driver(tmp_path, emulator, loop=server_loop)
    work = tmp_path / "work"
    with ThreadPoolExecutor(4, thread_name_prefix="worker") as pool:  # blahpd's worker pool
        ids = list(pool.map(drv.submit, specs(work, 6)))
        wait_for(lambda: count(emulator, "workunit") == 6)
        assert count(emulator, "batch") == 1
        emulator.resume_volunteer()
        for job in ids:
            wait_for(lambda job=job: drv.status(job).status is JobStatus.COMPLETED)
    assert (work / "out.3").read_text() == "JOB 3\n"
    new = [t.name for t in threading.enumerate() if t.ident not in before]
    # the loop's own executor (asyncio's default, hashing inputs) is the server's; the
    # emulator serves each request in a thread
    assert [n for n in new if not n.startswith("asyncio_") and "process_request" not in n] == []
    on(server_loop, drv.aclose())
    assert server_loop.is_running()  # the server's loop is left to the server


def test_aclose_leaves_the_queued_jobs_to_the_next_process(tmp_path, emulator, server_loop):
    drv = make_driver(tmp_path, emulator, loop=server_loop, batch_window_s=600)
    *jobs, late = specs(tmp_path / "work", 4)
    ids = [drv.submit(s) for s in jobs]
    on(server_loop, drv.aclose())
    assert count(emulator, "workunit") == 0
    assert all((drv.queued_dir / j).exists() for j in ids)
    with pytest.raises(DriverError, match="stopping"):
        drv.submit(late)
    assert drv.status(ids[0]).status is JobStatus.IDLE  # from its record
    os.close(drv.owners.fd)  # its process exits
    again = make_driver(tmp_path, emulator)
    wait_for(lambda: not any((again.queued_dir / j).exists() for j in ids))
    assert count(emulator, "workunit") == 3 and count(emulator, "batch") == 1
    emulator.resume_volunteer()
    for job in ids:
        wait_for(lambda job=job: again.status(job).status is JobStatus.COMPLETED)


def test_nothing_is_kept_per_job_once_its_requests_are_answered(tmp_path, emulator):
    drv = make_driver(tmp_path, emulator, batch_window_s=60)
    ids = [drv.submit(s) for s in specs(tmp_path / "work", 8)]
    with ThreadPoolExecutor(8) as pool:
        # a cancel of a queued job submits its batch first, while statuses come and go
        cancel = pool.submit(drv.cancel, ids[0])
        list(pool.map(drv.status, ids * 5))
        cancel.result(30)
        emulator.resume_volunteer()
        for job in ids[1:]:
            wait_for(lambda job=job: drv.status(job).status is JobStatus.COMPLETED)
        list(pool.map(drv.query_status, ids))
    assert drv.status(ids[0]).status is JobStatus.REMOVED
    assert count(emulator, "batch") == 1
    assert len(drv._job_locks) == 0 and drv._queued == {}
    assert len(drv._template_locks) == 0


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
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(drv.submit, specs(tmp_path / "work", 20)))
        wait_for(lambda: not any(drv.queued_dir.iterdir()))
        emulator.reset_stats()
        infos = list(pool.map(drv.status, ids))
    assert tracked_when_submitted == [True] * 20
    assert {i.status for i in infos} == {JobStatus.IDLE}
    assert emulator.stats["query_batch2"] == 1, emulator.stats
