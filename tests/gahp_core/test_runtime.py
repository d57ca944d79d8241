"""The runtime with the GAHP dialect, in process over OS pipes (no subprocess)."""

import asyncio
import os

from gahp_core.commands import Command
from gahp_core.gahp_dialect import GahpDialect
from gahp_core.options import ServerOptions
from gahp_core.protocol import Version
from gahp_core.server import GahpServer


def serve(commands: list[Command], data: bytes) -> list[bytes]:
    """Run a server on ``data`` (which ends the session) and return its output lines."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(in_w, data)
    os.close(in_w)
    server = GahpServer(Version("1.0.0", "test"), GahpDialect(), ServerOptions(quit_grace=0.1))
    server.add_commands(commands)
    with open(in_r, "rb", buffering=0) as stdin, open(out_w, "wb", buffering=0) as stdout:
        assert asyncio.run(server.serve(stdin, stdout)) == 0
    with open(out_r, "rb") as out:
        return out.read().splitlines()[1:]  # without the banner


async def in_task(args):
    return (str(asyncio.current_task() is not None),)


def test_a_handler_that_never_waits_has_its_r_after_its_s():
    now = Command("NOW", in_task)
    out = serve([now], b"ASYNC_MODE_ON\nNOW 1\nRESULTS\nQUIT\n")
    assert out == [b"S", b"S", b"R", b"S 1", b"1 False", b"S"]


def test_eager_false_runs_the_handler_in_a_task_of_its_own():
    seen = []

    async def record(args):
        seen.append((args[0], asyncio.current_task() is not None))
        return ()

    cmds = [Command("EAGER", record), Command("TASK", record, eager=False)]
    out = serve(cmds, b"TASK 1 a\nEAGER 2 b\nRESULTS\nQUIT\n")
    assert out == [b"S", b"S", b"S 1", b"2", b"S"]  # TASK's result is not in yet
    assert seen == [("b", False), ("a", True)]
