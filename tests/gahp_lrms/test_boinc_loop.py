"""The boinc driver's event loop plumbing: per-key asyncio locks that exclude and do not
accumulate, and the driver's background tasks, cancelled together when it stops."""

from __future__ import annotations

import asyncio

import pytest

from gahp_lrms import DriverError
from gahp_lrms._boinc_loop import KeyedLock, Tasks  # private: boinc driver internals as units


async def let_others_run() -> None:
    """Let every ready task run until it blocks (asyncio runs them in order, one loop)."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_one_holder_per_key_the_others_in_turn():
    async def main() -> list[str]:
        locks = KeyedLock()
        log: list[str] = []
        release = asyncio.Event()

        async def user(name: str, key: str, wait: bool = False) -> None:
            async with locks.hold(key):
                log.append(f"{name} in")
                if wait:
                    await release.wait()
                log.append(f"{name} out")

        first = asyncio.create_task(user("a", "job-1", wait=True))
        await let_others_run()
        rest = [asyncio.create_task(user("b", "job-1")), asyncio.create_task(user("c", "job-2"))]
        await let_others_run()  # b waits for a; c, another key, goes ahead
        assert len(locks) == 1
        release.set()
        await asyncio.gather(first, *rest)
        assert len(locks) == 0
        return log

    log = asyncio.run(main())
    assert log.index("a out") < log.index("b in")
    assert log.index("c out") < log.index("a out")


def test_the_lock_table_keeps_no_key_once_released_or_given_up():
    async def main() -> KeyedLock:
        locks = KeyedLock()
        for i in range(100):
            async with locks.hold(f"job-{i}"):
                pass
        with pytest.raises(RuntimeError):
            async with locks.hold("failing"):
                raise RuntimeError("boom")
        held = asyncio.Event()

        async def holder() -> None:
            async with locks.hold("busy"):
                held.set()
                await asyncio.Event().wait()

        async def waiter() -> None:
            async with locks.hold("busy"):
                pass

        tasks = [asyncio.create_task(holder())]
        await held.wait()
        tasks.append(asyncio.create_task(waiter()))
        await let_others_run()
        for task in reversed(tasks):  # the waiter gives up first, then the holder
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return locks

    assert len(asyncio.run(main())) == 0


def test_closing_the_tasks_cancels_them_and_refuses_requests_after():
    async def main() -> tuple[list[str], Tasks]:
        tasks = Tasks()
        log: list[str] = []

        async def forever() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                log.append("cancelled")
                raise

        async def quick() -> None:
            log.append("ran")

        tasks.start(forever())
        tasks.start(quick())
        await let_others_run()
        assert len(tasks) == 1  # the quick one is gone once it ended
        tasks.check_open()
        await tasks.aclose()
        with pytest.raises(DriverError, match="stopping"):
            tasks.check_open()
        late = tasks.start(quick())  # started after the close: cancelled at once
        await asyncio.gather(late, return_exceptions=True)
        assert late.cancelled()
        return log, tasks

    log, tasks = asyncio.run(main())
    assert log == ["ran", "cancelled"] and len(tasks) == 0
