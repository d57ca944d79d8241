"""Eager start of coroutine handlers: deterministic, on a private event loop.

The runtime hands each chunk of input to :meth:`EagerStarter.call` from the input callback,
outside any task; so do these tests (``call_soon``), except the one about being called from
inside a task. Every test runs on the public-API path of Python 3.11 (a dispatcher task) and,
where there is one, on the standard eager task factory.
"""

import asyncio
import contextvars

import pytest

from gahp_core import _eager  # private: the module under test
from gahp_core._eager import EagerStarter  # private: white-box test of eager tasks

MODES = [False] + ([True] if hasattr(asyncio, "eager_task_factory") else [])


@pytest.fixture(autouse=True, params=MODES, ids=lambda native: "native" if native else "dispatcher")
def _mode(request, monkeypatch):
    monkeypatch.setattr(_eager, "_NATIVE", request.param)


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="caller")


async def eager(coro) -> tuple[asyncio.Task | None, list]:
    """Start ``coro`` eagerly from a plain callback; its task (or None) and outcomes."""
    loop = asyncio.get_running_loop()
    got: list = []
    started = loop.create_future()
    starter = EagerStarter(loop)
    loop.call_soon(
        starter.call,
        lambda: started.set_result(starter.start(coro, lambda v, e: got.append((v, e)))),
    )
    task = await started
    starter.close()  # its idle host, if the coroutine did not keep it
    return task, got


def test_a_coroutine_that_never_waits_finishes_in_the_call():
    async def main():
        async def handler():
            return ("NULL",)

        assert await eager(handler()) == (None, [(("NULL",), None)])

    asyncio.run(main())


def test_an_exception_before_waiting_is_the_outcome():
    async def main():
        async def handler():
            raise ValueError("bad")

        task, got = await eager(handler())
        ((value, exc),) = got
        assert task is None and value is None and isinstance(exc, ValueError)

    asyncio.run(main())


def test_cancelled_before_waiting_has_no_outcome():
    async def main():
        async def handler():
            raise asyncio.CancelledError

        assert await eager(handler()) == (None, [])

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_in_the_task_it_started_in():
    async def main():
        loop = asyncio.get_running_loop()
        gate = loop.create_future()
        steps = []

        async def handler():
            steps.append(asyncio.current_task())
            value = await gate
            await asyncio.sleep(0)  # a bare yield to the loop
            steps.append(asyncio.current_task())
            return value * 2

        task, got = await eager(handler())
        assert isinstance(task, asyncio.Task) and steps == [task]  # ran up to the await
        gate.set_result(21)
        assert await task == 42
        assert steps == [task, task]
        assert got == []  # the runtime gets a waiting handler's outcome from the task

    asyncio.run(main())


def test_a_timeout_entered_in_the_first_step_works():
    async def main():
        loop = asyncio.get_running_loop()

        async def handler():
            async with asyncio.timeout(0):  # needs the current task, from the first line
                await loop.create_future()

        task, _ = await eager(handler())
        with pytest.raises(TimeoutError):
            await task

    asyncio.run(main())


@pytest.mark.parametrize("turns", [0, 1])
def test_cancelling_the_task_reaches_the_waiting_coroutine(turns):
    async def main():
        loop = asyncio.get_running_loop()
        cleaned = []

        async def handler():
            try:
                await loop.create_future()
            finally:
                cleaned.append(True)

        task, _ = await eager(handler())
        for _ in range(turns):  # 0: cancelled before the task's own first step
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == [True]

    asyncio.run(main())


def test_the_handler_runs_in_a_copy_of_the_callers_context():
    async def main():
        seen = []

        async def handler():
            seen.append(VAR.get())
            VAR.set("handler")
            await asyncio.sleep(0)
            seen.append(VAR.get())

        VAR.set("set by caller")
        task, _ = await eager(handler())
        assert VAR.get() == "set by caller"  # the handler's change did not leak out
        await task
        assert seen == ["set by caller", "handler"]

    asyncio.run(main())


def test_called_from_a_task_it_starts_an_ordinary_task():
    async def main():
        ran = []

        async def handler():
            ran.append(True)
            return 1

        starter = EagerStarter(asyncio.get_running_loop())
        task = starter.start(handler(), lambda v, e: ran.append(v))
        assert ran == []  # not run inside the calling task
        assert await task == 1 and ran == [True]

    asyncio.run(main())


async def start_from_callback(starter: EagerStarter, coro, got: list):
    loop = asyncio.get_running_loop()
    started = loop.create_future()
    loop.call_soon(
        starter.call, lambda: started.set_result(starter.start(coro, lambda v, e: got.append(v)))
    )
    return await started


@pytest.mark.parametrize("turns", [0, 1])
def test_a_waiting_coroutine_keeps_its_task_the_next_one_gets_another(turns):
    async def main():
        loop = asyncio.get_running_loop()
        starter = EagerStarter(loop)
        gate = loop.create_future()
        tasks = []

        async def quick(n):
            tasks.append(asyncio.current_task())
            return n

        async def slow():
            tasks.append(asyncio.current_task())
            async with asyncio.timeout(10):  # bound to the host, which goes on with it
                value = await gate
            tasks.append(asyncio.current_task())
            return value

        got: list = []
        assert await start_from_callback(starter, quick(1), got) is None
        for _ in range(turns):  # 1: the idle host has parked by now
            await asyncio.sleep(0)
        task = await start_from_callback(starter, slow(), got)
        assert await start_from_callback(starter, quick(2), got) is None
        gate.set_result("slow")
        assert await task == "slow"
        assert got == [1, 2]
        assert tasks[1] is tasks[3] is task  # slow went on in the task it started in
        assert None not in tasks and tasks[2] is not task  # quick(2) did not run in it
        starter.close()

    asyncio.run(main())


def test_a_coroutine_that_cancels_its_task_does_not_spoil_the_next():
    async def main():
        loop = asyncio.get_running_loop()
        starter = EagerStarter(loop)
        gate = loop.create_future()

        async def rude():
            asyncio.current_task().cancel()
            return "rude"

        async def polite():
            return await gate

        got: list = []
        both = loop.create_future()

        def start_both():  # in one turn of the loop, as requests of one chunk of input
            first = starter.start(rude(), lambda v, e: got.append(v))
            both.set_result((first, starter.start(polite(), lambda v, e: got.append(v))))

        loop.call_soon(starter.call, start_both)
        first, task = await both
        assert first is None
        await asyncio.sleep(0)
        gate.set_result("fine")
        assert await task == "fine"
        assert got == []  # it cancelled its own task: as for any task, that is its outcome
        starter.close()

    asyncio.run(main())
