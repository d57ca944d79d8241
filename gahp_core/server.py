"""The runtime: stdin -> dialect -> stdout (and stderr), the worker pool, shutdown.

Everything runs on one asyncio event loop: input is framed and handed to the dialect in
order; coroutine handlers run on the loop, plain handlers in a bounded thread pool; every
write goes through one serialising :class:`Output`, so lines never interleave. What the
lines mean (GAHP, Ninf-G) is the dialect's business: see :mod:`gahp_core.dialect`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs

from gahp_core.commands import Command
from gahp_core.protocol import Version

if TYPE_CHECKING:
    from gahp_core.dialect import Dialect

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
        self.closed = False

    def line(self, text: str) -> None:
        """Write one complete line (already formatted, terminator included)."""
        if self.closed:
            return
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
        if pending and not self.closed:
            self._write("".join(pending).encode(ENCODING, ERRORS))


class GahpServer:
    """A server over a set of commands, speaking ``dialect`` (GAHP unless told otherwise)."""

    def __init__(
        self,
        commands: Iterable[Command],
        version: Version,
        options: ServerOptions | None = None,
        shutdown_callbacks: Sequence[Callable[[], Any]] = (),
        dialect: Dialect | None = None,
    ) -> None:
        if dialect is None:
            from gahp_core.gahp_dialect import GahpDialect

            dialect = GahpDialect()
        self.dialect = dialect
        self.options = options or ServerOptions()
        self.version = version
        self.commands: dict[str, Command] = {}
        for cmd in commands:
            if cmd.name in self.commands:
                raise ValueError(f"command {cmd.name} declared twice")
            self.commands[cmd.name] = cmd
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.options.workers, thread_name_prefix="gahp-worker"
        )
        self._shutdown_callbacks = list(shutdown_callbacks)
        self._inflight: set[asyncio.Future[Any]] = set()
        self._stopping: asyncio.Event | None = None
        self._out: Output | None = None
        self._err: Output | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- services for dialects, built-in commands and backends ----------------------------

    @property
    def out(self) -> Output:
        """The protocol's standard output."""
        assert self._out is not None, "server not running"
        return self._out

    @property
    def err(self) -> Output:
        """The protocol's standard error (dialects that notify there)."""
        assert self._err is not None, "server not running"
        return self._err

    @property
    def stopping(self) -> bool:
        """Whether shutdown has begun."""
        return self._stopping is not None and self._stopping.is_set()

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
        """Requests and background tasks started whose outcome is not delivered yet."""
        return len(self._inflight)

    def start(
        self, cmd: Command, parsed: Any, done: Callable[[asyncio.Future[Any]], None]
    ) -> asyncio.Future[Any]:
        """Run ``cmd``'s handler on ``parsed`` (loop or pool); call ``done`` with the future."""
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any]
        if cmd.is_coroutine:
            fut = loop.create_task(cmd.handler(parsed))
        else:
            fut = loop.run_in_executor(self.executor, cmd.handler, parsed)
        self._inflight.add(fut)
        fut.add_done_callback(functools.partial(self._finished, done))
        return fut

    def _finished(self, done: Callable[[asyncio.Future[Any]], None], fut: asyncio.Future[Any]):
        self._inflight.discard(fut)
        done(fut)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        """Run a backend's background coroutine; it is cancelled at shutdown."""
        assert self._loop is not None
        task = self._loop.create_task(coro)
        inflight = self._inflight
        inflight.add(task)

        def finished(f: asyncio.Future[Any]) -> None:
            inflight.discard(f)
            _log_failure(f)

        task.add_done_callback(finished)
        return task

    # ---- the loop -------------------------------------------------------------------------

    async def serve(
        self,
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
        stderr: BinaryIO | None = None,
    ) -> int:
        """Speak the dialect on stdin/stdout(/stderr) until it stops, EOF or SIGTERM."""
        stdin = stdin or sys.stdin.buffer
        if stdout is None:
            stdout, own_err = _protect_std_streams(self.dialect.uses_stderr)
            stderr = stderr or own_err
        loop = self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        write, close_out = await _open_writer(loop, stdout, self.request_stop)
        self._out = Output(write)
        close_err = None
        if self.dialect.uses_stderr:
            write_err, close_err = await _open_writer(
                loop, stderr or sys.stderr.buffer, self.request_stop
            )
            self._err = Output(write_err)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.request_stop)
        self.dialect.start(self)
        # Everything built so far (modules, plugins) lives as long as the process: keep it
        # out of the collector's full scans, which thousands of pending requests make costly.
        gc.freeze()
        reader = asyncio.create_task(self._read_loop(stdin))
        stop = asyncio.create_task(self._stopping.wait())
        await asyncio.wait({reader, stop}, return_when=asyncio.FIRST_COMPLETED)
        reader.cancel()
        stop.cancel()
        await self._shutdown()
        await close_out(self.options.quit_grace)
        if close_err is not None:
            await close_err(self.options.quit_grace)
        return 0

    async def _read_loop(self, stdin: BinaryIO) -> None:
        loop = asyncio.get_running_loop()
        framer = self.dialect.framer(self.options.max_line)
        read = await _open_reader(loop, stdin)
        out = self.out
        while True:
            data = await read()
            if not data:
                out.hold()
                try:
                    for line in framer.finish():
                        self.dialect.handle(self, line)
                finally:
                    out.release()
                log.info("stdin closed: shutting down")
                self.request_stop()
                return
            lines = framer.feed(data)
            if not lines:
                continue
            out.hold()
            try:
                for line in lines:
                    self.dialect.handle(self, line)
                    if self.stopping:
                        return
            finally:
                out.release()

    async def _shutdown(self) -> None:
        self.dialect.stopping(self)
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
                    await asyncio.wait_for(res, timeout=max(grace, self.dialect.shutdown_time))
            except Exception:
                log.exception("shutdown callback failed")
        self.executor.shutdown(wait=False, cancel_futures=True)


def _protect_std_streams(protect_stderr: bool) -> tuple[BinaryIO, BinaryIO | None]:
    """Private descriptors for the protocol; stray writes to fd 1 (and 2) go elsewhere.

    A print, a traceback or a child process writing to the standard descriptors must not
    corrupt the protocol: fd 1 is pointed at stderr (GAHP) or /dev/null, and fd 2 at
    /dev/null when stderr carries protocol too (Ninf-G).
    """
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    err = os.fdopen(os.dup(2), "wb", buffering=0) if protect_stderr else None
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null if protect_stderr else 2, 1)
        if protect_stderr:
            os.dup2(null, 2)
    finally:
        os.close(null)
    return out, err


def _log_failure(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("background task failed", exc_info=fut.exception())


def _pollable(fd: int) -> bool:
    """Whether ``fd`` can be watched by the event loop: a pipe, a socket or a terminal."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


async def _open_reader(loop: asyncio.AbstractEventLoop, stdin: BinaryIO):
    """An ``await read()`` over stdin that never blocks the loop."""
    reader = asyncio.StreamReader(limit=2**20)
    fd = stdin.fileno()
    try:
        if not _pollable(fd):
            # epoll refuses regular files and devices such as /dev/null, and for a device
            # asyncio only finds out in a callback, after accepting it: it would never read.
            raise ValueError("not pollable")
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except (ValueError, OSError):
        # A regular file, /dev/null or similar: read it from a thread.

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
    loop: asyncio.AbstractEventLoop, stream: BinaryIO, on_lost: Callable[[], None]
) -> tuple[Callable[[bytes], None], Callable[[float], Awaitable[None]]]:
    """A non-blocking writer to ``stream``, and a coroutine that flushes (bounded) and closes."""
    try:
        transport, _ = await loop.connect_write_pipe(lambda: _WriteProtocol(on_lost), stream)
    except (ValueError, OSError):
        fd = stream.fileno()

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
