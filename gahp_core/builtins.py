"""The commands every GAHP server has, contributed as a plugin like any backend's."""

from __future__ import annotations

from collections.abc import Sequence

from gahp_core.commands import Command
from gahp_core.hooks import BackendContext, hookimpl
from gahp_core.server import Block, GahpServer, RawReply


class BuiltinCommands:
    """COMMANDS, VERSION, QUIT, RESULTS, ASYNC_MODE_ON/OFF and RESPONSE_PREFIX."""

    def __init__(self, server_ref: list[GahpServer]) -> None:
        # The server is built from the commands, so it is filled in after collection.
        self._ref = server_ref

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
        lines = self._server().results.drain()
        return Block((str(len(lines)),), [(reqid, *fields) for reqid, fields in lines])

    def _async(self, on: bool) -> tuple[str, ...]:
        self._server().results.set_async(on)
        return ()

    def _prefix(self, args: Sequence[str]) -> tuple[str, ...]:
        self._server().out.prefix = args[0]
        return ()
