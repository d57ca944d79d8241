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

from gahp_core.commands import BadRequest, Command, Refused
from gahp_core.dialect import Dialect
from gahp_core.hooks import BackendContext, hookimpl
from gahp_core.ninfg_protocol import NinfgFramer, format_line, parse_request, reply
from gahp_core.server import GahpServer

log = logging.getLogger("gahp.ninfg")

PROTOCOL_VERSION = "2.0"


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

    def framer(self, max_line: int) -> NinfgFramer:
        return NinfgFramer(min(max_line, 16 * 1024 * 1024))

    def builtins(self, server_ref: list[GahpServer]) -> object:
        return _Builtins(server_ref, self)

    def handle(self, server: GahpServer, framed: bytes | None) -> None:
        out = server.out
        if framed is None:
            out.line(reply(False, ("request too long",)))
            return
        request = parse_request(framed)
        if request is None:
            out.line(reply(False, ("empty request",)))
            return
        cmd = server.commands.get(request.command)
        if cmd is None or cmd.asynchronous:
            log.info("unknown request %s", request.command[:80])
            out.line(reply(False, (f"unknown request {request.command[:80]}",)))
            return
        args: tuple = request.args
        if request.attributes:
            args = (*request.args, request.attributes)
        if not cmd.accepts(len(request.args)):
            out.line(reply(False, (f"wrong number of arguments for {cmd.name}",)))
            return
        try:
            result = cmd.handler(args)
        except (BadRequest, Refused) as exc:
            out.line(reply(False, (str(exc) or cmd.name + " failed",)))
            return
        except Exception as exc:
            log.exception("request %s failed", cmd.name)
            out.line(reply(False, (str(exc) or type(exc).__name__,)))
            return
        if isinstance(result, MultiLine):
            out.line("".join(format_line((line,)) for line in result.lines))
        else:
            fields = (result,) if isinstance(result, str) else tuple(str(f) for f in result or ())
            out.line(reply(True, fields))

    def notify(self, server: GahpServer, fields: Sequence[str]) -> None:
        """A notification on stderr, unless the server is stopping (EXIT, EOF)."""
        if self._quiet or server.stopping:
            log.debug("notification after EXIT dropped: %s", " ".join(fields))
            return
        server.err.line(format_line(fields))

    def stopping(self, server: GahpServer) -> None:
        self._quiet = True


class _Builtins:
    """QUERY_FEATURES and EXIT, as a plugin."""

    def __init__(self, server_ref: list[GahpServer], dialect: NinfgDialect) -> None:
        self._ref = server_ref
        self._dialect = dialect

    @hookimpl
    def gahp_commands(self, context: BackendContext) -> Sequence[Command]:
        return [
            Command("QUERY_FEATURES", self._features, asynchronous=False, nargs=0),
            Command("EXIT", self._exit, asynchronous=False, nargs=0),
        ]

    def _features(self, args: Sequence[str]) -> MultiLine:
        server = self._ref[0]
        lines = ["SM", f"protocol_version {PROTOCOL_VERSION}"]
        lines += [f"feature {name}" for name in self._dialect.features]
        lines += [f"request {n}" for n in server.command_names() if n != "QUERY_FEATURES"]
        lines.append("REPLY_END")
        return MultiLine(tuple(lines))

    def _exit(self, args: Sequence[str]) -> tuple[str, ...]:
        self._dialect._quiet = True
        self._ref[0].request_stop()
        return ()
