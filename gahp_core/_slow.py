"""Handlers that hold the event loop: each step of a coroutine timed, a warning when long.

A coroutine handler that calls something blocking (``time.sleep``, a synchronous HTTP
client) stops every other request while it runs; nothing else shows it. The runtime runs
coroutine handlers through :func:`timed` and times synchronous ones, and logs each step
over ``ServerOptions.slow_handler`` seconds at WARNING with the command's name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine, Generator
from typing import Any

log = logging.getLogger("gahp.server")


def warn_slow(what: str, took: float, threshold: float) -> None:
    """Log that ``what`` held the event loop ``took`` seconds (over ``threshold``)."""
    log.warning(
        "%s held the event loop for %.2f s (over %g s): every other request waited;"
        " a blocking call belongs in a plain def handler (run in the worker pool) or in"
        " await context.run_in_worker(fn, ...)",
        what,
        took,
        threshold,
    )


class _Stepper:
    """Drives a coroutine step by step, timing each step on the loop."""

    __slots__ = ("_coro", "_threshold", "_what")

    def __init__(self, coro: Coroutine[Any, Any, Any], what: str, threshold: float) -> None:
        self._coro, self._what, self._threshold = coro, what, threshold

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        value: Any = None
        error: BaseException | None = None
        while True:
            began = time.perf_counter()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self._check(began)
                return stop.value
            except BaseException:
                self._check(began)
                raise
            self._check(began)
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, thrown in where it waits
                value, error = None, exc

    def _check(self, began: float) -> None:
        took = time.perf_counter() - began
        if took > self._threshold:
            warn_slow(self._what, took, self._threshold)


async def timed(coro: Coroutine[Any, Any, Any], what: str, threshold: float) -> Any:
    """``coro``, with a warning for each step that holds the loop over ``threshold`` s."""
    return await _Stepper(coro, what, threshold)
