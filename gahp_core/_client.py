"""GAHP clients: talk to a GAHP server as HTCondor's gridmanager does.

:class:`GahpClient` spawns a server and speaks to it over its stdin and stdout;
:class:`InProcessClient` has the same API and runs a backend in this process. Both frame
and parse what the server writes with the framework's own sans-IO code
(:class:`~gahp_core.ClientConnection`): every line bounded, every read with a timeout,
and, over pipes, the lines not yet read bounded too (the reader stops taking the
server's output until they are read). The server's stderr is kept (its last
``stderr_limit`` bytes) and can be handed, line by line, to a callback.

Used by the conformance kit (:mod:`gahp_core.testing`), ``gahp-shell`` and the
benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn, Self

from gahp_core._client_connection import (
    CLIENT_MAX_LINE,
    BadServerLine,
    ClientConnection,
    parse_results_head,
)
from gahp_core._errors import GahpError
from gahp_core._escaping import split
from gahp_core._protocol import Version, parse_banner

if TYPE_CHECKING:
    from gahp_core._server import GahpServer

MAX_BACKLOG = 256 * 1024 * 1024
"""Bytes of unread lines a :class:`GahpClient` holds before it stops reading the server."""
STDERR_LIMIT = 8 * 1024 * 1024
"""Bytes of the server's stderr a :class:`GahpClient` keeps (the last ones)."""
_CHUNK = 1 << 16


class GahpTimeout(GahpError, TimeoutError):
    """The server did not produce a complete line in time."""


class LineClient:
    """What both clients share: the protocol, and the lines the server wrote so far.

    A transport (a reader thread, an event loop) hands the server's output to
    :meth:`_received`; readers wait for lines with a timeout.
    """

    banner: str
    """The server's first line."""

    def __init__(
        self,
        *,
        keep_r: bool = False,
        crlf: bool = True,
        max_line: int = CLIENT_MAX_LINE,
        max_backlog: int | None = None,
    ) -> None:
        self.connection = ClientConnection(keep_r=keep_r, crlf=crlf, max_line=max_line)
        """The sans-IO protocol state (:class:`~gahp_core.ClientConnection`)."""
        self._max_backlog = max_backlog
        self._cond = threading.Condition()
        self._discard = False
        self._next_reqid = 1

    # ---- protocol state -------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The response prefix expected on every line (set by :meth:`set_prefix`)."""
        return self.connection.prefix

    @prefix.setter
    def prefix(self, value: str) -> None:
        with self._cond:
            self.connection.prefix = value

    @property
    def keep_r(self) -> bool:
        """Whether ``R`` lines are returned by :meth:`read_line` (else counted, skipped)."""
        return self.connection.keep_r

    @keep_r.setter
    def keep_r(self, value: bool) -> None:
        with self._cond:
            self.connection.keep_r = value

    @property
    def notifications(self) -> int:
        """``R`` lines skipped so far, counted as lines are read (read before counting)."""
        return self.connection.notifications

    @property
    def eol(self) -> bytes:
        """The terminator of request lines."""
        return self.connection.eol

    # ---- what a transport does -------------------------------------------------------------

    def _received(self, data: bytes) -> None:
        """Output of the server (``b""``: its end). Over a pipe, waits while too much is unread."""
        with self._cond:
            limit = self._max_backlog
            if limit is not None and self.connection.buffered >= limit:
                self._cond.wait_for(lambda: self._discard or self.connection.buffered < limit)
            if self._discard and data:
                return
            self.connection.receive_data(data)
            self._cond.notify_all()

    @property
    def stderr_text(self) -> str:
        """Everything the server wrote on stderr so far (kept)."""
        raise NotImplementedError

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the server's input as they are."""
        raise NotImplementedError

    def close_input(self) -> None:
        """End the server's input (its stdin reaches EOF)."""
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> int:
        """The server's exit status once it has stopped (:class:`GahpTimeout` if not in time)."""
        raise NotImplementedError

    def close(self) -> None:
        """End the input and make sure the server is gone."""
        raise NotImplementedError

    def _ended(self) -> str:
        """Why the output ended, for an error: the exit status and the stderr."""
        return ""

    # ---- reading --------------------------------------------------------------------------

    def _take(self, take: Callable[[], str | None], timeout: float) -> str:
        conn = self.connection
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                line = take()
                if line is not None:
                    self._cond.notify_all()  # room for a reader held back by the backlog
                    return line
                if conn.ended:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise GahpTimeout(f"no line from the server within {timeout} s")
                if not self._reads_here:
                    self._cond.wait(left)
                    continue
            self._read_here(left)
        raise EOFError(f"the server closed its stdout{self._ended()}")

    _reads_here = False
    """Whether the thread waiting for a line reads the server's output itself
    (:meth:`_read_here`) rather than waiting for a reader thread."""

    def _read_here(self, timeout: float) -> None:
        """Read what the server wrote within ``timeout``, on the calling thread."""
        raise NotImplementedError

    def read_raw(self, timeout: float = 10.0) -> str:
        """The next stdout line as text (terminator removed), ``R`` lines included.

        The end of the output raises ``EOFError`` with the server's exit status and stderr;
        an over-long line :class:`BadServerLine`.
        """
        return self._take(self.connection.next_raw, timeout)

    def read_line(self, timeout: float = 10.0) -> str:
        """The next line with the expected prefix removed; ``R`` lines are counted
        (:attr:`notifications`) and skipped unless :attr:`keep_r` is set; a line without
        the prefix raises :class:`BadServerLine`."""
        return self._take(self.connection.next_line, timeout)

    def read_lines(self, count: int, timeout: float = 10.0) -> list[str]:
        """The next ``count`` lines (as :meth:`read_line`), taken in bulk as they arrive;
        ``timeout`` is for the whole."""
        conn = self.connection
        deadline = time.monotonic() + timeout
        out: list[str] = []
        while True:
            with self._cond:
                out += conn.next_lines(count - len(out))
                self._cond.notify_all()  # room for a reader held back by the backlog
                if len(out) >= count:
                    return out
                ended = conn.ended
            if ended:
                raise EOFError(f"the server closed its stdout{self._ended()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise GahpTimeout(f"{len(out)} of {count} lines from the server in {timeout} s")
            if self._reads_here:
                self._read_here(left)
            else:
                with self._cond:
                    self._cond.wait_for(lambda: conn.waiting or conn.ended, left)

    def read_fields(self, timeout: float = 10.0) -> list[str]:
        """The next line split into unescaped fields."""
        return self._split(self.read_line(timeout))

    @staticmethod
    def _split(text: str) -> list[str]:
        return split(text.rstrip("\r"))

    # ---- protocol -------------------------------------------------------------------------

    def send(self, *args: str) -> None:
        """Send one request line: the arguments escaped and joined, with the terminator."""
        self.send_raw(self.connection.request(args))

    def send_many(self, requests: Iterable[Sequence[str]]) -> None:
        """Send request lines in one write (pipelined)."""
        request = self.connection.request
        self.send_raw(b"".join(request(r) for r in requests))

    def version(self) -> Version | None:
        """The banner as HTCondor reads it."""
        return parse_banner(self.banner)

    def command(self, *args: str, timeout: float = 10.0) -> list[str]:
        """Send a request and return its return line's fields (``["S", ...]``)."""
        self.send(*args)
        return self.read_fields(timeout)

    def reqid(self) -> str:
        """A fresh request id."""
        rid = str(self._next_reqid)
        self._next_reqid += 1
        return rid

    def results(self, timeout: float = 10.0) -> list[list[str]]:
        """Send RESULTS once and return its result lines' fields."""
        count = parse_results_head(self.command("RESULTS", timeout=timeout))
        return [self._split(line) for line in self.read_lines(count, timeout)]

    def wait_results(
        self, reqids: Sequence[str], timeout: float = 30.0, poll: float = 0.05
    ) -> dict[str, list[str]]:
        """Poll RESULTS until every id in ``reqids`` has a result; return fields by id."""
        want = set(reqids)
        got: dict[str, list[str]] = {}
        deadline = time.monotonic() + timeout
        while want - got.keys():
            for fields in self.results():
                got[fields[0]] = fields[1:]
            if not want - got.keys():
                break
            if time.monotonic() > deadline:
                raise GahpTimeout(f"no result for {sorted(want - got.keys())} in {timeout} s")
            time.sleep(poll)
        return got

    def call(self, command: str, *args: str, timeout: float = 30.0) -> list[str]:
        """Issue an asynchronous command with a fresh id and wait for its result fields."""
        rid = self.reqid()
        ret = self.command(command, rid, *args)
        if ret != ["S"]:
            raise AssertionError(f"{command} was not accepted: {ret!r}")
        return self.wait_results([rid], timeout=timeout)[rid]

    def set_prefix(self, prefix: str) -> None:
        """RESPONSE_PREFIX: its own reply is unprefixed, later lines carry it."""
        ret = self.command("RESPONSE_PREFIX", prefix)
        if ret != ["S"]:
            raise AssertionError(f"RESPONSE_PREFIX refused: {ret!r}")
        self.prefix = prefix

    def quit(self, timeout: float = 5.0) -> int:
        """Send QUIT, expect ``S``, and wait for the server to stop: its exit status."""
        ret = self.command("QUIT")
        if not ret or ret[0] != "S":
            raise AssertionError(f"QUIT answered {ret!r}")
        return self.wait(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self.close()
        if exc is not None and self.stderr_text.strip():
            exc.add_note(f"the server's stderr:\n{self.stderr_text.rstrip()}")


class _Tail:
    """The last ``limit`` bytes written to it, and how many were dropped before them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        over = len(self.data) - self.limit
        if over > 0:
            del self.data[:over]
            self.dropped += over

    def text(self) -> str:
        head = f"[... {self.dropped} bytes of stderr dropped]\n" if self.dropped else ""
        return head + self.data.decode("utf-8", "replace")


class GahpClient(LineClient):
    """Spawn a GAHP server and talk to it over its stdin/stdout, as HTCondor does.

    A reader thread hands stdout to the protocol, so that the server is never held up by
    a full pipe; ``R`` notifications are counted apart (``notifications``, as lines are
    read) unless ``keep_r`` is set. With ``stderr`` a pipe (the default) another thread
    keeps its last ``stderr_limit`` bytes (:attr:`stderr_text`) and gives each line, as it
    arrives, to ``on_stderr``. An exception raised in its ``with`` block carries the
    server's stderr as a note. With ``read_banner=False`` the caller reads the banner
    (:meth:`read_banner`) and so keeps the client if the server never gives one.

    With ``reader_thread=False`` stdout is read by the thread waiting for a line instead
    (no hand-over between threads, as a benchmark wants); the caller must then read while
    the server writes, or a server held up by a full pipe reads no more requests.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | None = subprocess.PIPE,
        keep_r: bool = False,
        crlf: bool = True,
        *,
        on_stderr: Callable[[str], None] | None = None,
        read_banner: bool = True,
        max_line: int = CLIENT_MAX_LINE,
        max_backlog: int = MAX_BACKLOG,
        stderr_limit: int = STDERR_LIMIT,
        reader_thread: bool = True,
    ) -> None:
        super().__init__(keep_r=keep_r, crlf=crlf, max_line=max_line, max_backlog=max_backlog)
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=full_env,
            cwd=cwd,
            bufsize=0,
        )
        """The server process."""
        self._stderr = _Tail(stderr_limit)
        self._on_stderr = on_stderr
        self._reads_here = not reader_thread
        if self._reads_here and self.proc.stdout is not None:
            os.set_blocking(self.proc.stdout.fileno(), False)
        self._reader: threading.Thread | None = None
        if reader_thread:
            self._reader = threading.Thread(target=self._read_stdout, daemon=True)
            self._reader.start()
        self._stderr_reader: threading.Thread | None = None
        if self.proc.stderr is not None:
            self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
            self._stderr_reader.start()
        self.banner = ""
        if read_banner:
            self.read_banner()

    def read_banner(self, timeout: float = 20.0) -> str:
        """Read the server's first line into :attr:`banner`; if none comes (the output ends
        or ``timeout`` passes) close the client and raise."""
        try:
            self.banner = self.read_line(timeout=timeout)
        except (EOFError, GahpTimeout, BadServerLine):
            self.close()
            raise
        return self.banner

    def _read_stdout(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            try:
                chunk = out.read(_CHUNK)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._received(chunk)
        self._received(b"")

    def _read_here(self, timeout: float) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            chunk = out.read(_CHUNK)  # non-blocking: what is there, or None
            if chunk is None:
                if not select.select([out], [], [], timeout)[0]:
                    return
                chunk = out.read(_CHUNK)
                if chunk is None:
                    return
        except (OSError, ValueError):
            chunk = b""
        self._received(chunk)

    def _read_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        partial = b""
        while True:
            try:
                chunk = err.read(65536)  # unbuffered: what is there
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._stderr.add(chunk)
            if self._on_stderr is not None:
                partial += chunk
                *lines, partial = partial.split(b"\n")
                if len(partial) > self._stderr.limit:  # a line without end: give it as is
                    lines.append(partial)
                    partial = b""
                for line in lines:
                    self._on_stderr(line.decode("utf-8", "replace").rstrip("\r"))
        if partial and self._on_stderr is not None:
            self._on_stderr(partial.decode("utf-8", "replace"))

    def _ended(self) -> str:
        try:
            code = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return " (still running)"
        if self._stderr_reader is not None:
            self._stderr_reader.join(2)
        err = self.stderr_text.strip()
        return f" (exit status {code}){'; its stderr:' + chr(10) + err if err else ''}"

    @property
    def stderr_text(self) -> str:
        """What the server wrote on stderr so far (all of it, up to ``stderr_limit`` bytes,
        after :meth:`close`)."""
        return self._stderr.text()

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the server's stdin as they are."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close_input(self) -> None:
        """Close the server's stdin."""
        if self.proc.stdin:
            self.proc.stdin.close()

    def poll(self) -> int | None:
        """The server's exit status if it has exited, else ``None``."""
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The process's exit status once it has exited (:class:`GahpTimeout` if not in time)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise GahpTimeout(f"the server still runs after {timeout} s") from None

    def close(self) -> None:
        """Close the pipes and make sure the process is gone."""
        with self._cond:
            self._discard = True  # a reader held back by the backlog drains what is left
            self._cond.notify_all()
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(2)
        if self._stderr_reader is not None:
            self._stderr_reader.join(2)  # stderr_text is then all the server wrote


class InProcessClient(LineClient):
    """A backend served in this process, with :class:`GahpClient`'s API.

    The server is built as ``gahp-server --backend NAME ARGS`` builds it (the same
    options, hooks, runtime and dialect) and runs on an event loop in a thread of this
    process; requests go to it, and its output comes back, in memory: no subprocess,
    no pipe. ``backend`` is an installed backend's name, ``module:NAME``, or a plugin
    (a module or an object with hook implementations). ``env`` is set in
    ``os.environ`` while the server is built (options read their defaults there) and
    restored after. :attr:`stderr_text` holds the server's log records of level WARNING
    and above. :attr:`server` is the :class:`~gahp_core.GahpServer`: its ``commands``
    are the backend's declarations. For backends of the GAHP dialect (a dialect that
    writes protocol lines on stderr, as Ninf-G's does, is not served here).
    """

    server: GahpServer
    """The server under test."""

    def __init__(
        self,
        backend: str | object,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        keep_r: bool = False,
        crlf: bool = True,
        max_line: int = CLIENT_MAX_LINE,
    ) -> None:
        from gahp_core._app import add_backend_options, add_core_options, build_server
        from gahp_core._hooks import load_backend, plugin_manager, register_backend

        super().__init__(keep_r=keep_r, crlf=crlf, max_line=max_line)
        self._log_lines: list[str] = []
        self._handler = _Collect(self._log_lines)
        logging.getLogger("gahp").addHandler(self._handler)
        pm = plugin_manager()
        saved = {k: os.environ.get(k) for k in env or {}}
        try:
            os.environ.update(env or {})
            if isinstance(backend, str):
                load_backend(pm, backend)
            else:
                register_backend(pm, backend, getattr(backend, "__name__", "backend"))
            parser = _Parser(prog="gahp-server")
            add_core_options(parser)
            add_backend_options(pm, parser)
            options = parser.parse_args(list(args))
            self.server = build_server(pm, options)
        except BaseException:
            logging.getLogger("gahp").removeHandler(self._handler)
            raise
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self._loop = asyncio.new_event_loop()
        self._code: int | None = None
        self._thread = threading.Thread(target=self._run, name="gahp-in-process", daemon=True)
        self._thread.start()
        self.banner = self.read_line(timeout=20)

    def _run(self) -> None:
        try:
            self._code = self._loop.run_until_complete(self.server.serve_in_memory(self._received))
        finally:
            self._received(b"")
            self._loop.close()
            logging.getLogger("gahp").removeHandler(self._handler)

    @property
    def stderr_text(self) -> str:
        """The server's log records of level WARNING and above, one a line."""
        return "".join(f"{line}\n" for line in self._log_lines)

    def _ended(self) -> str:
        err = self.stderr_text.strip()
        return f"; its log:\n{err}" if err else ""

    def _call(self, fn: Callable[[bytes], None], data: bytes) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, data)
        except RuntimeError:  # the loop is closed: the server stopped
            raise EOFError(f"the server has stopped{self._ended()}") from None

    def send_raw(self, data: bytes) -> None:
        """Give bytes to the server's input as they are."""
        if data:
            self._call(self.server.feed, data)

    def close_input(self) -> None:
        """End the server's input."""
        if self._thread.is_alive():
            self._call(self.server.feed, b"")

    def wait(self, timeout: float | None = None) -> int:
        """0 once the server has stopped (:class:`GahpTimeout` if not in time)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise GahpTimeout(f"the server still runs after {timeout} s")
        return 0 if self._code is None else self._code

    def close(self) -> None:
        """End the input and wait for the server to stop."""
        with contextlib.suppress(EOFError):
            self.close_input()
        self._thread.join(10)


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self._lines = lines
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self._lines.append(self.format(record))


class _Parser(argparse.ArgumentParser):
    """Options errors as exceptions, not an exit."""

    def error(self, message: str) -> NoReturn:
        raise GahpError(f"bad options: {message}")
