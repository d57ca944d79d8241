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

from gahp_core._commands import BadRequest, Command, Refused
from gahp_core._connection import PROTOCOL_COMMANDS, Closed, GahpConnection
from gahp_core._dialect import Dialect, Runtime
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

    def _dispatch_sync(self, cmd: Command, args: tuple[str, ...]) -> None:
        conn = self.connection
        if not cmd.accepts(len(args)):
            conn.reply(ERROR, ("wrong number of arguments",))
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
        else:
            conn.reply(SUCCESS, as_fields(fields or ()))

    def _dispatch_async(self, cmd: Command, args: tuple[str, ...]) -> None:
        conn = self.connection
        runtime = self.runtime
        if not args or parse_reqid(args[0]) is None:
            conn.reply(ERROR, ("missing or malformed request id",))
            return
        reqid, args = args[0], args[1:]
        if not cmd.accepts(len(args)):
            conn.reply(ERROR, ("wrong number of arguments",))
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

    def _finish(self, cmd: Command, reqid: str, value: Any, exc: BaseException | None) -> None:
        if exc is None:
            try:
                fields = as_fields(value)
            except Exception as bad:  # a handler returned something that is not fields
                exc = bad
        if exc is not None:
            log.warning("%s %s failed: %s", cmd.name, reqid, describe(exc))
            log.debug("traceback of %s %s", cmd.name, reqid, exc_info=exc)
            fields = as_fields(cmd.error_result(describe(exc)))
        self.connection.queue_result(reqid, fields)


class BuiltinCommands:
    """COMMANDS, as a plugin (the connection answers the other built-in commands)."""

    def __init__(self, dialect: GahpDialect) -> None:
        self._dialect = dialect

    @hookimpl
    def gahp_commands(self, context: BackendContext) -> Sequence[Command]:
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
