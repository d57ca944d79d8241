"""The runtime with the GAHP dialect, in process over OS pipes (no subprocess)."""

import asyncio
import os
import time

from gahp_core import Command, GahpDialect, GahpServer, ServerOptions, Version, hookimpl
from gahp_core.testing import InProcessClient


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


def test_handlers_start_in_request_order_and_keep_their_tasks():
    """Requests of one chunk of input: each handler's first step runs in request order
    (a synchronous command's in the worker pool), and every handler goes on in the task its
    first step ran in (what ``asyncio.timeout`` in a first line needs)."""
    seen: list = []

    async def record(args):
        first = asyncio.current_task()
        seen.append(args[0])
        await asyncio.sleep(0)
        seen.append((args[0], first is not None and first is asyncio.current_task()))
        return ()

    def mark(args):
        seen.append("sync")
        return ()

    async def main() -> list[bytes]:
        loop = asyncio.get_running_loop()
        server = GahpServer(Version("1.0.0", "test"), GahpDialect(), ServerOptions())
        server.add_commands([Command("REC", record), Command("MARK", mark, asynchronous=False)])
        out: list[bytes] = []
        serving = asyncio.create_task(server.serve_in_memory(out.append))
        await asyncio.sleep(0)
        loop.call_soon(server.feed, b"REC 1 a\nMARK\nREC 2 b\nREC 3 c\nRESULTS\n")
        deadline = loop.time() + 30
        while len(seen) < 7 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        loop.call_soon(server.feed, b"QUIT\n")
        await serving
        return b"".join(out).splitlines()[1:]

    out = asyncio.run(main())
    assert out == [b"S", b"S", b"S", b"S", b"S 0", b"S"]  # no result is in before RESULTS
    firsts = [step for step in seen if isinstance(step, str) and step != "sync"]
    assert firsts == ["a", "b", "c"]
    assert sorted(step for step in seen if isinstance(step, tuple)) == [
        ("a", True),
        ("b", True),
        ("c", True),
    ]
    assert "sync" in seen


class Backend:
    """A plugin serving ``commands``."""

    def __init__(self, *commands: Command) -> None:
        self.commands = list(commands)

    @hookimpl
    def gahp_commands(self, context):
        return self.commands


def test_a_handler_holding_the_loop_is_named_and_one_awaiting_is_not():
    """A deliberately blocking handler (1 s against a 0.2 s threshold) is named; the
    warning is asserted, never the time it took."""

    async def blocks(args):
        time.sleep(1.0)
        return ()

    async def awaits(args):
        await asyncio.sleep(1.0)
        return ()

    plugin = Backend(Command("BLOCKS", blocks), Command("AWAITS", awaits))
    with InProcessClient(plugin, ["--slow-handler", "0.2"]) as c:
        assert c.call("AWAITS") == []
        assert "held" not in c.stderr_text, c.stderr_text
        assert c.call("BLOCKS") == []
        assert c.quit() == 0
    assert "gahp.server WARNING BLOCKS is holding the event loop" in c.stderr_text
    assert "gahp.server WARNING BLOCKS held the event loop for" in c.stderr_text
    assert "AWAITS" not in c.stderr_text, c.stderr_text


def test_a_sync_result_of_the_wrong_shape_is_an_f_line():
    two = Command("TWO", lambda args: tuple(args), asynchronous=False, result_fields=("a", "b"))
    with InProcessClient(Backend(two)) as c:
        assert c.command("TWO", "x", "y") == ["S", "x", "y"]
        assert c.command("TWO", "x") == [
            "F",
            "internal error: TWO returned 1 field where it declares 2 fields (a, b)",
        ]
    assert "ERROR TWO returned 1 field" in c.stderr_text, c.stderr_text


def test_an_error_result_of_the_wrong_shape_is_fitted_to_the_declaration():
    async def boom(args):
        raise ValueError(args[0])

    def error_result(message):  # two fields when declared, then a third it was not meant to
        return ("1", message) if message == "a message" else ("1", message, "x")[: len(message)]

    cmd = Command("BOOM", boom, error_result=error_result, error_fields=2)
    with InProcessClient(Backend(cmd)) as c:
        assert c.call("BOOM", "b") == ["1", "NULL"]
        assert c.call("BOOM", "bad") == ["1", "bad"]
    assert "BOOM 1: BOOM's error_result gives 1 field" in c.stderr_text, c.stderr_text
