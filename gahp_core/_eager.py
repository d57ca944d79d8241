"""Start coroutines at once, in a task, and learn at once if they finished.

Most asynchronous GAHP handlers either finish without waiting (a no-op, a cached answer)
or wait for I/O. A plain Task runs its first step only on a later turn of the event loop
and tells its outcome on yet another one, which for a handler that does not wait costs
several times the handler itself. :class:`EagerStarter` runs the first step in the call,
inside a task (``asyncio.current_task()`` is set, as ``asyncio.timeout``, task groups,
anyio and sniffio need) and in a copy of the caller's context, with public asyncio APIs
only:

- on Python 3.12 and later, with the standard eager task factory
  (:func:`asyncio.eager_task_factory`), wherever :meth:`EagerStarter.start` is called from
  outside a task; :meth:`EagerStarter.call` calls its function at once;
- on 3.11, which has no public way to enter a task from outside one, the input is handed
  to a *dispatcher* task (:meth:`EagerStarter.call`: one turn of the loop per chunk of
  input, not per request), and each request's first step runs in that task's step. A
  coroutine that finishes leaves the dispatcher free for the next one; the first one that
  waits keeps it: the dispatcher becomes that coroutine's task (everything bound to the
  task in the first step, timeouts and cancel scopes, stays right) and a new dispatcher
  takes the rest of the input. Requests of the same chunk after a waiting one start as
  ordinary tasks. Coroutines that finish without waiting may thus see the same
  ``current_task()`` one after the other, as code run in a thread pool sees the same thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
from collections.abc import Callable, Coroutine, Generator
from typing import Any

log = logging.getLogger(__name__)

Finished = Callable[[Any, "BaseException | None"], None]
"""Called with a coroutine's value (or None) and its exception (or None)."""

_EAGER_FACTORY: Any = getattr(asyncio, "eager_task_factory", None)  # Python 3.12 and later
_NATIVE = _EAGER_FACTORY is not None
_NOTHING: Any = object()


class EagerStarter:
    """Starts coroutines on ``loop`` eagerly (see the module's description)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, native: bool | None = None) -> None:
        self._loop = loop
        self._native = _NATIVE if native is None else native
        """Whether the standard eager task factory is used (by default where there is one)."""
        self._calls: collections.deque[Callable[[], None]] = collections.deque()
        self._dispatcher: _Dispatcher | None = None
        """The dispatcher that takes the next calls (None: one is made when needed)."""
        self._running: _Dispatcher | None = None
        """The dispatcher whose step runs now and may still run a first step."""

    def call(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (which starts coroutines) where :meth:`start` runs them eagerly: at
        once on 3.12+, else in the dispatcher task, soon; calls keep their order."""
        if self._native:
            fn()
            return
        self._calls.append(fn)
        dispatcher = self._dispatcher
        if dispatcher is None:
            self._dispatcher = _Dispatcher(self)
        else:
            dispatcher.wake()

    def start(self, coro: Coroutine[Any, Any, Any], finished: Finished) -> asyncio.Task[Any] | None:
        """Run ``coro``'s first step now; return the task that goes on with it if it waits.

        If it finishes without waiting, call ``finished(value, exception)`` and return
        None (not if it raised CancelledError, or cancelled its task: a cancelled
        coroutine has no outcome). Where no first step can run now (called from an
        ordinary task; on 3.11 from outside the dispatcher), it returns an ordinary task.
        """
        loop = self._loop
        context = contextvars.copy_context()
        current = asyncio.current_task(loop)
        if self._native and current is None:
            return self._start_native(coro, context, finished)
        dispatcher = self._running
        if dispatcher is None or current is not dispatcher.task:
            return loop.create_task(coro, context=context)
        outcome: Any = None
        try:
            first = context.run(coro.send, None)
        except StopIteration as stop:
            outcome = (stop.value, None)
        except asyncio.CancelledError:
            outcome = _NOTHING
        except Exception as exc:
            outcome = (None, exc)
        if outcome is None:  # it waits: the dispatcher is its task from now on
            self._retire(dispatcher)
            dispatcher.adopt(coro, context, first)
            return dispatcher.task
        if dispatcher.task.cancelling():  # it cancelled its own task: as for any task, no
            self._retire(dispatcher)  # outcome; and the task is no dispatcher any more
            return None
        if outcome is not _NOTHING:
            finished(*outcome)
        return None

    def close(self) -> None:
        """Cancel the idle dispatcher, if any, and forget calls not made (the loop is
        about to stop)."""
        self._calls.clear()
        if self._dispatcher is not None:
            self._dispatcher.task.cancel()
        self._dispatcher = self._running = None

    def _retire(self, dispatcher: _Dispatcher) -> None:
        """``dispatcher`` takes no more calls: a new one takes those left, if any."""
        if self._running is dispatcher:
            self._running = None
        if self._dispatcher is dispatcher:
            self._dispatcher = _Dispatcher(self) if self._calls else None

    def _dispatch(self, dispatcher: _Dispatcher) -> None:
        """Make the waiting calls in ``dispatcher``'s step, until it retires."""
        self._running = dispatcher
        try:
            while self._calls and self._dispatcher is dispatcher:
                fn = self._calls.popleft()
                try:
                    fn()
                except Exception:
                    log.exception("internal error in a dispatched call")
        finally:
            if self._running is dispatcher:
                self._running = None

    def _start_native(
        self, coro: Coroutine[Any, Any, Any], context: contextvars.Context, finished: Finished
    ) -> asyncio.Task[Any] | None:
        task: asyncio.Task[Any] = _EAGER_FACTORY(self._loop, coro, context=context)
        if not task.done():
            return task
        if not task.cancelled():
            exc = task.exception()
            finished(None if exc is not None else task.result(), exc)
        return None


class _Dispatcher(Coroutine[Any, Any, Any]):
    """What a dispatcher task runs: the starter's waiting calls, then it waits for more,
    until a coroutine whose first step ran in it waits; then it is that coroutine: its
    first step's yield, then every later step, each in the coroutine's context."""

    __slots__ = ("_starter", "_coro", "_context", "_first", "_park", "_parked", "task")

    def __init__(self, starter: EagerStarter) -> None:
        self._starter = starter
        self._coro: Coroutine[Any, Any, Any] | None = None
        self._context: contextvars.Context | None = None
        self._first: Any = _NOTHING
        self._park: asyncio.Future[None] | None = None
        self._parked: Generator[Any, None, Any] | None = None
        self.task: asyncio.Task[Any] = starter._loop.create_task(self)

    def wake(self) -> None:
        """There are calls to make: end the wait, if it waits."""
        if self._park is not None and not self._park.done():
            self._park.set_result(None)

    def adopt(
        self, coro: Coroutine[Any, Any, Any], context: contextvars.Context, first: Any
    ) -> None:
        """Become ``coro``, whose first step (run in this task's step) yielded ``first``."""
        self._coro, self._context, self._first = coro, context, first

    def send(self, value: Any) -> Any:
        parked = self._parked
        if parked is not None:  # woken: let the park's await end
            self._parked = None
            with contextlib.suppress(StopIteration):
                parked.send(value)
        if self._coro is None:
            self._starter._dispatch(self)
        coro = self._coro
        if coro is None:  # no coroutine kept it: wait for more calls
            self._park = self.task.get_loop().create_future()
            self._parked = self._park.__await__()
            return self._parked.send(None)
        first = self._first
        if first is not _NOTHING:  # adopted in this step: wait on what it waits on
            self._first = _NOTHING
            return first
        assert self._context is not None
        return self._context.run(coro.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._parked = None
        self._first = _NOTHING
        coro = self._coro
        if coro is None:
            raise typ if val is None else val
        assert self._context is not None
        if val is None and tb is None:
            return self._context.run(coro.throw, typ)
        return self._context.run(coro.throw, typ, val, tb)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("a dispatcher is driven by its task only")

    def __repr__(self) -> str:
        return f"<eager dispatcher of {self._coro!r}>"
