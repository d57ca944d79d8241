"""The runtime with the GAHP dialect, in process over OS pipes (no subprocess)."""

import asyncio
import os

from gahp_core import Command, GahpDialect, GahpServer, ServerOptions, Version


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


def test_a_handler_that_never_waits_has_its_r_after_its_s():
    async def now(args):
        return ("NULL", *args)

    out = serve([Command("NOW", now)], b"ASYNC_MODE_ON\nNOW 1 x\nRESULTS\nQUIT\n")
    assert out == [b"S", b"S", b"R", b"S 1", b"1 NULL x", b"S"]


def test_a_handler_starts_before_the_next_request_and_keeps_its_task():
    seen = []

    async def record(args):
        first = asyncio.current_task()
        seen.append(args[0])
        await asyncio.sleep(0)
        seen.append((args[0], first is not None and first is asyncio.current_task()))
        return ()

    def mark(args):
        seen.append("sync")
        return ()

    cmds = [Command("REC", record), Command("MARK", mark, asynchronous=False)]
    out = serve(cmds, b"REC 1 a\nMARK\nREC 2 b\nRESULTS\nQUIT\n")
    assert out == [b"S", b"S", b"S", b"S 0", b"S"]  # neither result is in before RESULTS
    assert seen == ["a", "sync", "b", ("a", True), ("b", True)]
