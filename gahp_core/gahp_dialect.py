"""The GAHP dialect: escaped request lines, S/E/F return lines, the RESULTS queue.

Exactly the protocol of the GAHP specifications: a banner, one return line per request,
asynchronous commands answered later through RESULTS in queue order, one ``R`` between
RESULTS in async mode, RESPONSE_PREFIX on every line after its own reply.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Any

import attrs

from gahp_core.commands import BadRequest, Command, Refused
from gahp_core.dialect import Dialect
from gahp_core.escaping import LineSplitter
from gahp_core.hooks import BackendContext, hookimpl
from gahp_core.protocol import (
    ERROR,
    FAILURE,
    SUCCESS,
    THREADS_LIMIT_REACHED,
    Request,
    format_line,
    format_raw,
    format_return,
    parse_reqid,
    parse_request,
)
from gahp_core.results import ResultQueue
from gahp_core.server import ENCODING, ERRORS, GahpServer

log = logging.getLogger("gahp.server")


@attrs.frozen
class RawReply:
    """A synchronous reply whose text is sent after ``S `` without escaping (VERSION)."""

    text: str


@attrs.frozen
class Block:
    """A synchronous reply of several lines: ``S <fields>`` then each line's fields."""

    fields: tuple[str, ...]
    lines: Sequence[Sequence[str]]


class _GahpFramer:
    def __init__(self, max_line: int) -> None:
        self._splitter = LineSplitter(max_line)

    def feed(self, data: bytes) -> list[bytes | None]:
        return self._splitter.feed(data)

    def finish(self) -> list[bytes | None]:
        tail = self._splitter.pending()
        return [tail] if tail.strip() else []


class GahpDialect(Dialect):
    """The GAHP protocol (HTCondor's gridmanager, BLAH, BOINC and friends)."""

    name = "gahp"

    def __init__(self) -> None:
        self.results = ResultQueue()

    def framer(self, max_line: int) -> _GahpFramer:
        return _GahpFramer(max_line)

    def builtins(self, server_ref: list[GahpServer]) -> object:
        return BuiltinCommands(server_ref, self)

    def start(self, server: GahpServer) -> None:
        server.out.line(format_raw(server.version.banner()))

    def handle(self, server: GahpServer, raw: bytes | None) -> None:
        """Answer one request line (``None``: a line that was too long)."""
        out = server.out
        if raw is None:
            out.line(format_return(ERROR, ("request line too long",), out.prefix))
            return
        request = parse_request(raw.decode(ENCODING, ERRORS))
        if request is None:
            out.line(format_return(ERROR, ("empty request",), out.prefix))
            return
        cmd = server.commands.get(request.command)
        if cmd is None:
            log.info("unknown command %s", request.command[:80])
            out.line(format_return(ERROR, ("unknown command",), out.prefix))
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request %s %d args", cmd.name, len(request.args))
        if cmd.asynchronous:
            self._dispatch_async(server, cmd, request)
        else:
            self._dispatch_sync(server, cmd, request)

    def _dispatch_sync(self, server: GahpServer, cmd: Command, request: Request) -> None:
        out = server.out
        prefix = out.prefix  # a prefix set by this very command applies only after its reply
        if not cmd.accepts(len(request.args)):
            out.line(format_return(ERROR, ("wrong number of arguments",), prefix))
            return
        try:
            fields = cmd.handler(request.args)
        except BadRequest as exc:
            out.line(format_return(ERROR, _msg(exc), prefix))
            return
        except Refused as exc:
            out.line(format_return(FAILURE, _msg(exc), prefix))
            return
        except Exception as exc:
            log.exception("command %s failed", cmd.name)
            out.line(format_return(FAILURE, (describe(exc),), prefix))
            return
        if isinstance(fields, RawReply):
            out.line(format_raw(f"{SUCCESS} {fields.text}", prefix))
        elif isinstance(fields, Block):
            out.line(
                format_return(SUCCESS, fields.fields, prefix)
                + "".join(format_line(line, prefix) for line in fields.lines)
            )
        else:
            out.line(format_return(SUCCESS, as_fields(fields or ()), prefix))

    def _dispatch_async(self, server: GahpServer, cmd: Command, request: Request) -> None:
        out = server.out
        if not request.args or parse_reqid(request.args[0]) is None:
            out.line(format_return(ERROR, ("missing or malformed request id",), out.prefix))
            return
        reqid, args = request.args[0], request.args[1:]
        if not cmd.accepts(len(args)):
            out.line(format_return(ERROR, ("wrong number of arguments",), out.prefix))
            return
        limit = server.options.max_in_flight
        if limit and server.in_flight >= limit:
            out.line(format_return(FAILURE, (THREADS_LIMIT_REACHED,), out.prefix))
            return
        try:
            parsed = cmd.parse(args) if cmd.parse is not None else args
        except BadRequest as exc:
            out.line(format_return(ERROR, _msg(exc), out.prefix))
            return
        except Exception as exc:
            log.exception("parsing %s failed", cmd.name)
            out.line(format_return(ERROR, (describe(exc),), out.prefix))
            return
        server.start(cmd, parsed, functools.partial(self._finish, server, cmd, reqid))
        out.line(format_return(SUCCESS, (), out.prefix))

    def _finish(
        self, server: GahpServer, cmd: Command, reqid: str, fut: asyncio.Future[Any]
    ) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            try:
                fields = as_fields(fut.result())
            except Exception as bad:  # a handler returned something that is not fields
                exc = bad
        if exc is not None:
            log.warning("%s %s failed: %s", cmd.name, reqid, describe(exc))
            log.debug("traceback of %s %s", cmd.name, reqid, exc_info=exc)
            fields = as_fields(cmd.error_result(describe(exc)))
        self.queue_result(server, reqid, fields)

    def queue_result(self, server: GahpServer, reqid: str, fields: tuple[str, ...]) -> None:
        """Queue a result line; print ``R`` when asynchronous mode asks for it."""
        if self.results.add(reqid, fields):
            server.out.line(format_line(("R",), server.out.prefix))


class BuiltinCommands:
    """COMMANDS, VERSION, QUIT, RESULTS, ASYNC_MODE_ON/OFF and RESPONSE_PREFIX, as a plugin."""

    def __init__(self, server_ref: list[GahpServer], dialect: GahpDialect) -> None:
        # The server is built from the commands, so it is filled in after collection.
        self._ref = server_ref
        self._dialect = dialect

    def _server(self) -> GahpServer:
        return self._ref[0]

    @hookimpl
    def gahp_commands(self, context: BackendContext) -> Sequence[Command]:
        def sync(name: str, nargs: int, fn) -> Command:
            return Command(name=name, handler=fn, asynchronous=False, nargs=nargs)

        return [
            sync("COMMANDS", 0, lambda args: self._server().command_names()),
            sync("VERSION", 0, lambda args: RawReply(self._server().version.banner())),
            sync("QUIT", 0, self._quit),
            sync("RESULTS", 0, self._results),
            sync("ASYNC_MODE_ON", 0, lambda args: self._async(True)),
            sync("ASYNC_MODE_OFF", 0, lambda args: self._async(False)),
            sync("RESPONSE_PREFIX", 1, self._prefix),
        ]

    def _quit(self, args: Sequence[str]) -> tuple[str, ...]:
        self._server().request_stop()
        return ()

    def _results(self, args: Sequence[str]) -> Block:
        lines = self._dialect.results.drain()
        return Block((str(len(lines)),), [(reqid, *fields) for reqid, fields in lines])

    def _async(self, on: bool) -> tuple[str, ...]:
        self._dialect.results.set_async(on)
        return ()

    def _prefix(self, args: Sequence[str]) -> tuple[str, ...]:
        self._server().out.prefix = args[0]
        return ()


def as_fields(value: Any) -> tuple[str, ...]:
    """Handler output as a tuple of strings."""
    if isinstance(value, str):
        return (value,)
    return tuple(v if isinstance(v, str) else str(v) for v in value)


def _msg(exc: Exception) -> tuple[str, ...]:
    text = str(exc)
    return (text,) if text else ()


def describe(exc: BaseException) -> str:
    """A one-line description of an exception for an error line."""
    text = str(exc).strip()
    return text if text else type(exc).__name__
