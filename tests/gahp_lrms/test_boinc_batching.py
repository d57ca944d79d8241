"""The boinc job driver's shared batches, in-process against the emulator: a restart after
the batch reached the project but before the jobs were marked submitted (never submitted
twice), and bulk status when one batch is gone."""

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


make_driver = functools.partial(boinc_driver, retries=1, batch_window_s=0.3, status_interval=0.5)


def specs(work: Path, n: int, app: str = "uppercase") -> list[JobSpec]:
    work.mkdir(exist_ok=True)
    out = []
    for i in range(n):
        (work / f"in.{app}.{i}").write_text(f"job {i}\n")
        out.append(JobSpec(executable=app, workdir=str(work), stdin=f"in.{app}.{i}"))
    return out


async def die(drv: BoincDriver) -> None:
    """As if the driver's process were killed: its queue never flushed, its lock free."""
    await drv.aclose()
    os.close(drv.owners.fd)


def count(emulator: EmulatorServer, table: str) -> int:
    return emulator.store.one(f"SELECT COUNT(*) AS n FROM {table}")["n"]


def unqueued(drv: BoincDriver, ids: list[str]) -> bool:
    return not any((drv.queued_dir / j).exists() for j in ids)


async def states(drv: BoincDriver, ids: list[str]) -> list[JobStatus]:
    return [(await drv.status(j)).status for j in ids]


async def all_completed(drv: BoincDriver, ids: list[str]) -> bool:
    return await states(drv, ids) == [JobStatus.COMPLETED] * len(ids)


def test_restart_after_the_batch_got_in_does_not_submit_twice(tmp_path, emulator):
    async def main() -> None:
        drv = make_driver(tmp_path, emulator)
        ids = [await drv.submit(s) for s in specs(tmp_path / "work", 3)]
        await until(lambda: unqueued(drv, ids))
        assert count(emulator, "workunit") == 3 and count(emulator, "batch") == 1
        # As if blahpd died after submit_batch, before it recorded the jobs as submitted:
        for job in ids:
            path = drv.jobs_dir / f"{job}.json"
            rec = json.loads(path.read_text())
            rec["state"] = "queued"
            path.write_text(json.dumps(rec))
            (drv.queued_dir / job).write_text(drv.owners.me)
        await die(drv)
        again = make_driver(tmp_path, emulator)
        assert await states(again, ids) == [JobStatus.IDLE] * 3
        await until(lambda: unqueued(again, ids))
        records = [json.loads((again.jobs_dir / f"{j}.json").read_text()) for j in ids]
        assert [r["state"] for r in records] == ["submitted"] * 3
        assert count(emulator, "workunit") == 3 and count(emulator, "batch") == 1
        emulator.resume_volunteer()
        await until(lambda: all_completed(again, ids))
        assert [(await again.status(j)).exit_code for j in ids] == [0] * 3

    asyncio.run(main())


def test_restart_with_a_batch_created_but_not_filled_submits_in_a_new_batch(tmp_path, emulator):
    async def main() -> None:
        drv = make_driver(tmp_path, emulator, batch_window_s=60)
        ids = [await drv.submit(s) for s in specs(tmp_path / "work", 2)]
        rec = json.loads((drv.jobs_dir / f"{ids[0]}.json").read_text())
        # the old process got as far as create_batch
        app = emulator.store.app_by_name("uppercase")["id"]
        emulator.store.create_batch(1, app, rec["batch"], 0)
        await die(drv)
        again = make_driver(tmp_path, emulator)
        await again.ping()  # its first request: the queued jobs are taken over
        await until(lambda: unqueued(again, ids))
        assert count(emulator, "workunit") == 2
        emulator.resume_volunteer()
        await until(lambda: all_completed(again, ids))

    asyncio.run(main())


def test_bulk_status_survives_a_batch_that_is_gone(tmp_path, emulator):
    async def main() -> None:
        drv = make_driver(tmp_path, emulator)
        up = [await drv.submit(s) for s in specs(tmp_path / "work", 2)]
        fail = [await drv.submit(s) for s in specs(tmp_path / "work", 2, app="fail")]
        await until(lambda: count(emulator, "workunit") == 4)
        await until(lambda: unqueued(drv, up + fail))
        gone = json.loads((drv.jobs_dir / f"{fail[0]}.json").read_text())["batch"]
        with emulator.store.tx() as db:
            db.execute("UPDATE batch SET name='renamed' WHERE name=?", (gone,))
        await asyncio.sleep(0.6)
        emulator.reset_stats()
        assert await states(drv, up) == [JobStatus.IDLE, JobStatus.IDLE]
        for job in fail:
            info = await drv.status(job)
            assert info.status is JobStatus.COMPLETED and "no longer exists" in info.exit_reason
        # one bulk query (failing on the missing batch, then without it), one direct per job
        assert emulator.stats["query_batch2"] == 4, emulator.stats

    asyncio.run(main())


def test_a_live_process_keeps_its_queued_jobs_a_dead_ones_are_taken_over(tmp_path, emulator):
    async def main() -> None:
        first = make_driver(tmp_path, emulator, batch_window_s=60)
        ids = [await first.submit(s) for s in specs(tmp_path / "work", 2)]
        second = make_driver(tmp_path, emulator)  # e.g. a second blahpd of the same user
        # A witness: a job of the second's own reaches the project, and it alone.
        own = await second.submit(specs(tmp_path / "work", 1, app="fail")[0])
        await until(lambda: not (second.queued_dir / own).exists())
        assert count(emulator, "workunit") == 1  # it did not submit the first one's jobs
        assert all((first.queued_dir / j).exists() for j in ids)
        await die(first)
        third = make_driver(tmp_path, emulator)
        assert await states(third, ids) == [JobStatus.IDLE] * 2  # taken over
        # The dead owner's lock file goes once its jobs are recovered: nothing more follows.
        await until(lambda: not (third.owners_dir / first.owners.me).exists())
        assert unqueued(third, ids)
        assert count(emulator, "workunit") == 3 and count(emulator, "batch") == 2
        await second.aclose()

    asyncio.run(main())
