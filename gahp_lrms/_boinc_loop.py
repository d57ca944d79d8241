"""The boinc driver's asyncio helpers: its background tasks and per-key locks.

The driver runs on the server's event loop (blahpd's): its requests are coroutines there,
its own work (batch submissions, recovery) tasks started with :meth:`Tasks.start`, which
:meth:`Tasks.aclose` cancels.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Hashable
from typing import Any

import attrs

from gahp_lrms.model import DriverError

STOPPING = "the BOINC request was cancelled: blahpd is stopping"


class Tasks:
    """The driver's background tasks (on the running loop), cancelled together when it stops."""

    def __init__(self) -> None:
        self.closed = False
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        """Tasks not yet ended."""
        return len(self._tasks)

    def check_open(self) -> None:
        """Refuse a request once stopped: :class:`DriverError`."""
        if self.closed:
            raise DriverError(STOPPING)

    def start(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start ``coro`` as a task; :meth:`aclose` cancels it. Its failure is the
        coroutine's own business (nobody awaits it)."""
        task = asyncio.get_running_loop().create_task(coro)
        if self.closed:
            task.cancel()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        """Cancel every task and wait (at most 10 s) for them to end."""
        self.closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)


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
