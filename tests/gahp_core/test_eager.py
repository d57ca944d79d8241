"""Eager start of coroutine handlers: deterministic, on a private event loop."""

import asyncio
import contextvars

import pytest

from gahp_core.eager import start_eagerly

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="caller")


def outcomes() -> tuple[list, object]:
    got: list = []
    return got, lambda value, exc: got.append((value, exc))


def test_a_coroutine_that_never_waits_finishes_in_the_call():
    async def main():
        async def handler():
            return ("NULL",)

        got, finished = outcomes()
        assert start_eagerly(asyncio.get_running_loop(), handler(), finished) is None
        assert got == [(("NULL",), None)]

    asyncio.run(main())


def test_an_exception_before_waiting_is_the_outcome():
    async def main():
        async def handler():
            raise ValueError("bad")

        got, finished = outcomes()
        assert start_eagerly(asyncio.get_running_loop(), handler(), finished) is None
        ((value, exc),) = got
        assert value is None and isinstance(exc, ValueError)

    asyncio.run(main())


def test_cancelled_before_waiting_has_no_outcome():
    async def main():
        async def handler():
            raise asyncio.CancelledError

        got, finished = outcomes()
        assert start_eagerly(asyncio.get_running_loop(), handler(), finished) is None
        assert got == []

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_in_a_task_with_what_it_awaited():
    async def main():
        loop = asyncio.get_running_loop()
        gate = loop.create_future()
        steps = []

        async def handler():
            steps.append(("first", asyncio.current_task()))
            value = await gate
            await asyncio.sleep(0)  # a bare yield to the loop
            steps.append(("after", asyncio.current_task()))
            return value * 2

        got, finished = outcomes()
        task = start_eagerly(loop, handler(), finished)
        assert isinstance(task, asyncio.Task)
        assert len(steps) == 1 and got == []  # ran up to the await, at once...
        assert steps[0][1] is not task  # ...in the caller, not in a task of its own
        gate.set_result(21)
        assert await task == 42
        assert steps[1] == ("after", task)
        assert got == []  # the runtime gets a waiting handler's outcome from the task

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

        task = start_eagerly(loop, handler(), outcomes()[1])
        for _ in range(turns):  # 0: cancelled before the task's first step
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == [True]

    asyncio.run(main())


def test_the_handler_runs_in_a_copy_of_the_callers_context():
    async def main():
        loop = asyncio.get_running_loop()
        seen = []

        async def handler():
            seen.append(VAR.get())
            VAR.set("handler")
            await asyncio.sleep(0)
            seen.append(VAR.get())

        VAR.set("set by caller")
        task = start_eagerly(loop, handler(), outcomes()[1])
        assert VAR.get() == "set by caller"  # the handler's change did not leak out
        await task
        assert seen == ["set by caller", "handler"]

    asyncio.run(main())
