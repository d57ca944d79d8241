"""A complete GAHP backend in a few lines: the example from the docs.

Run it with ``gahp-server --backend module:echo_gahp`` (with this folder on PYTHONPATH),
or install it under the ``gahp.backends`` entry-point group and use its name.
"""

import asyncio
import time

from gahp_core import BadRequest, Command, Version, hookimpl


@hookimpl
def gahp_version():
    return Version("1.0.0", "Echo GAHP example")


@hookimpl
def gahp_commands(context):
    async def echo(args):  # a coroutine: runs on the event loop
        return ("NULL", *args)

    async def wait(args):  # await without blocking other requests
        await asyncio.sleep(float(args[0]))
        return ("NULL",)

    def block(args):  # a plain function: runs in the worker pool
        time.sleep(float(args[0]))
        return ("NULL",)

    def seconds(args):  # validated when the request arrives: E on bad input
        try:
            return (float(args[0]),)
        except ValueError:
            raise BadRequest("not a number") from None

    def fail(args):
        raise RuntimeError("failed on purpose: " + args[0])

    return [
        Command("ECHO", echo, nargs=(0, None)),
        Command("WAIT", wait, nargs=1, parse=seconds),
        Command("BLOCK", block, nargs=1, parse=seconds),
        Command("FAIL", fail, nargs=1),
        Command("HELLO", lambda args: ("hello", *args), asynchronous=False, nargs=(0, 1)),
    ]
