"""Handlers that hold the event loop: a watchdog names them.

A coroutine handler that calls something blocking (``time.sleep``, a synchronous HTTP
client) stops every other request while it runs, and nothing else shows it. The runtime
keeps a heartbeat on its loop (a callback every quarter of ``ServerOptions.slow_handler``);
a watchdog thread that sees the heartbeat late by more than the threshold looks at the
loop thread's stack, names the command whose handler is on it, and logs a WARNING; a
second one, with the time it took, when the loop runs again. It costs nothing per request;
idle, the beats cost about 1 ms of CPU a second at the default 1 s threshold (8 ms at
0.25 s).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable
from types import CodeType, FrameType
from typing import Any

log = logging.getLogger("gahp.server")

_HERE = os.path.dirname(os.path.abspath(__file__))
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__))


def handler_codes(commands: Iterable[Any]) -> dict[CodeType, set[str]]:
    """The code objects of the commands' handlers (and of what they wrap), to their names."""
    codes: dict[CodeType, set[str]] = {}
    for cmd in commands:
        fn: Any = cmd.handler
        seen = 0
        while fn is not None and seen < 8:
            code = getattr(getattr(fn, "__func__", fn), "__code__", None)
            if code is not None:
                codes.setdefault(code, set()).add(cmd.name)
            fn = getattr(fn, "__wrapped__", None)
            seen += 1
    return codes


class LoopWatch:
    """Watches ``loop`` (started on its thread) for holds over ``threshold`` seconds."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, threshold: float, codes: dict[CodeType, set[str]]
    ) -> None:
        self._loop = loop
        self._threshold = threshold
        self._interval = max(threshold / 4, 0.005)
        self._codes = codes
        self._last = time.monotonic()
        self._held: str | None = None
        self._stop = threading.Event()
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start the heartbeat and the watchdog; call on the loop's thread."""
        self._loop_thread = threading.get_ident()
        self._beat()
        threading.Thread(target=self._watch, name="gahp-loop-watch", daemon=True).start()

    def stop(self) -> None:
        """Stop both."""
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()

    def _beat(self) -> None:
        now = time.monotonic()
        held = self._held
        if held is not None:
            self._held = None
            took = now - self._last - self._interval
            log.warning("%s held the event loop for %.2f s: every other request waited", held, took)
        self._last = now
        if not self._stop.is_set():
            self._handle = self._loop.call_later(self._interval, self._beat)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            late = time.monotonic() - self._last - self._interval
            if late <= self._threshold or self._held is not None:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            name, where = self._culprit(frame)
            if name is None:  # not a handler (a collection, a loaded machine...)
                log.debug("the event loop was held over %g s%s", self._threshold, where)
                continue
            self._held = name
            log.warning(
                "%s is holding the event loop (over %g s so far%s): a blocking call belongs"
                " in a plain def handler (run in the worker pool) or in"
                " await context.run_in_worker(fn, ...)",
                name,
                self._threshold,
                where,
            )

    def _culprit(self, frame: FrameType | None) -> tuple[str | None, str]:
        """The command whose handler is on the stack, and where the stack's own code is."""
        where = ""
        names: set[str] | None = None
        while frame is not None:
            code = frame.f_code
            if not where and not code.co_filename.startswith((_HERE, _ASYNCIO)):
                where = f", at {code.co_filename}:{frame.f_lineno}"
            found = self._codes.get(code)
            if found and (names is None or len(found) < len(names)):
                names = found
                if len(found) == 1:
                    break
            frame = frame.f_back
        return (" or ".join(sorted(names)) if names else None), where
