"""The ordered result queue and the one-``R``-per-RESULTS rule (no I/O)."""

from __future__ import annotations

from collections import deque

import attrs


@attrs.define
class ResultQueue:
    """Result lines (without prefix) in the order they were queued.

    In asynchronous mode, :meth:`add` says when to print the ``R`` notification: on the
    first addition after the mode was switched on or after the last :meth:`drain`.
    """

    async_mode: bool = False
    _lines: deque[tuple[str, tuple[str, ...]]] = attrs.field(factory=deque)
    _notified: bool = False

    def add(self, reqid: str, fields: tuple[str, ...]) -> bool:
        """Queue one result; return True when an ``R`` line must be printed now."""
        self._lines.append((reqid, fields))
        if self.async_mode and not self._notified:
            self._notified = True
            return True
        return False

    def drain(self) -> list[tuple[str, tuple[str, ...]]]:
        """Take every queued result, oldest first, and re-arm the notification."""
        out = list(self._lines)
        self._lines.clear()
        self._notified = False
        return out

    def set_async(self, on: bool) -> None:
        """Switch asynchronous notification on or off.

        Results already queued when it is switched on give no ``R``; the first
        addition after it does, as the protocol allows.
        """
        self.async_mode = on
        self._notified = False

    def __len__(self) -> int:
        return len(self._lines)
