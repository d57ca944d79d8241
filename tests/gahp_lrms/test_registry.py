"""The status registry's logic, in-process, with a fake clock and a fake bulk query (the
registry's requests awaited on a loop of the test's: :class:`Sync`)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import pytest

from gahp_core import setting_names
from gahp_lrms import BlockingDriver, DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.base import Features, ThreadedDriver
from gahp_lrms.config import RegistryConfig
from gahp_lrms.registry import StatusRegistry, info_from_json, info_to_json

IDLE = JobInfo(JobStatus.IDLE)
RUNNING = JobInfo(JobStatus.RUNNING, worker_node="node1", wallclock_s=3.0)
DONE = JobInfo(JobStatus.COMPLETED, exit_code=7, exit_reason="exited with status 7")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class FakeBatch:
    """A batch system: ``jobs`` it knows; ``down`` makes every query fail."""

    def __init__(self, jobs: Mapping[str, JobInfo] | None = None) -> None:
        self.jobs: dict[str, JobInfo] = dict(jobs or {})
        self.down = False
        self.bulk_calls: list[list[str]] = []
        self.direct_calls: list[str] = []
        self.hidden: set[str] = set()  # ids the bulk query leaves out

    async def bulk(self, ids: Sequence[str]) -> dict[str, JobInfo]:
        self.bulk_calls.append(list(ids))
        if self.down:
            raise DriverError("squeue failed: Unable to contact slurm controller")
        return {i: self.jobs[i] for i in ids if i in self.jobs and i not in self.hidden}

    async def direct(self, native_id: str) -> JobInfo:
        self.direct_calls.append(native_id)
        if self.down:
            raise DriverError("scontrol failed: Unable to contact slurm controller")
        return self.jobs.get(native_id, JobInfo(JobStatus.COMPLETED, exit_reason="unknown"))


class Sync:
    """A registry whose requests (``status``, ``refresh``) each run to their end on a loop
    of the test's, their journal lines written; everything else is the registry's."""

    def __init__(self, registry: StatusRegistry) -> None:
        self.registry = registry
        self.loop = asyncio.new_event_loop()
        weakref.finalize(self, self.loop.close)

    def run(self, coro):
        """Run ``coro``, then wait until the journal has what it changed."""
        result = self.loop.run_until_complete(coro)
        self.loop.run_until_complete(self.registry.flush())
        return result

    def status(self, native_id: str) -> JobInfo:
        return self.run(self.registry.status(native_id))

    def refresh(self) -> None:
        self.run(self.registry.refresh())

    def __getattr__(self, name: str):
        return getattr(self.registry, name)


def make(batch: FakeBatch, clock: Clock, journal: Path | None = None, **kw) -> Sync:
    kw.setdefault("interval", 10.0)
    kw.setdefault("stale_limit", 600.0)
    return Sync(StatusRegistry(batch.bulk, batch.direct, journal=journal, clock=clock, **kw))


def test_one_bulk_query_per_interval_for_all_tracked_jobs():
    batch, clock = FakeBatch({str(i): IDLE for i in range(100)}), Clock()
    reg = make(batch, clock)
    for i in range(100):
        reg.track(str(i))
    assert [reg.status(str(i)) for i in range(100)] == [IDLE] * 100
    assert len(batch.bulk_calls) == 1 and sorted(batch.bulk_calls[0], key=int) == [
        str(i) for i in range(100)
    ]
    assert batch.direct_calls == []
    batch.jobs["5"] = RUNNING
    clock.now += 9.9  # within the interval: the data is current enough
    assert reg.status("5") == IDLE and len(batch.bulk_calls) == 1
    clock.now += 0.1  # one interval after the query: the next request refreshes
    assert reg.status("5") == RUNNING
    assert [reg.status(str(i)).status for i in range(100)].count(JobStatus.RUNNING) == 1
    assert len(batch.bulk_calls) == 2


def test_finished_job_is_final_and_exact():
    batch, clock = FakeBatch({"1": RUNNING, "2": IDLE}), Clock()
    reg = make(batch, clock)
    reg.track("1")
    reg.track("2")
    assert reg.status("1") == RUNNING
    batch.jobs["1"] = DONE
    clock.now += 10
    assert reg.status("1") == DONE
    assert reg.status("1").exit_code == 7
    batch.jobs["1"] = IDLE  # whatever the batch system says later (e.g. an id reused)
    batch.down = True
    clock.now += 10_000  # far beyond the staleness limit
    assert reg.status("1") == DONE  # a final state is never stale
    clock.now += 10
    batch.down = False
    reg.status("2")
    assert "1" not in batch.bulk_calls[-1]  # no longer asked for


def test_an_id_the_batch_system_gives_again_is_a_new_job(tmp_path):
    """A reinstalled cell (or a wrapped counter) reuses ids: a new submission must not be
    answered with the final state of the earlier job of the same id, also after a restart."""
    batch, clock = FakeBatch({"7": DONE}), Clock()
    reg = make(batch, clock, journal=tmp_path / "j.jsonl")
    reg.track("7")
    assert reg.status("7") == DONE
    batch.jobs["7"] = IDLE  # the id given again, to a new job
    reg.track("7")
    clock.now += 11
    assert reg.status("7") == IDLE
    again = make(batch, clock, journal=tmp_path / "j.jsonl")
    clock.now += 11
    assert again.status("7") == IDLE


def test_unknown_or_left_out_jobs_are_queried_directly():
    batch, clock = FakeBatch({"1": IDLE, "2": RUNNING, "3": IDLE}), Clock()
    reg = make(batch, clock)
    reg.track("1")
    reg.track("2")
    batch.hidden.add("2")  # the bulk query cannot describe it
    assert reg.status("1") == IDLE
    assert reg.status("2") == RUNNING and batch.direct_calls == ["2"]
    assert reg.status("3") == IDLE and batch.direct_calls == ["2", "3"]  # never tracked
    assert "3" in reg.tracked()  # from now on it is
    assert reg.status("3") == IDLE and batch.direct_calls == ["2", "3"]  # current: cached
    clock.now += 10
    batch.jobs["3"] = RUNNING
    assert reg.status("3") == RUNNING and "3" in batch.bulk_calls[-1]
    # Described before, left out by the latest query: its old state is not answered.
    batch.hidden.add("1")
    batch.jobs["1"] = RUNNING
    clock.now += 10
    assert reg.status("1") == RUNNING and batch.direct_calls[-1] == "1"


def test_a_job_changed_by_the_server_is_queried_directly():
    batch, clock = FakeBatch({"1": RUNNING}), Clock()
    reg = make(batch, clock)
    reg.track("1")
    assert reg.status("1") == RUNNING
    batch.jobs["1"] = JobInfo(JobStatus.HELD, hold_reason="suspended")  # e.g. BLAH_JOB_HOLD
    reg.invalidate("1")
    assert reg.status("1").status is JobStatus.HELD
    assert batch.direct_calls == ["1"] and len(batch.bulk_calls) == 1


def test_concurrent_requests_share_one_refresh():
    batch, clock = FakeBatch({str(i): IDLE for i in range(50)}), Clock()
    bulk = batch.bulk

    async def main() -> list[JobInfo]:
        release = asyncio.Event()
        asked: list[str] = []

        async def slow_bulk(ids):
            await release.wait()
            return await bulk(ids)

        reg = StatusRegistry(slow_bulk, batch.direct, interval=10, clock=clock)
        for i in range(50):
            reg.track(str(i))

        async def ask(i: str) -> JobInfo:
            asked.append(i)
            return await reg.status(i)

        tasks = [asyncio.ensure_future(ask(str(i))) for i in range(50)]
        while len(asked) < 50:  # every request has been made before the query answers
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        release.set()
        return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    assert len(results) == 50 and set(results) == {IDLE}
    assert len(batch.bulk_calls) == 1 and batch.direct_calls == []


def test_a_request_given_up_does_not_cancel_the_refresh_others_wait_for():
    batch, clock = FakeBatch({"1": IDLE, "2": RUNNING}), Clock()
    bulk = batch.bulk

    async def main() -> JobInfo:
        release = asyncio.Event()

        async def slow_bulk(ids):
            await release.wait()
            return await bulk(ids)

        reg = StatusRegistry(slow_bulk, batch.direct, interval=10, clock=clock)
        reg.track("1")
        reg.track("2")
        first = asyncio.ensure_future(reg.status("1"))
        second = asyncio.ensure_future(reg.status("2"))
        await asyncio.sleep(0)
        first.cancel()  # its client went away
        await asyncio.sleep(0)
        release.set()
        return await second

    assert asyncio.run(main()) == RUNNING
    assert len(batch.bulk_calls) == 1 and batch.direct_calls == []


def test_outage_answers_last_known_states_within_the_limit():
    batch, clock = FakeBatch({"1": RUNNING, "2": IDLE}), Clock()
    reg = make(batch, clock, stale_limit=300)
    reg.track("1")
    reg.track("2")
    assert reg.status("1") == RUNNING and reg.status("2") == IDLE
    batch.down = True
    clock.now += 10
    assert reg.status("1") == RUNNING  # the refresh failed: last known state
    assert reg.status("2") == IDLE
    assert len(batch.bulk_calls) == 2  # one failed attempt, not one per request
    with pytest.raises(DriverError, match="Unable to contact"):
        reg.status("99")  # never known: asked directly, and that fails: an error, no guess
    clock.now += 280  # 290 s after the states were last seen true
    assert reg.status("1") == RUNNING
    assert len(batch.bulk_calls) == 3  # retried once per interval
    clock.now += 20  # 310 s
    with pytest.raises(DriverError, match="not answered for 310 s"):
        reg.status("1")
    batch.down = False
    batch.jobs["1"] = DONE
    clock.now += 10
    assert reg.status("1") == DONE  # recovered: the true state
    assert reg.status("2") == IDLE


def test_refresh_under_way_does_not_undo_a_newer_direct_answer():
    batch, clock = FakeBatch({"1": RUNNING}), Clock()
    reg = make(batch, clock)
    reg.track("1")
    held = JobInfo(JobStatus.HELD, hold_reason="suspended")

    async def bulk(ids):  # the job is held while the query runs, after it read the state
        answer = {"1": RUNNING}
        batch.jobs["1"] = held
        clock.now += 1
        reg.invalidate("1")
        assert await reg.registry.status("1") == held  # the server's own hold: asked directly
        return answer

    reg.registry.bulk = bulk
    reg.refresh()
    assert reg.status("1") == held


def test_journal_keeps_tracked_jobs_and_states_across_a_restart(tmp_path):
    journal = tmp_path / "state" / "status-registry.jsonl"
    batch, clock = FakeBatch({"1": RUNNING, "2": DONE, "3": IDLE}), Clock()
    reg = make(batch, clock, journal)
    for i in "123":
        reg.track(i)
    assert reg.status("1") == RUNNING
    # A new registry on the same journal (a restarted server), the batch system down.
    batch.down = True
    clock.now += 30
    again = make(batch, clock, journal)
    assert sorted(again.tracked()) == ["1", "2", "3"]
    assert again.status("1") == RUNNING
    assert again.status("2") == DONE
    assert again.status("3") == IDLE
    assert batch.direct_calls == []
    batch.down = False
    batch.jobs["1"] = DONE
    clock.now += 10
    assert again.status("1") == DONE


def test_journal_is_compacted_and_tolerates_a_torn_line(tmp_path):
    journal = tmp_path / "reg.jsonl"
    batch, clock = FakeBatch({"1": IDLE}), Clock()
    reg = make(batch, clock, journal)
    reg.track("1")
    for n in range(1100):  # many changes of one job
        batch.jobs["1"] = JobInfo(JobStatus.RUNNING, worker_node=f"node{n}")
        clock.now += 10
        reg.status("1")
    assert len(journal.read_text().splitlines()) < 1100
    with open(journal, "a") as fh:
        fh.write('{"id": "2", "inf')  # a crash in the middle of a write
    again = make(batch, clock, journal)
    assert again.tracked() == ["1"]
    batch.down = True
    assert again.status("1").worker_node == "node1099"


def test_journal_is_not_rewritten_for_the_running_time_alone(tmp_path):
    journal = tmp_path / "reg.jsonl"
    batch, clock = FakeBatch({"1": RUNNING}), Clock()
    reg = make(batch, clock, journal, stale_limit=600)  # written at least every 60 s
    reg.track("1")
    assert reg.status("1") == RUNNING
    lines = len(journal.read_text().splitlines())
    for n in range(5):  # 50 s of refreshes: only the running time changes
        batch.jobs["1"] = attrs.evolve(RUNNING, wallclock_s=10.0 + n)
        clock.now += 10
        assert reg.status("1").wallclock_s == 10.0 + n
    assert len(journal.read_text().splitlines()) == lines
    clock.now += 10  # 60 s after it was written: written again, as seen true now
    reg.status("1")
    assert len(journal.read_text().splitlines()) == lines + 1
    # A restart during an outage: the limit counts from that last write.
    batch.down = True
    clock.now += 590
    again = make(batch, clock, journal, stale_limit=600)
    assert again.status("1").status is JobStatus.RUNNING
    clock.now += 20
    with pytest.raises(DriverError, match="not answered for 610 s"):
        again.status("1")


def test_finished_jobs_are_forgotten_after_keep_finished(tmp_path):
    journal = tmp_path / "reg.jsonl"
    batch, clock = FakeBatch({"1": DONE, "2": IDLE}), Clock()
    reg = make(batch, clock, journal, keep_finished=3600)
    reg.track("1")
    reg.track("2")
    assert reg.status("1") == DONE
    clock.now += 3601
    assert sorted(make(batch, clock, journal, keep_finished=3600).tracked()) == ["2"]


def test_info_json_round_trip():
    info = JobInfo(JobStatus.COMPLETED, exit_signal=9, exit_reason="killed", wallclock_s=1.5)
    assert info_from_json(info_to_json(info)) == info


@pytest.mark.parametrize("name", ["slurm", "pbs", "sge", "boinc"])
def test_every_driver_reads_the_registry_keys_alike(name, tmp_path):
    from lrms_helpers import sync_driver

    base = {} if name == "boinc" else {"bin_dir": str(tmp_path / "bin")}  # never run here
    off = sync_driver(
        name,
        {**base, "status_interval": 2.5, "stale_limit_s": 60, "status_registry": "no"},
        tmp_path,
    )
    assert (
        setting_names(RegistryConfig)
        <= type(getattr(off.driver, "blocking", off.driver)).known_keys()
    )
    assert (off.statuses.interval, off.statuses.stale_limit, off.statuses.enabled) == (
        2.5,
        60.0,
        False,
    )
    assert off.statuses.registry is None
    on = sync_driver(name, {**base, "status_interval": 7}, tmp_path / "on")
    registry = on.statuses.registry
    assert registry is not None and registry is on.statuses.registry  # built once
    assert (registry.interval, registry.stale_limit) == (7.0, 1800.0)
    assert registry.journal == tmp_path / "on" / "status-registry.jsonl"
    assert registry.name == ("BOINC project" if name == "boinc" else type(on.blocking).system)
    for key, value in (("stale_limit_s", "soon"), ("status_interval", "2.5")):
        with pytest.raises(
            DriverError, match=f"{name} driver: {key} must be a number of 0 or more, not '"
        ):
            sync_driver(name, {**base, key: value}, tmp_path / "bad")
    with pytest.raises(DriverError, match=f"{name} driver: status_registry must be true or"):
        sync_driver(name, {**base, "status_registry": "sometimes"}, tmp_path / "bad")


class Declared(BlockingDriver):
    """A blocking driver with a bulk query, declared: ``jobs`` it knows."""

    name = "declared"
    config_class = RegistryConfig
    features = Features(bulk_status=True)

    def __init__(self, config, state_dir) -> None:
        super().__init__(config, state_dir)
        self.jobs: dict[str, JobInfo] = {}
        self.bulk_calls = 0

    def bulk_status(self, native_ids):
        self.bulk_calls += 1
        return {i: self.jobs[i] for i in native_ids if i in self.jobs}

    def status(self, native_id):
        return self.jobs.get(native_id, JobInfo(JobStatus.COMPLETED, exit_reason="unknown"))

    def submit(self, spec):
        self.jobs["1"] = RUNNING
        return "1"

    def cancel(self, native_id):
        self.jobs[native_id] = JobInfo(JobStatus.REMOVED)

    def hold(self, native_id):
        self.jobs[native_id] = JobInfo(JobStatus.HELD)

    def resume(self, native_id):
        self.jobs[native_id] = IDLE

    def ping(self):
        pass


@pytest.mark.parametrize("request_name", ["cancel", "hold", "resume"])
def test_the_adapter_asks_a_job_the_server_changed_directly(request_name, tmp_path):
    """Status of a declared bulk driver comes from the registry (one bulk query per
    interval), but a job the server just changed is asked directly, not answered from it."""
    blocking = Declared({"status_interval": 3600}, tmp_path)

    async def main() -> tuple[JobInfo, JobInfo]:
        drv = ThreadedDriver(blocking)
        job = await drv.submit(JobSpec("/bin/x"))
        before = await drv.status(job)
        await getattr(drv, request_name)(job)
        after = await drv.status(job)
        await drv.aclose()
        return before, after

    before, after = asyncio.run(main())
    assert before == RUNNING and blocking.bulk_calls == 1
    assert after == blocking.jobs["1"] != RUNNING


def test_a_driver_that_declares_no_bulk_query_is_asked_per_job(tmp_path):
    class Undeclared(Declared):
        features = Features()

    blocking = Undeclared({}, tmp_path)

    async def main() -> JobInfo:
        drv = ThreadedDriver(blocking)
        assert drv.statuses.registry is None
        return await drv.status(await drv.submit(JobSpec("/bin/x")))

    assert asyncio.run(main()) == RUNNING and blocking.bulk_calls == 0


def test_a_request_does_not_wait_for_the_journals_lock(tmp_path):
    """Another process holds the journal's lock (a compaction on a shared home): requests
    are answered meanwhile; the journal gets the lines once the lock is free."""
    journal = tmp_path / "status-registry.jsonl"
    batch, clock = FakeBatch({"1": RUNNING}), Clock()
    lock = os.open(str(journal) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    released = threading.Event()

    def release() -> None:
        released.set()
        os.close(lock)  # frees the lock

    async def main() -> tuple[JobInfo, bool]:
        reg = StatusRegistry(batch.bulk, batch.direct, journal=journal, clock=clock)
        fcntl.flock(lock, fcntl.LOCK_EX)
        timer = threading.Timer(5.0, release)  # a registry that waits answers after this
        timer.start()
        try:
            reg.track("1")
            info = await reg.status("1")
            answered_first = not released.is_set()
        finally:
            timer.join()
        await reg.aclose()
        return info, answered_first

    info, answered_first = asyncio.run(main())
    assert info == RUNNING and answered_first
    assert sorted(make(batch, clock, journal).tracked()) == ["1"]  # written once free
