"""The GAHP dialect: looks requests up in the command table and answers them.

The protocol's own rules (framing, escaping, the prefix, the result queue, ``R``,
RESULTS, VERSION, QUIT) live in :class:`gahp_core.GahpConnection`; this module
adds what depends on the backend's commands: unknown commands, argument counts, request
ids, the in-flight limit, running handlers and turning their outcome into a result line.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import attrs

from gahp_core._commands import BadRequest, Command, Refused, shape_count
from gahp_core._connection import PROTOCOL_COMMANDS, Closed, GahpConnection
from gahp_core._dialect import Dialect, Runtime
from gahp_core._errors import GahpError
from gahp_core._hooks import BackendContext, hookimpl
from gahp_core._protocol import ERROR, FAILURE, SUCCESS, THREADS_LIMIT_REACHED, parse_reqid

log = logging.getLogger("gahp.server")


@attrs.frozen
class Block:
    """A synchronous reply of several lines: ``S <fields>`` then each line's fields."""

    fields: tuple[str, ...]
    lines: Sequence[Sequence[str]]


class GahpDialect(Dialect):
    """The GAHP protocol (HTCondor's gridmanager, BLAH, BOINC and friends)."""

    name = "gahp"
    protocol_commands = PROTOCOL_COMMANDS
    connection: GahpConnection

    def builtins(self) -> object:
        return BuiltinCommands(self)

    def attach(self, runtime: Runtime) -> None:
        super().attach(runtime)
        self.connection = GahpConnection(runtime.version.banner(), runtime.options.max_line)

    def start(self) -> None:
        self.connection.start()

    def data_to_send(self) -> bytes:
        return self.connection.data_to_send()

    def receive(self, data: bytes) -> None:
        """Answer every complete request in ``data``, in order."""
        conn = self.connection
        runtime = self.runtime
        conn.receive_data(data)
        while not runtime.stopping:
            event = conn.next_event()
            if event is None:
                return
            if isinstance(event, Closed):
                runtime.request_stop()
                return
            cmd = runtime.commands.get(event.command)
            if cmd is None:
                log.info("unknown command %s", event.command[:80])
                conn.reply(ERROR, ("unknown command",))
            elif cmd.asynchronous:
                self._dispatch_async(cmd, event.args)
            else:
                self._dispatch_sync(cmd, event.args)

    def _dispatch_sync(self, cmd: Command[Any], args: tuple[str, ...]) -> None:
        conn = self.connection
        if not cmd.accepts(len(args)):
            conn.reply(ERROR, (wrong_arguments(cmd, len(args)),))
            return
        try:
            fields = cmd.handler(args)
        except BadRequest as exc:
            conn.reply(ERROR, _msg(exc))
            return
        except Refused as exc:
            conn.reply(FAILURE, _msg(exc))
            return
        except Exception as exc:
            log.exception("command %s failed", cmd.name)
            conn.reply(FAILURE, (describe(exc),))
            return
        if isinstance(fields, Block):
            conn.reply_block(fields.fields, fields.lines)
            return
        try:
            fields = as_fields(fields or ())
        except Exception as exc:  # not fields at all
            log.error("%s returned %s: not fields", cmd.name, _shown(fields))
            conn.reply(FAILURE, (f"internal error: {cmd.name}: {describe(exc)}",))
            return
        problem = cmd.result_problem(fields)
        if problem:
            log.error("%s: %s", problem, _shown(fields))
            conn.reply(FAILURE, (f"internal error: {problem}",))
            return
        conn.reply(SUCCESS, fields)

    def _dispatch_async(self, cmd: Command[Any], args: tuple[str, ...]) -> None:
        conn = self.connection
        runtime = self.runtime
        if not args or parse_reqid(args[0]) is None:
            conn.reply(ERROR, ("missing or malformed request id",))
            return
        reqid, args = args[0], args[1:]
        if not cmd.accepts(len(args)):
            conn.reply(ERROR, (wrong_arguments(cmd, len(args)),))
            return
        limit = runtime.options.max_in_flight
        if limit and runtime.in_flight >= limit:
            conn.reply(FAILURE, (THREADS_LIMIT_REACHED,))
            return
        try:
            parsed = cmd.parse(args) if cmd.parse is not None else args
        except BadRequest as exc:
            conn.reply(ERROR, _msg(exc))
            return
        except Exception as exc:
            log.exception("parsing %s failed", cmd.name)
            conn.reply(ERROR, (describe(exc),))
            return
        conn.accept()  # before the handler starts: its result line comes after this S
        runtime.start(cmd, parsed, functools.partial(self._finish, cmd, reqid))

    def _finish(self, cmd: Command[Any], reqid: str, value: Any, exc: BaseException | None) -> None:
        if exc is None:
            try:
                fields = as_fields(value)
            except Exception as bad:  # a handler returned something that is not fields
                log.error("%s %s returned %s: not fields", cmd.name, reqid, _shown(value))
                exc = bad
            else:
                problem = cmd.result_problem(fields)
                if problem:
                    log.error("%s %s: %s: %s", cmd.name, reqid, problem, _shown(fields))
                    exc = ShapeMismatch(f"internal error: {problem}")
        if exc is not None:
            if not isinstance(exc, ShapeMismatch):
                log.warning("%s %s failed: %s", cmd.name, reqid, describe(exc))
                log.debug("traceback of %s %s", cmd.name, reqid, exc_info=exc)
            fields = as_fields(cmd.error_result(describe(exc)))
            problem = cmd.error_problem(fields)
            if problem:  # declared, and checked then: error_result depends on its message
                log.error("%s %s: %s: %s", cmd.name, reqid, problem, _shown(fields))
                fields = _fit(fields, cmd.error_fields)
        self.connection.queue_result(reqid, fields)


class ShapeMismatch(GahpError):
    """A handler's result does not have the fields its command declares."""


def _fit(fields: tuple[str, ...], shape: Any) -> tuple[str, ...]:
    """``fields`` cut or padded (with ``NULL``) to the declared count."""
    n = shape_count(shape) or 0
    return (*fields[:n], *("NULL",) * (n - len(fields)))


def _shown(value: object, limit: int = 200) -> str:
    """A handler's value for the log: its repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def wrong_arguments(cmd: Command[Any], got: int) -> str:
    """The ``E`` message for a request with the wrong argument count."""
    return f"wrong number of arguments: {cmd.usage()}, not {got}"


class BuiltinCommands:
    """COMMANDS, as a plugin (the connection answers the other built-in commands)."""

    def __init__(self, dialect: GahpDialect) -> None:
        self._dialect = dialect

    @hookimpl
    def gahp_commands(self, context: BackendContext) -> Sequence[Command[Any]]:
        return [Command("COMMANDS", self._commands, asynchronous=False, nargs=0)]

    def _commands(self, args: Sequence[str]) -> list[str]:
        return self._dialect.runtime.command_names()


def as_fields(value: Any) -> tuple[str, ...]:
    """Handler output as a tuple of strings."""
    if isinstance(value, str):
        return (value,)
    if type(value) is tuple:
        for v in value:
            if type(v) is not str:
                break
        else:
            return value  # the usual case, as it is
    return tuple(v if isinstance(v, str) else str(v) for v in value)


def _msg(exc: Exception) -> tuple[str, ...]:
    text = str(exc)
    return (text,) if text else ()


def describe(exc: BaseException) -> str:
    """A one-line description of an exception for an error line."""
    text = str(exc).strip()
    return text if text else type(exc).__name__
