"""The boinc driver's event loop: blahpd's, or one of its own in a thread.

Blocking callers (blahpd's worker threads) cross into the loop in one place,
:meth:`LoopBridge.run`; the driver's own work (batch submissions, recovery) runs as tasks
started with :meth:`LoopBridge.start`. :meth:`LoopBridge.aclose` cancels both kinds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Hashable
from typing import Any, TypeVar

import attrs

from gahp_lrms.model import DriverError

T = TypeVar("T")

STOPPING = "the BOINC request was cancelled: blahpd is stopping"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class LoopBridge:
    """An event loop for a driver's coroutines: ``loop`` (run by someone else), or, when
    None, a new one run in a daemon thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._thread: threading.Thread | None = None
        if loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=loop.run_forever, name="boinc-driver-loop", daemon=True
            )
            self._thread.start()
        self.loop = loop
        self.closed = False
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def own_loop(self) -> bool:
        """Whether the loop is the bridge's own (else the caller's, e.g. blahpd's)."""
        return self._thread is not None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result; from any thread but the
        loop's. Cancelled by :meth:`aclose`: then :class:`DriverError`."""
        if _running_loop() is self.loop:
            coro.close()
            raise RuntimeError("a blocking boinc driver method called on the driver's loop")
        if self.closed or self.loop.is_closed():
            coro.close()
            raise DriverError(STOPPING)
        fut = asyncio.run_coroutine_threadsafe(self._tracked(coro), self.loop)
        while True:
            try:
                return fut.result(timeout=5.0)
            except concurrent.futures.CancelledError:
                raise DriverError(STOPPING) from None
            except TimeoutError:
                if fut.done():
                    raise  # the coroutine's own
                if not self.loop.is_running():  # stopped under us: nothing will answer
                    fut.cancel()
                    raise DriverError(STOPPING) from None

    async def _tracked(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.closed:
            coro.close()
            raise DriverError(STOPPING)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coro
        finally:
            self._tasks.discard(task)

    def start(self, coro: Coroutine[Any, Any, None]) -> None:
        """:meth:`task`, from any thread."""
        self.loop.call_soon_threadsafe(self.task, coro)

    def task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start ``coro`` as a task (on the loop); :meth:`aclose` cancels it. Its failure
        is the coroutine's own business (nobody awaits it)."""
        task = self.loop.create_task(coro)
        if self.closed:
            task.cancel()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self, finish: Callable[[], Awaitable[None]]) -> None:
        """Cancel every task (those of blocked callers too: they get :class:`DriverError`),
        then await ``finish()`` on the loop; stop an own loop. From any event loop."""
        if self.closed:
            return
        if _running_loop() is self.loop:
            await self._shutdown(finish)
            return
        if not self.loop.is_closed():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(finish), self.loop)
            await asyncio.wrap_future(done)
        if self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            await asyncio.to_thread(self._thread.join, 10)
            if not self._thread.is_alive():
                self.loop.close()

    async def _shutdown(self, finish: Callable[[], Awaitable[None]]) -> None:
        self.closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        await finish()


@attrs.define
class _Slot:
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    users: int = 0


class KeyedLock:
    """One holder at a time per key (asyncio, one loop); a key's lock exists only while it
    is held or awaited, so the table does not grow with the keys ever used."""

    def __init__(self) -> None:
        self._slots: dict[Hashable, _Slot] = {}

    def __len__(self) -> int:
        """Keys held or awaited now."""
        return len(self._slots)

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold ``key``'s lock for the ``async with`` block."""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        slot.users += 1
        try:
            async with slot.lock:
                yield
        finally:
            slot.users -= 1
            if not slot.users:
                del self._slots[key]
