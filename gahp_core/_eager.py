"""Start coroutines at once, in a task, and learn at once if they finished.

Most asynchronous GAHP handlers either finish without waiting (a no-op, a cached answer)
or wait for I/O. A plain Task runs its first step only on a later turn of the event loop
and tells its outcome on yet another one, which for a handler that does not wait costs
several times the handler itself. :class:`EagerStarter` runs the first step in the call,
inside a task (``asyncio.current_task()`` is set, as ``asyncio.timeout``, task groups,
anyio and sniffio need) and in a copy of the caller's context:

- on Python 3.12 and later, with the standard eager task factory
  (:func:`asyncio.eager_task_factory`);
- on 3.11, in a *host* task kept ready for the purpose, entered by hand around the step
  (the way 3.12 does it). A coroutine that finishes leaves the host free for the next
  one; a coroutine that waits keeps it, and the host goes on driving it, every step in
  that coroutine's own context, so everything bound to the task in the first step
  (timeouts, cancel scopes) stays right. Coroutines that finish without waiting may thus
  see the same ``current_task()`` one after the other, as code run in a thread pool sees
  the same thread. Python 3.11 has no public way to enter a task: this path uses
  ``asyncio.tasks._enter_task``/``_leave_task`` (what 3.12's eager tasks do), and falls
  back to a plain task where they are missing. A plain task instead on 3.11 cuts the
  throughput of no-op commands to about 37% (``benchmarks/core_throughput.py``), so
  they stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any

Finished = Callable[[Any, "BaseException | None"], None]
"""Called with a coroutine's value (or None) and its exception (or None)."""

_enter_task = getattr(asyncio.tasks, "_enter_task", None)
_leave_task = getattr(asyncio.tasks, "_leave_task", None)
_EAGER_FACTORY: Any = getattr(asyncio, "eager_task_factory", None)  # Python 3.12 and later
_NATIVE = _EAGER_FACTORY is not None
_NOTHING: Any = object()


class EagerStarter:
    """Starts coroutines on ``loop`` eagerly (see the module's description)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._host: asyncio.Task[Any] | None = None
        self._shell: _Host | None = None

    def start(self, coro: Coroutine[Any, Any, Any], finished: Finished) -> asyncio.Task[Any] | None:
        """Run ``coro``'s first step now; return the task that goes on with it if it waits.

        If it finishes without waiting, call ``finished(value, exception)`` and return
        None (not if it raised CancelledError: a cancelled coroutine has no outcome).
        Called from inside a task, it cannot run a step there: it returns an ordinary task.
        """
        loop = self._loop
        if asyncio.current_task(loop) is not None:
            return loop.create_task(coro)
        context = contextvars.copy_context()
        if _NATIVE or _enter_task is None or _leave_task is None:
            return self._start_native(coro, context, finished)
        host, shell = self._host, self._shell
        if host is None or shell is None or host.done():
            shell = self._shell = _Host(loop)
            host = self._host = loop.create_task(shell)
        outcome: Any = None
        _enter_task(loop, host)
        try:
            first = context.run(coro.send, None)
        except StopIteration as stop:
            outcome = (stop.value, None)
        except asyncio.CancelledError:
            outcome = _NOTHING
        except Exception as exc:
            outcome = (None, exc)
        finally:
            _leave_task(loop, host)
        if outcome is None:  # it waits: the host is its task from now on
            shell.adopt(coro, context, first)
            self._host = self._shell = None
            return host
        if host.cancelling():  # it cancelled its own task: as for any task, no outcome;
            self._host = self._shell = None  # and not a host for the next one
            return None
        if outcome is not _NOTHING:
            finished(*outcome)
        return None

    def close(self) -> None:
        """Cancel the idle host task, if any (the loop is about to stop)."""
        if self._host is not None:
            self._host.cancel()
        self._host = self._shell = None

    def _start_native(
        self, coro: Coroutine[Any, Any, Any], context: contextvars.Context, finished: Finished
    ) -> asyncio.Task[Any] | None:
        if not _NATIVE:
            return self._loop.create_task(coro, context=context)
        task: asyncio.Task[Any] = _EAGER_FACTORY(self._loop, coro, context=context)
        if not task.done():
            return task
        if not task.cancelled():
            exc = task.exception()
            finished(None if exc is not None else task.result(), exc)
        return None


class _Host(Coroutine[Any, Any, Any]):
    """What a host task runs: nothing (it waits) until it adopts a coroutine whose first
    step ran in it; then that step's yield, then every step of the coroutine, each in the
    coroutine's context."""

    __slots__ = ("_loop", "_coro", "_context", "_first", "_park", "_parked")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._coro: Coroutine[Any, Any, Any] | None = None
        self._context: contextvars.Context | None = None
        self._first: Any = _NOTHING
        self._park: asyncio.Future[None] | None = None
        self._parked: Generator[Any, None, Any] | None = None

    def adopt(
        self, coro: Coroutine[Any, Any, Any], context: contextvars.Context, first: Any
    ) -> None:
        """Go on with ``coro``, whose first step yielded ``first``."""
        self._coro, self._context, self._first = coro, context, first
        if self._park is not None and not self._park.done():
            self._park.set_result(None)  # wake the host: it has work now

    def send(self, value: Any) -> Any:
        parked = self._parked
        if parked is not None:  # woken: let the park's await end
            self._parked = None
            with contextlib.suppress(StopIteration):
                parked.send(value)
        coro = self._coro
        if coro is None:  # nothing adopted yet: wait for it
            self._park = self._loop.create_future()
            self._parked = self._park.__await__()
            return self._parked.send(None)
        first = self._first
        if first is not _NOTHING:
            self._first = _NOTHING
            if first is not None:
                return first
            # A bare yield (asyncio.sleep(0)): this step is already a later turn of the loop.
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
        raise TypeError("a host is driven by its task only")

    def __repr__(self) -> str:
        return f"<eager host of {self._coro!r}>"
