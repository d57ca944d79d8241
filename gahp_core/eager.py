"""Start a coroutine at once; make a Task of it only if it has to wait.

Most asynchronous GAHP handlers either finish without waiting (a no-op, a cached answer)
or wait for I/O. A Task for each costs a callback round trip through the event loop
before the handler even starts and another one when it ends; running the first step at
once, in the caller, avoids both for the handlers that never wait (what Python 3.12
calls an eager task). The first step runs in a copy of the caller's context and outside
any task: ``asyncio.current_task()`` is None until the handler first waits.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any

_TAKEN: Any = object()


def start_eagerly(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    finished: Callable[[Any, BaseException | None], None],
) -> asyncio.Task[Any] | None:
    """Run ``coro`` until it first waits; then return a Task that drives the rest.

    If it finishes before waiting, call ``finished(value, exception)`` and return None
    (not if it raised CancelledError: a cancelled handler has no outcome).
    """
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration as stop:
        finished(stop.value, None)
        return None
    except asyncio.CancelledError:
        return None
    except Exception as exc:
        finished(None, exc)
        return None
    return loop.create_task(_Started(coro, waiting_on), context=context)


class _Started(Coroutine[Any, Any, Any]):
    """A coroutine whose first step already ran: hands a Task what that step yielded,
    then passes everything through."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def send(self, value: Any) -> Any:
        first = self._first
        if first is not _TAKEN:
            self._first = _TAKEN
            return first
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._first = _TAKEN
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self._first = _TAKEN
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        try:
            step = self.send(None)
            while True:
                try:
                    value = yield step
                except BaseException as exc:  # noqa: BLE001 - passed on to the coroutine
                    step = self.throw(exc)
                else:
                    step = self.send(value)
        except StopIteration as stop:
            return stop.value

    def __repr__(self) -> str:
        return f"<started {self._coro!r}>"
