"""The boinc driver's event loop plumbing: per-key asyncio locks that exclude and do not
accumulate, and the bridge that blocking callers cross into the loop by."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gahp_lrms import DriverError
from gahp_lrms._boinc_loop import KeyedLock, LoopBridge  # private: boinc driver internals as units


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


def test_the_bridge_runs_coroutines_for_threads_and_close_cancels_the_waiting():
    bridge = LoopBridge()

    async def answer(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    async def fail() -> None:
        raise DriverError("no")

    assert bridge.run(answer(21)) == 42
    with pytest.raises(DriverError, match="^no$"):
        bridge.run(fail())
    started = threading.Event()
    outcome: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    def caller() -> None:
        try:
            bridge.run(forever())
        except BaseException as exc:  # what the blocked thread gets
            outcome.append(exc)

    thread = threading.Thread(target=caller)
    thread.start()
    assert started.wait(10)
    finished = []

    async def finish() -> None:
        finished.append(True)

    asyncio.run(bridge.aclose(finish))
    thread.join(10)
    assert finished == [True]
    assert [type(e) for e in outcome] == [DriverError] and "stopping" in str(outcome[0])
    with pytest.raises(DriverError, match="stopping"):
        bridge.run(answer(1))
    assert bridge.loop.is_closed()


def test_the_bridge_refuses_a_blocking_call_from_its_own_loop():
    bridge = LoopBridge()

    async def inner() -> int:
        return 1

    async def on_loop() -> str:
        try:
            bridge.run(inner())
        except RuntimeError as exc:
            return str(exc)
        return "ran"

    assert "on the driver's loop" in bridge.run(on_loop())
    asyncio.run(bridge.aclose(lambda: asyncio.sleep(0)))
