"""The runtime's tunables."""

from __future__ import annotations

import attrs


@attrs.frozen
class ServerOptions:
    """Tunables of the runtime.

    Attributes:
        workers: Threads in the pool that runs plain (blocking) handlers.
        max_in_flight: Above this many pending requests answer ``F Threads limit
            reached``; 0: no limit.
        max_line: Longest request line accepted, in bytes.
        slow_handler: Seconds a handler may hold the event loop before a WARNING names
            it; 0: never.
        quit_grace: Seconds given to cancelled work and shutdown callbacks on QUIT, EOF
            or SIGTERM.
    """

    workers: int = 8
    """Threads in the pool that runs plain (blocking) handlers."""
    max_in_flight: int = 0
    """Above this many pending requests answer ``F Threads limit reached``; 0: no limit."""
    max_line: int = 64 * 1024 * 1024
    """Longest request line accepted, in bytes."""
    slow_handler: float = 1.0
    """A handler that holds the event loop longer than this many seconds is logged at
    WARNING, by command name (a blocking call in an ``async def``); 0: never."""
    quit_grace: float = 0.5
    """Seconds given to cancelled work and shutdown callbacks on QUIT, EOF or SIGTERM."""
