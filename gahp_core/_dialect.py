"""Dialects: what the runtime's bytes mean.

The runtime (:class:`gahp_core.GahpServer`) reads bytes, writes bytes, runs
handlers and shuts down. A dialect turns the bytes read into requests, answers them
(starting handlers through the :class:`Runtime` it is attached to) and says what every
server of its kind has built in; it does no I/O: the runtime takes what it has to send
after each chunk and after each finished handler. :class:`gahp_core.GahpDialect`
is the GAHP protocol (the default); a backend speaking another protocol returns its own
dialect from the ``gahp_dialect`` hook (``gahp_ninfg`` does, for Ninf-G).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from gahp_core._commands import Command
from gahp_core._options import ServerOptions
from gahp_core._protocol import Version

Done = Callable[[Any, "BaseException | None"], None]
"""Called with a handler's value (or None) and its exception (or None) when it finishes."""


class Runtime(Protocol):
    """What the runtime offers the dialect attached to it."""

    version: Version
    options: ServerOptions

    @property
    def commands(self) -> Mapping[str, Command[Any]]:
        """The commands backends declared, by name."""
        ...

    @property
    def in_flight(self) -> int:
        """Handlers and background tasks started and not finished."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether shutdown has begun."""
        ...

    def command_names(self) -> list[str]:
        """Every command the server answers, sorted."""
        ...

    def request_stop(self) -> None:
        """Begin shutdown."""
        ...

    def start(self, cmd: Command[Any], parsed: Any, done: Done) -> None:
        """Run ``cmd``'s handler on ``parsed``; ``done`` gets its outcome (not if cancelled).

        ``done`` may be called before this returns (a coroutine that never waits): answer
        the request first.
        """
        ...


class Dialect(abc.ABC):
    """A line protocol the runtime can speak (sans-IO: bytes in, bytes out)."""

    name: str = ""
    uses_stderr: bool = False
    """Whether protocol lines go to stderr too (then logs must not)."""
    shutdown_time: float = 0.5
    """Seconds the backend's shutdown callbacks may take (cancelling jobs may need more)."""
    protocol_commands: Sequence[str] = ()
    """Commands the dialect answers by itself: listed as the server's, never a backend's."""

    runtime: Runtime

    @abc.abstractmethod
    def builtins(self) -> object:
        """A pluggy plugin contributing the dialect's built-in commands."""

    def attach(self, runtime: Runtime) -> None:
        """Called once by the runtime built with this dialect, before any other call."""
        self.runtime = runtime

    def start(self) -> None:  # noqa: B027 - optional hook
        """Called once the output is open (e.g. to queue a banner)."""

    @abc.abstractmethod
    def receive(self, data: bytes) -> None:
        """Handle a chunk of input (``b""``: the input ended)."""

    @abc.abstractmethod
    def data_to_send(self) -> bytes:
        """Bytes for standard output queued since the last call."""

    def errors_to_send(self) -> bytes:
        """Bytes for standard error queued since the last call (dialects using stderr)."""
        return b""

    def notify(self, fields: Sequence[str]) -> None:
        """Queue an asynchronous notification, where the dialect has them."""
        raise NotImplementedError(f"the {self.name} dialect has no notifications")

    def stopping(self) -> None:  # noqa: B027 - optional hook
        """Called when shutdown begins, before work in flight is cancelled."""
