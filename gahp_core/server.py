"""The runtime: stdin -> dispatch -> stdout, the worker pool, the result queue, shutdown.

Everything runs on one asyncio event loop: input is read, dispatched and answered in
order; coroutine handlers run on the loop, plain handlers in a bounded thread pool; one
writer serialises output so that an ``R`` never lands inside another line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, BinaryIO

import attrs

from gahp_core.commands import BadRequest, Command, Refused
from gahp_core.escaping import LineSplitter
from gahp_core.protocol import (
    ERROR,
    FAILURE,
    SUCCESS,
    THREADS_LIMIT_REACHED,
    Request,
    Version,
    format_line,
    format_raw,
    format_return,
    parse_reqid,
    parse_request,
)
from gahp_core.results import ResultQueue

log = logging.getLogger("gahp.server")

ENCODING = "utf-8"
ERRORS = "surrogateescape"


@attrs.frozen
class ServerOptions:
    """Tunables of the runtime."""

    workers: int = 8
    """Threads in the pool that runs plain (blocking) handlers."""
    max_in_flight: int = 0
    """Above this many pending requests answer ``F Threads limit reached``; 0: no limit."""
    max_line: int = 64 * 1024 * 1024
    """Longest request line accepted, in bytes."""
    quit_grace: float = 0.5
    """Seconds given to cancelled work and shutdown callbacks on QUIT, EOF or SIGTERM."""


class Output:
    """Serialised writer of protocol lines, applying the current response prefix."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self.prefix = ""
        self._pending: list[str] | None = None

    def line(self, text: str) -> None:
        """Write one complete line (already formatted, ending in LF)."""
        if self._pending is not None:
            self._pending.append(text)
        else:
            self._write(text.encode(ENCODING, ERRORS))

    def hold(self) -> None:
        """Buffer lines until :meth:`release` (one write per input chunk)."""
        if self._pending is None:
            self._pending = []

    def release(self) -> None:
        """Write everything buffered since :meth:`hold` in one call."""
        pending, self._pending = self._pending, None
        if pending:
            self._write("".join(pending).encode(ENCODING, ERRORS))


class GahpServer:
    """A GAHP server over a set of commands: the protocol engine and its event loop."""

    def __init__(
        self,
        commands: Iterable[Command],
        version: Version,
        options: ServerOptions | None = None,
        shutdown_callbacks: Sequence[Callable[[], Any]] = (),
    ) -> None:
        self.options = options or ServerOptions()
        self.version = version
        self.commands: dict[str, Command] = {}
        for cmd in commands:
            if cmd.name in self.commands:
                raise ValueError(f"command {cmd.name} declared twice")
            self.commands[cmd.name] = cmd
        self.results = ResultQueue()
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.options.workers, thread_name_prefix="gahp-worker"
        )
        self._shutdown_callbacks = list(shutdown_callbacks)
        self._inflight: set[asyncio.Future[Any]] = set()
        self._stopping: asyncio.Event | None = None
        self._out: Output | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- services for built-in commands and backends -------------------------------------

    @property
    def out(self) -> Output:
        assert self._out is not None, "server not running"
        return self._out

    def command_names(self) -> list[str]:
        """Every command this server answers, sorted."""
        return sorted(self.commands)

    def request_stop(self) -> None:
        """Begin shutdown (QUIT, stdin EOF, SIGTERM)."""
        if self._stopping is not None:
            self._stopping.set()

    async def run_in_worker(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking ``fn(*args)`` in the bounded worker pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, fn, *args)

    @property
    def in_flight(self) -> int:
        """Asynchronous requests accepted whose result is not queued yet."""
        return len(self._inflight)

    # ---- dispatch -------------------------------------------------------------------------

    def handle_line(self, raw: bytes | None) -> None:
        """Answer one request line (``None``: a line that was too long)."""
        out = self.out
        if raw is None:
            out.line(format_return(ERROR, ("request line too long",), out.prefix))
            return
        request = parse_request(raw.decode(ENCODING, ERRORS))
        if request is None:
            out.line(format_return(ERROR, ("empty request",), out.prefix))
            return
        cmd = self.commands.get(request.command)
        if cmd is None:
            log.info("unknown command %s", request.command[:80])
            out.line(format_return(ERROR, ("unknown command",), out.prefix))
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request %s %d args", cmd.name, len(request.args))
        if cmd.asynchronous:
            self._dispatch_async(cmd, request)
        else:
            self._dispatch_sync(cmd, request)

    def _dispatch_sync(self, cmd: Command, request: Request) -> None:
        out = self.out
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
            out.line(format_return(FAILURE, (_describe(exc),), prefix))
            return
        if isinstance(fields, RawReply):
            out.line(format_raw(f"{SUCCESS} {fields.text}", prefix))
        elif isinstance(fields, Block):
            out.line(
                format_return(SUCCESS, fields.fields, prefix)
                + "".join(format_line(line, prefix) for line in fields.lines)
            )
        else:
            out.line(format_return(SUCCESS, _as_fields(fields or ()), prefix))

    def _dispatch_async(self, cmd: Command, request: Request) -> None:
        out = self.out
        if not request.args or parse_reqid(request.args[0]) is None:
            out.line(format_return(ERROR, ("missing or malformed request id",), out.prefix))
            return
        reqid, args = request.args[0], request.args[1:]
        if not cmd.accepts(len(args)):
            out.line(format_return(ERROR, ("wrong number of arguments",), out.prefix))
            return
        limit = self.options.max_in_flight
        if limit and len(self._inflight) >= limit:
            out.line(format_return(FAILURE, (THREADS_LIMIT_REACHED,), out.prefix))
            return
        try:
            parsed = cmd.parse(args) if cmd.parse is not None else args
        except BadRequest as exc:
            out.line(format_return(ERROR, _msg(exc), out.prefix))
            return
        except Exception as exc:
            log.exception("parsing %s failed", cmd.name)
            out.line(format_return(ERROR, (_describe(exc),), out.prefix))
            return
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any]
        if cmd.is_coroutine:
            fut = loop.create_task(cmd.handler(parsed))
        else:
            fut = loop.run_in_executor(self.executor, cmd.handler, parsed)
        self._inflight.add(fut)
        fut.add_done_callback(lambda f: self._finish(cmd, reqid, f))
        out.line(format_return(SUCCESS, (), out.prefix))

    def _finish(self, cmd: Command, reqid: str, fut: asyncio.Future[Any]) -> None:
        self._inflight.discard(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            try:
                fields = _as_fields(fut.result())
            except Exception as bad:  # a handler returned something that is not fields
                exc = bad
        if exc is not None:
            log.warning("%s %s failed: %s", cmd.name, reqid, _describe(exc))
            log.debug("traceback of %s %s", cmd.name, reqid, exc_info=exc)
            fields = _as_fields(cmd.error_result(_describe(exc)))
        self.queue_result(reqid, fields)

    def queue_result(self, reqid: str, fields: tuple[str, ...]) -> None:
        """Queue a result line; print ``R`` when asynchronous mode asks for it."""
        if self.results.add(reqid, fields) and self._out is not None:
            self._out.line(format_line(("R",), self._out.prefix))

    # ---- the loop -------------------------------------------------------------------------

    async def serve(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
        """Speak the protocol on ``stdin``/``stdout`` until QUIT, EOF or SIGTERM."""
        stdin = stdin or sys.stdin.buffer
        stdout = stdout or sys.stdout.buffer
        loop = self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        write, close_out = await _open_writer(loop, stdout, self.request_stop)
        self._out = Output(write)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.request_stop)
        self.out.line(format_raw(self.version.banner()))
        reader = asyncio.create_task(self._read_loop(stdin))
        stop = asyncio.create_task(self._stopping.wait())
        await asyncio.wait({reader, stop}, return_when=asyncio.FIRST_COMPLETED)
        reader.cancel()
        await self._shutdown()
        await close_out(self.options.quit_grace)
        return 0

    async def _read_loop(self, stdin: BinaryIO) -> None:
        loop = asyncio.get_running_loop()
        splitter = LineSplitter(self.options.max_line)
        read = await _open_reader(loop, stdin)
        out = self.out
        while True:
            data = await read()
            if not data:
                tail = splitter.pending()
                if tail.strip():
                    out.hold()
                    self.handle_line(tail)
                    out.release()
                log.info("stdin closed: shutting down")
                self.request_stop()
                return
            lines = splitter.feed(data)
            if not lines:
                continue
            out.hold()
            try:
                for line in lines:
                    self.handle_line(line)
                    if self._stopping is not None and self._stopping.is_set():
                        return
            finally:
                out.release()

    async def _shutdown(self) -> None:
        pending = list(self._inflight)
        for fut in pending:
            fut.cancel()
        grace = self.options.quit_grace
        if pending:
            await asyncio.wait(pending, timeout=grace)
        for cb in self._shutdown_callbacks:
            try:
                res = cb()
                if asyncio.iscoroutine(res):
                    await asyncio.wait_for(res, timeout=grace)
            except Exception:
                log.exception("shutdown callback failed")
        self.executor.shutdown(wait=False, cancel_futures=True)


@attrs.frozen
class RawReply:
    """A synchronous reply whose text is sent after ``S `` without escaping (VERSION)."""

    text: str


@attrs.frozen
class Block:
    """A synchronous reply of several lines: ``S <fields>`` then each line's fields."""

    fields: tuple[str, ...]
    lines: Sequence[Sequence[str]]


def _as_fields(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(v if isinstance(v, str) else str(v) for v in value)


def _msg(exc: Exception) -> tuple[str, ...]:
    text = str(exc)
    return (text,) if text else ()


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if text else type(exc).__name__


async def _open_reader(loop: asyncio.AbstractEventLoop, stdin: BinaryIO):
    """An ``await read()`` over stdin that never blocks the loop."""
    reader = asyncio.StreamReader(limit=2**20)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except (ValueError, OSError):
        # A regular file (or similar): read it from a thread.
        fd = stdin.fileno()

        async def read_thread() -> bytes:
            return await loop.run_in_executor(None, os.read, fd, 1 << 16)

        return read_thread

    async def read_pipe() -> bytes:
        return await reader.read(1 << 16)

    return read_pipe


class _WriteProtocol(asyncio.Protocol):
    def __init__(self, on_lost: Callable[[], None]) -> None:
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


async def _open_writer(
    loop: asyncio.AbstractEventLoop, stdout: BinaryIO, on_lost: Callable[[], None]
) -> tuple[Callable[[bytes], None], Callable[[float], Awaitable[None]]]:
    """A non-blocking writer to stdout, and a coroutine that flushes (bounded) and closes."""
    try:
        transport, _ = await loop.connect_write_pipe(lambda: _WriteProtocol(on_lost), stdout)
    except (ValueError, OSError):
        fd = stdout.fileno()

        def write_fd(data: bytes) -> None:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]

        async def nothing(timeout: float) -> None:
            return None

        return write_fd, nothing

    def write(data: bytes) -> None:
        if not transport.is_closing():
            transport.write(data)

    async def close(timeout: float) -> None:
        deadline = loop.time() + timeout
        while transport.get_write_buffer_size() and loop.time() < deadline:
            await asyncio.sleep(0.01)
        transport.close()

    return write, close
