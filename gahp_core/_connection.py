"""The GAHP protocol of one server connection, without I/O (sans-IO).

:class:`GahpConnection` takes the bytes the client sent and gives back requests, one at a
time; it takes the answers and results and gives back the bytes to send. In between it
keeps every protocol rule that does not depend on the commands a backend offers:

- framing (LF ends a request, CR is dropped, an escaped LF does not end it) and escaping;
- an ``E`` line for an over-long or empty request line;
- exactly one return line per request, in request order;
- ``RESPONSE_PREFIX``: the new prefix applies to every line after its own reply;
- the result queue: results are listed by ``RESULTS`` in the order they were queued;
- ``ASYNC_MODE_ON``/``OFF``: one ``R`` line per batch of results between two ``RESULTS``;
- ``VERSION`` (the banner given at construction) and ``QUIT`` (then it reads nothing more).

It does no I/O, starts nothing and reads no clock: the runtime feeds it and writes what it
returns; the GAHP dialect looks commands up and calls the reply methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import attrs

from gahp_core._errors import GahpError
from gahp_core._escaping import LineSplitter, join, split
from gahp_core._protocol import ERROR, FAILURE, SUCCESS, Request

ENCODING = "utf-8"
ERRORS = "surrogateescape"
DEFAULT_MAX_LINE = 64 * 1024 * 1024

PROTOCOL_COMMANDS = (
    "ASYNC_MODE_OFF",
    "ASYNC_MODE_ON",
    "QUIT",
    "RESPONSE_PREFIX",
    "RESULTS",
    "VERSION",
)
"""The commands the connection answers itself (they never come out as events)."""

_NARGS = {name: 1 if name == "RESPONSE_PREFIX" else 0 for name in PROTOCOL_COMMANDS}


@attrs.frozen
class Closed:
    """No more requests will come: the client sent ``QUIT`` or closed its end.

    Attributes:
        by_quit: Whether the client sent ``QUIT`` (else its input ended).
    """

    by_quit: bool


class ProtocolMisuse(GahpError, RuntimeError):
    """The caller broke the one-reply-per-request rule (a bug in the caller)."""


class GahpConnection:
    """GAHP protocol state: bytes in, requests out; replies and results in, bytes out.

    Call :meth:`receive_data` with each chunk read (``b""`` at end of input), then
    :meth:`next_event` until it returns ``None`` (more data needed), answering each
    :class:`~gahp_core.Request` with exactly one ``reply*``/``accept`` call before
    asking for the next. :meth:`queue_result` may be called at any time. Whatever is to
    be written is taken with :meth:`data_to_send`.
    """

    def __init__(self, banner: str, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.banner = banner
        """The ``$GahpVersion ... $`` text, already escaped: first line and VERSION reply."""
        self.prefix = ""
        """The response prefix in force (RESPONSE_PREFIX)."""
        self.async_mode = False
        """Whether an ``R`` line announces results (ASYNC_MODE_ON)."""
        self._splitter = LineSplitter(max_line)
        self._lines: deque[bytes | None] = deque()
        self._out: list[str] = []
        self._results: list[str] = []
        self._notified = False
        self._awaiting = False
        self._eof = False
        self._closed: Closed | None = None

    # ---- input ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Add bytes read from the client; ``b""`` means the input ended."""
        if self._eof:
            return
        if data:
            self._lines.extend(self._splitter.feed(data))
            return
        self._eof = True
        tail = self._splitter.pending()
        if tail.strip():
            self._lines.append(tail)

    def next_event(self) -> Request | Closed | None:
        """The next request for the dialect, :class:`Closed`, or ``None`` if more data is needed.

        Bad lines and the commands in :data:`PROTOCOL_COMMANDS` are answered here and
        never returned. Once :class:`Closed` is returned it is returned again.
        """
        if self._awaiting:
            raise ProtocolMisuse("the previous request has not been answered")
        if self._closed is not None:
            return self._closed
        lines = self._lines
        while lines:
            raw = lines.popleft()
            if raw is None:
                self._error_line("request line too long")
                continue
            fields = split(raw.decode(ENCODING, ERRORS))
            command = fields[0].upper()
            if not command and len(fields) == 1:
                self._error_line("empty request")
                continue
            args = tuple(fields[1:])
            if command in _NARGS:
                if self._protocol_command(command, args):
                    return self._closed
                continue
            self._awaiting = True
            return Request(command, args)
        if self._eof:
            self._closed = Closed(by_quit=False)
            return self._closed
        return None

    @property
    def closed(self) -> bool:
        """Whether :class:`Closed` has been returned (QUIT, or end of input)."""
        return self._closed is not None

    # ---- replies to the current request ---------------------------------------------------

    def reply(self, code: str, fields: Sequence[str] = ()) -> None:
        """Answer the current request with ``S``, ``E`` or ``F`` and ``fields``."""
        if not self._awaiting:
            raise ProtocolMisuse("no request to answer")
        if code not in (SUCCESS, FAILURE, ERROR):
            raise ValueError(f"bad return code {code!r}")
        self._awaiting = False
        if fields:
            self._out.append(f"{self.prefix}{code} {join(fields)}\n")
        else:
            self._out.append(f"{self.prefix}{code}\n")

    def accept(self) -> None:
        """Answer the current request with a bare ``S`` (an asynchronous command started)."""
        if not self._awaiting:
            raise ProtocolMisuse("no request to answer")
        self._awaiting = False
        self._out.append(f"{self.prefix}S\n")

    def reply_block(self, fields: Sequence[str], lines: Iterable[Sequence[str]]) -> None:
        """Answer ``S <fields>`` followed by one line per item of ``lines``."""
        self.reply(SUCCESS, fields)
        prefix = self.prefix
        self._out.extend(f"{prefix}{join(line)}\n" for line in lines)

    # ---- results --------------------------------------------------------------------------

    def queue_result(self, reqid: str, fields: Sequence[str]) -> None:
        """Queue the result line of request ``reqid``; an ``R`` follows if async mode asks."""
        self._results.append(join((reqid, *fields)))
        if self.async_mode and not self._notified:
            self._notified = True
            self._out.append(f"{self.prefix}R\n")

    @property
    def results_pending(self) -> int:
        """Results queued and not yet collected by RESULTS."""
        return len(self._results)

    # ---- output ---------------------------------------------------------------------------

    def start(self) -> None:
        """Queue the banner, the first line a GAHP server writes."""
        self._out.append(f"{self.prefix}{self.banner}\n")

    def data_to_send(self) -> bytes:
        """Everything to write since the last call (``b""`` if nothing)."""
        out = self._out
        if not out:
            return b""
        text = "".join(out)
        out.clear()
        return text.encode(ENCODING, ERRORS)

    # ---- internals ------------------------------------------------------------------------

    def _error_line(self, message: str) -> None:
        self._out.append(f"{self.prefix}E {join((message,))}\n")

    def _protocol_command(self, command: str, args: tuple[str, ...]) -> bool:
        """Answer one of :data:`PROTOCOL_COMMANDS`; True when it closed the connection."""
        out = self._out
        prefix = self.prefix  # whatever this command sets applies after its own reply
        if len(args) != _NARGS[command]:
            self._error_line("wrong number of arguments")
            return False
        if command == "RESULTS":
            results = self._results
            out.append(f"{prefix}S {len(results)}\n")
            if results:
                if prefix:
                    out.extend(f"{prefix}{line}\n" for line in results)
                else:
                    out.append("\n".join(results))
                    out.append("\n")
            self._results = []
            self._notified = False
        elif command == "RESPONSE_PREFIX":
            out.append(f"{prefix}S\n")
            self.prefix = args[0]
        elif command in ("ASYNC_MODE_ON", "ASYNC_MODE_OFF"):
            out.append(f"{prefix}S\n")
            self.async_mode = command == "ASYNC_MODE_ON"
            self._notified = False
        elif command == "VERSION":
            out.append(f"{prefix}S {self.banner}\n")
        else:  # QUIT
            out.append(f"{prefix}S\n")
            self._closed = Closed(by_quit=True)
            return True
        return False
