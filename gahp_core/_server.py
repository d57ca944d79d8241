"""The runtime: stdin -> dialect -> stdout (and stderr), the worker pool, shutdown.

Everything runs on one asyncio event loop. The runtime reads chunks of input and hands
them to the dialect, writes whatever the dialect has to send after each chunk and after
each finished handler, runs handlers (coroutines on the loop, plain functions in a
bounded thread pool) and shuts down. What the bytes mean (GAHP, or another protocol a
backend brings) is the dialect's business: see :mod:`gahp_core._dialect`.
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
from typing import Any, BinaryIO

from gahp_core._commands import Command
from gahp_core._dialect import Dialect, Done
from gahp_core._eager import EagerStarter
from gahp_core._options import ServerOptions
from gahp_core._protocol import Version
from gahp_core._slow import LoopWatch, handler_codes

log = logging.getLogger("gahp.server")

__all__ = ["GahpServer", "ServerOptions"]

Writer = Callable[[bytes], None]


class GahpServer:
    """A server over a set of commands, speaking ``dialect``."""

    def __init__(
        self, version: Version, dialect: Dialect, options: ServerOptions | None = None
    ) -> None:
        self.dialect = dialect
        self.options = options or ServerOptions()
        self.version = version
        self.commands: dict[str, Command[Any]] = {}
        self._names = sorted(dialect.protocol_commands)
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.options.workers, thread_name_prefix="gahp-worker"
        )
        self._shutdown_callbacks: list[Callable[[], Any]] = []
        self._inflight: set[asyncio.Future[Any]] = set()
        self._stopping: asyncio.Event | None = None
        self._write_out: Writer | None = None
        self._write_err: Writer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._eager: EagerStarter | None = None
        self._watch: LoopWatch | None = None
        dialect.attach(self)

    def add_commands(self, commands: Iterable[Command[Any]]) -> None:
        """Answer ``commands`` too (a name may be declared once, and not be the dialect's)."""
        for cmd in commands:
            if cmd.name in self.commands or cmd.name in self.dialect.protocol_commands:
                raise ValueError(f"command {cmd.name} declared twice")
            self.commands[cmd.name] = cmd
        self._names = sorted([*self.commands, *self.dialect.protocol_commands])

    def on_shutdown(self, callback: Callable[[], Any]) -> None:
        """Call ``callback`` (a function or coroutine function) when the server stops."""
        self._shutdown_callbacks.append(callback)

    # ---- services for dialects, built-in commands and backends ----------------------------

    @property
    def stopping(self) -> bool:
        """Whether shutdown has begun."""
        return self._stopping is not None and self._stopping.is_set()

    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the server runs on while it serves (None before)."""
        return self._loop

    def command_names(self) -> list[str]:
        """Every command this server answers, sorted."""
        return list(self._names)

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

    def start(self, cmd: Command[Any], parsed: Any, done: Done) -> None:
        """Run ``cmd``'s handler on ``parsed``; ``done`` gets its outcome (not if cancelled).

        A coroutine handler starts at once, in this call, in a task on the loop (see
        :mod:`gahp_core._eager`); if it finishes without waiting, ``done`` is called before
        this returns. A plain handler runs in the worker pool.
        """
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any] | None
        if cmd.is_coroutine:
            assert self._eager is not None
            fut = self._eager.start(cmd.handler(parsed), done)
            if fut is None:  # finished without waiting: ``done`` has been called
                return
        else:
            fut = loop.run_in_executor(self.executor, cmd.handler, parsed)
        self._inflight.add(fut)
        fut.add_done_callback(functools.partial(self._finished, done))

    def _finished(self, done: Done, fut: asyncio.Future[Any]) -> None:
        self._inflight.discard(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        done(None if exc is not None else fut.result(), exc)
        self.flush()

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

    def notify(self, fields: Sequence[str]) -> None:
        """Send an asynchronous notification through the dialect (where it has them)."""
        self.dialect.notify(fields)
        self.flush()

    def flush(self) -> None:
        """Write whatever the dialect has to send."""
        data = self.dialect.data_to_send()
        if data and self._write_out is not None:
            self._write_out(data)
        if self._write_err is not None:
            data = self.dialect.errors_to_send()
            if data:
                self._write_err(data)

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
        self._eager = EagerStarter(loop)
        self._stopping = asyncio.Event()
        self._write_out, close_out = await _open_writer(loop, stdout, self.request_stop)
        close_err = None
        if self.dialect.uses_stderr:
            self._write_err, close_err = await _open_writer(
                loop, stderr or sys.stderr.buffer, self.request_stop
            )
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.request_stop)
        self._start_watch(loop)
        self.dialect.start()
        self.flush()
        # Everything built so far (modules, plugins) lives as long as the process: keep it
        # out of the collector's full scans, which thousands of pending requests make costly.
        gc.freeze()
        stop_reading = await _open_reader(loop, stdin, self.feed)
        await self._stopping.wait()
        stop_reading()
        await self._shutdown()
        await close_out(self.options.quit_grace)
        if close_err is not None:
            await close_err(self.options.quit_grace)
        return 0

    async def serve_in_memory(self, write_out: Writer, write_err: Writer | None = None) -> int:
        """Speak the dialect without I/O: :meth:`feed` brings input, ``write_out`` (and
        ``write_err``, for a dialect using stderr) takes output; until it stops.

        For tests in the test's own process (:class:`gahp_core.testing.InProcessClient`):
        no descriptor is touched, no signal handler installed.
        """
        loop = self._loop = asyncio.get_running_loop()
        self._eager = EagerStarter(loop)
        self._stopping = asyncio.Event()
        self._write_out = write_out
        self._write_err = write_err if self.dialect.uses_stderr else None
        self._start_watch(loop)
        self.dialect.start()
        self.flush()
        await self._stopping.wait()
        await self._shutdown()
        return 0

    def _start_watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.options.slow_handler > 0:
            codes = handler_codes(self.commands.values())
            self._watch = LoopWatch(loop, self.options.slow_handler, codes)
            self._watch.start()

    def feed(self, data: bytes) -> None:
        """A chunk of input (``b""``: its end), on the loop, outside any task: what the
        reader of :meth:`serve` does with each chunk of stdin. It is handled where
        handlers start eagerly (see :mod:`gahp_core._eager`): at once, or on 3.11 in the
        dispatcher task, on the next turn of the loop, chunks in order."""
        assert self._eager is not None
        self._eager.call(functools.partial(self._received, data))

    def _received(self, data: bytes) -> None:
        """A chunk of input (``b""``: end of input): to the dialect, then write its answers."""
        if self.stopping:
            return
        try:
            self.dialect.receive(data)
        except Exception:
            log.exception("internal error handling input: shutting down")
            self.request_stop()
        self.flush()
        if not data:
            log.info("stdin closed: shutting down")
            self.request_stop()

    async def _shutdown(self) -> None:
        self.dialect.stopping()
        self.flush()
        if self._eager is not None:
            self._eager.close()
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
        if self._watch is not None:
            self._watch.stop()


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


class _ReadProtocol(asyncio.Protocol):
    """Hands each chunk read to ``on_data``, and ``b""`` once at the end."""

    def __init__(self, on_data: Callable[[bytes], None]) -> None:
        self._on_data = on_data
        self._ended = False

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_data(b"")


async def _open_reader(
    loop: asyncio.AbstractEventLoop, stdin: BinaryIO, on_data: Callable[[bytes], None]
) -> Callable[[], None]:
    """Call ``on_data`` on the loop with each chunk of stdin; returns a function that stops."""
    fd = stdin.fileno()
    try:
        if not _pollable(fd):
            # epoll refuses regular files and devices such as /dev/null, and for a device
            # asyncio only finds out in a callback, after accepting it: it would never read.
            raise ValueError("not pollable")
        transport, _ = await loop.connect_read_pipe(lambda: _ReadProtocol(on_data), stdin)
    except (ValueError, OSError):
        # A regular file, /dev/null or similar: read it from a thread.

        async def read_thread() -> None:
            while True:
                data = await loop.run_in_executor(None, os.read, fd, 1 << 16)
                loop.call_soon(on_data, data)  # outside this task, as from a pipe
                if not data:
                    return

        task = loop.create_task(read_thread())

        def stop_reading() -> None:
            task.cancel()

        return stop_reading

    def stop() -> None:
        transport.close()

    return stop


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
