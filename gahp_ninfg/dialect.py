"""The Ninf-G invoke-server dialect: replies on stdout, notifications on stderr.

Requests are serialised by the client: each gets exactly one reply (``S ...`` or
``F <message>``, or a multi-line reply ending ``REPLY_END``). Backends contribute
synchronous commands whose handlers must not block; long work goes to
``context.spawn`` and reports through ``context.notify`` (``CREATE_NOTIFY``,
``STATUS_NOTIFY``). Once EXIT (or stdin EOF) arrives no notification is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from gahp_core import BackendContext, BadRequest, Command, Dialect, Refused, Runtime, hookimpl
from gahp_ninfg.protocol import NinfgFramer, format_line, parse_request, reply

log = logging.getLogger("gahp.ninfg")

PROTOCOL_VERSION = "2.0"
ENCODING = "utf-8"
ERRORS = "surrogateescape"


@attrs.frozen
class MultiLine:
    """A reply of several lines (QUERY_FEATURES): written as given, CRLF-terminated."""

    lines: tuple[str, ...]


class NinfgDialect(Dialect):
    """Ninf-G's invoke-server protocol (versions 4 and 5 clients)."""

    name = "ninfg"
    uses_stderr = True
    shutdown_time = 30.0  # cancelling every job on EXIT may take batch-system round trips

    def __init__(self, features: Sequence[str] = ()) -> None:
        self.features = tuple(features)
        self._quiet = False
        self._out: list[str] = []
        self._err: list[str] = []
        self._framer = NinfgFramer()

    def builtins(self) -> object:
        return _Builtins(self)

    def attach(self, runtime: Runtime) -> None:
        super().attach(runtime)
        self._framer = NinfgFramer(min(runtime.options.max_line, 16 * 1024 * 1024))

    def receive(self, data: bytes) -> None:
        """Answer every complete request in ``data`` (``b""``: the input ended)."""
        framed = self._framer.feed(data) if data else self._framer.finish()
        for request in framed:
            if self.runtime.stopping:
                return
            self._handle(request)

    def data_to_send(self) -> bytes:
        _log_lines("reply", self._out)
        return _take(self._out)

    def errors_to_send(self) -> bytes:
        _log_lines("notify", self._err)
        return _take(self._err)

    def _handle(self, framed: bytes | None) -> None:
        if framed is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("request: %s", masked_request(framed))
        found = self._command(framed)
        if isinstance(found, str):
            self._out.append(reply(False, (found,)))
        else:
            self._out.append(self._call(*found))

    def _command(self, framed: bytes | None) -> tuple[Command, tuple] | str:
        """The command a framed request names and its arguments, or why it is refused."""
        if framed is None:
            return "request too long"
        request = parse_request(framed)
        if request is None:
            return "empty request"
        cmd = self.runtime.commands.get(request.command)
        if cmd is None or cmd.asynchronous:
            log.info("unknown request %s", request.command[:80])
            return f"unknown request {request.command[:80]}"
        if not cmd.accepts(len(request.args)):
            return f"wrong number of arguments for {cmd.name}"
        if request.attributes:
            return cmd, (*request.args, request.attributes)
        return cmd, request.args

    @staticmethod
    def _call(cmd: Command, args: tuple) -> str:
        """The reply to one request: the command's result, or its failure in words."""
        try:
            result = cmd.handler(args)
        except (BadRequest, Refused) as exc:
            return reply(False, (str(exc) or cmd.name + " failed",))
        except Exception as exc:
            log.exception("request %s failed", cmd.name)
            return reply(False, (str(exc) or type(exc).__name__,))
        if isinstance(result, MultiLine):
            return "".join(format_line((line,)) for line in result.lines)
        fields = (result,) if isinstance(result, str) else tuple(str(f) for f in result or ())
        return reply(True, fields)

    def notify(self, fields: Sequence[str]) -> None:
        """A notification on stderr, unless the server is stopping (EXIT, EOF)."""
        if self._quiet or self.runtime.stopping:
            log.debug("notification after EXIT dropped: %s", " ".join(fields))
            return
        self._err.append(format_line(fields))

    def stopping(self) -> None:
        self._quiet = True


SECRET_ATTRIBUTES = ("auth_number",)
"""JOB_CREATE attributes whose values are never logged (nor ``environment`` values)."""


def masked_request(framed: bytes) -> str:
    """A framed request for the log: its lines joined by `` | ``, with the values of
    ``environment`` (NAME=***) and of the secret attributes masked."""
    lines = []
    for line in framed.decode(ENCODING, ERRORS).split("\n"):
        name, sep, value = line.strip().partition(" ")
        if name == "environment":
            var, eq, _ = value.partition("=")
            line = f"{name} {var}{eq and '=***'}"
        elif name in SECRET_ATTRIBUTES and sep:
            line = f"{name} ***"
        lines.append(line)
    return " | ".join(lines)


def _log_lines(kind: str, pending: list[str]) -> None:
    if pending and log.isEnabledFor(logging.DEBUG):
        for chunk in pending:
            for line in chunk.split(CRLF_TEXT):
                if line:
                    log.debug("%s: %s", kind, line)


CRLF_TEXT = "\r\n"


def _take(pending: list[str]) -> bytes:
    if not pending:
        return b""
    text = "".join(pending)
    pending.clear()
    return text.encode(ENCODING, ERRORS)


class _Builtins:
    """QUERY_FEATURES and EXIT, as a plugin."""

    def __init__(self, dialect: NinfgDialect) -> None:
        self._dialect = dialect

    @hookimpl
    def gahp_commands(self, context: BackendContext) -> Sequence[Command]:
        return [
            Command("QUERY_FEATURES", self._features, asynchronous=False, nargs=0),
            Command("EXIT", self._exit, asynchronous=False, nargs=0),
        ]

    def _features(self, args: Sequence[str]) -> MultiLine:
        runtime = self._dialect.runtime
        lines = ["SM", f"protocol_version {PROTOCOL_VERSION}"]
        lines += [f"feature {name}" for name in self._dialect.features]
        lines += [f"request {n}" for n in runtime.command_names() if n != "QUERY_FEATURES"]
        lines.append("REPLY_END")
        return MultiLine(tuple(lines))

    def _exit(self, args: Sequence[str]) -> tuple[str, ...]:
        self._dialect._quiet = True
        self._dialect.runtime.request_stop()
        return ()
