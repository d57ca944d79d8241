"""Dialects: what the runtime's lines mean.

The runtime (:class:`gahp_core.server.GahpServer`) reads bytes, writes lines, runs
handlers and shuts down; a dialect frames the input, answers each request and says what
every server of its kind has built in. :class:`gahp_core.gahp_dialect.GahpDialect` is the
GAHP protocol (the default); :class:`gahp_core.ninfg_dialect.NinfgDialect` is Ninf-G's
invoke-server protocol.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gahp_core.server import GahpServer


class Framer(Protocol):
    """Incremental framing of the input into requests (``None``: an over-long line)."""

    def feed(self, data: bytes) -> Sequence[bytes | None]: ...

    def finish(self) -> Sequence[bytes | None]:
        """Requests left when the input ends (an unterminated last line)."""
        ...


class Dialect(abc.ABC):
    """A line protocol the runtime can speak."""

    name: str = ""
    uses_stderr: bool = False
    """Whether protocol lines go to stderr too (then logs must not)."""
    shutdown_time: float = 0.5
    """Seconds the backend's shutdown callbacks may take (cancelling jobs may need more)."""

    @abc.abstractmethod
    def framer(self, max_line: int) -> Framer:
        """A fresh framer for the input."""

    @abc.abstractmethod
    def builtins(self, server_ref: list[GahpServer]) -> object:
        """A pluggy plugin contributing the dialect's built-in commands."""

    def start(self, server: GahpServer) -> None:  # noqa: B027 - optional hook
        """Called once the output is open (e.g. to print a banner)."""

    @abc.abstractmethod
    def handle(self, server: GahpServer, request: bytes | None) -> None:
        """Answer one framed request."""

    def notify(self, server: GahpServer, fields: Sequence[str]) -> None:
        """Send an asynchronous notification, where the dialect has them."""
        raise NotImplementedError(f"the {self.name} dialect has no notifications")

    def stopping(self, server: GahpServer) -> None:  # noqa: B027 - optional hook
        """Called when shutdown begins, before work in flight is cancelled."""
