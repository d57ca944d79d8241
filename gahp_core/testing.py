"""GAHP clients (over pipes, or in this process) and a conformance suite any backend can
run against itself.

Use the suite by subclassing :class:`GahpConformance` in a pytest module::

    class TestMyGahp(GahpConformance):
        server_command = ["my-gahp"]
        async_probe = "MY_PING {reqid}"   # any async command that answers quickly

:class:`GahpClient` spawns a server and speaks to it over pipes, as HTCondor does;
:class:`InProcessClient` has the same API and runs the backend in the test's process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, Self, TypeVar

from gahp_core._commands import shape_count
from gahp_core._errors import GahpError
from gahp_core._escaping import join, split
from gahp_core._protocol import Version, parse_banner

__all__ = [
    "GahpClient",
    "GahpConformance",
    "GahpTimeout",
    "InProcessClient",
    "proc_status",
    "wait_for",
]


def proc_status(pid: int, key: str) -> int:
    """A numeric field of ``/proc/PID/status`` (VmRSS and VmHWM in kB, Threads); -1 if gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class GahpTimeout(GahpError, TimeoutError):
    """The server did not produce a complete line in time."""


T = TypeVar("T")


def wait_for(
    check: Callable[[], T],
    timeout: float = 30.0,
    what: str = "the condition",
    interval: float = 0.05,
) -> T:
    """Call ``check`` until it returns something truthy, and return that.

    Wait for what can be observed (a file, a status, a process gone) rather than sleeping a
    guessed time: the wait ends as soon as ``check`` holds and fails (``AssertionError``,
    naming ``what`` and the last value) only after ``timeout`` seconds, so a generous
    timeout costs nothing on a fast machine. ``check`` is called once more after the
    deadline passes.
    """
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            seen = "" if last is None else f" (last: {last!r})"
            raise AssertionError(f"{what}: not within {timeout:g} s{seen}")
        time.sleep(interval)


class _LineClient:
    """What both clients share: a queue of the server's stdout lines, and the protocol."""

    prefix: str
    """The response prefix expected on every line (set by :meth:`set_prefix`)."""
    keep_r: bool
    """Whether ``R`` lines are returned by :meth:`read_line` (else counted, skipped)."""
    notifications: int
    """``R`` lines skipped so far. They are counted as lines are read (by
    :meth:`read_line` and the calls built on it), not as the server writes them: read
    before counting."""
    banner: str
    """The server's first line."""

    def _setup(self, keep_r: bool, crlf: bool) -> None:
        self.prefix = ""
        self.keep_r = keep_r
        self.eol = b"\r\n" if crlf else b"\n"
        self.notifications = 0
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._buf = b""
        self._next_reqid = 1

    def _take(self, chunk: bytes) -> None:
        """Output of the server: complete lines to the queue (``b""``: the end of it)."""
        if not chunk:
            if self._buf:
                self._lines.put(self._buf)
                self._buf = b""
            self._lines.put(None)
            return
        buf = self._buf + chunk
        while True:
            lf = _unescaped_lf(buf)
            if lf < 0:
                break
            self._lines.put(buf[:lf])
            buf = buf[lf + 1 :]
        self._buf = buf

    # ---- what each client does its own way ------------------------------------------------

    @property
    def stderr_text(self) -> str:
        """Everything the server wrote on stderr so far."""
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

    # ---- low level ------------------------------------------------------------------------

    def send(self, *args: str) -> None:
        """Send one request line: the arguments escaped and joined, CRLF-terminated."""
        self.send_raw(join(args).encode("utf-8", "surrogateescape") + self.eol)

    def read_raw(self, timeout: float = 10.0) -> str:
        """The next stdout line as text (terminator removed), ``R`` lines included.

        The end of the output raises ``EOFError`` with the server's exit status and stderr.
        """
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise GahpTimeout(f"no line from the server within {timeout} s") from None
        if line is None:
            self._lines.put(None)
            raise EOFError(f"the server closed its stdout{self._ended()}")
        return line.decode("utf-8", "surrogateescape")

    def read_line(self, timeout: float = 10.0) -> str:
        """The next line with the expected prefix removed; ``R`` lines are counted
        (:attr:`notifications`) and skipped unless :attr:`keep_r` is set."""
        while True:
            text = self.read_raw(timeout)
            if self.prefix:
                if not text.startswith(self.prefix):
                    raise AssertionError(f"line without prefix {self.prefix!r}: {text!r}")
                text = text[len(self.prefix) :]
            if not self.keep_r and text.rstrip("\r") == "R":
                self.notifications += 1
                continue
            return text

    def read_fields(self, timeout: float = 10.0) -> list[str]:
        """The next line split into unescaped fields."""
        return split(self.read_line(timeout).rstrip("\r"))

    # ---- protocol -------------------------------------------------------------------------

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
        head = self.command("RESULTS", timeout=timeout)
        if head[0] != "S" or len(head) != 2:
            raise AssertionError(f"bad RESULTS reply {head!r}")
        return [self.read_fields(timeout) for _ in range(int(head[1]))]

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


class GahpClient(_LineClient):
    """Spawn a GAHP server and talk to it over its stdin/stdout, as HTCondor does.

    A reader thread collects stdout lines so reads can time out; ``R`` notifications are
    counted apart (``notifications``, as lines are read) unless ``keep_r`` is set. An
    exception raised in its ``with`` block carries the server's stderr as a note.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | None = subprocess.PIPE,
        keep_r: bool = False,
        crlf: bool = True,
    ) -> None:
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
        self._setup(keep_r, crlf)
        self._stderr_chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self._stderr_reader: threading.Thread | None = None
        if self.proc.stderr is not None:
            self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
            self._stderr_reader.start()
        try:
            self.banner = self.read_line(timeout=20)
        except (EOFError, GahpTimeout):
            self.close()
            raise

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                chunk = self.proc.stdout.read(65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._take(chunk)
        self._take(b"")

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            try:
                chunk = self.proc.stderr.read(65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._stderr_chunks.append(chunk)

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
        """Everything the server wrote on stderr so far (all of it after :meth:`close`)."""
        return b"".join(self._stderr_chunks).decode("utf-8", "replace")

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the server's stdin as they are."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close_input(self) -> None:
        """Close the server's stdin."""
        if self.proc.stdin:
            self.proc.stdin.close()

    def wait(self, timeout: float | None = None) -> int:
        """The process's exit status once it has exited (:class:`GahpTimeout` if not in time)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise GahpTimeout(f"the server still runs after {timeout} s") from None

    def close(self) -> None:
        """Close the pipes and make sure the process is gone."""
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
        self._reader.join(2)
        if self._stderr_reader is not None:
            self._stderr_reader.join(2)  # stderr_text is then all the server wrote


class InProcessClient(_LineClient):
    """A backend served in the test's own process, with :class:`GahpClient`'s API.

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

    def __init__(
        self,
        backend: str | object,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        keep_r: bool = False,
        crlf: bool = True,
    ) -> None:
        from gahp_core._app import add_backend_options, add_core_options, build_server
        from gahp_core._hooks import load_backend, plugin_manager, register_backend

        self._setup(keep_r, crlf)
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
        def write_out(data: bytes) -> None:
            self._take(data)

        try:
            self._code = self._loop.run_until_complete(self.server.serve_in_memory(write_out))
        finally:
            self._take(b"")
            self._loop.close()
            logging.getLogger("gahp").removeHandler(self._handler)

    @property
    def stderr_text(self) -> str:
        """The server's log records of level WARNING and above, one a line."""
        return "".join(f"{line}\n" for line in self._log_lines)

    def _ended(self) -> str:
        err = self.stderr_text.strip()
        return f"; its log:\n{err}" if err else ""

    def _call(self, fn: Callable[..., object], *args: object) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
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


def _unescaped_lf(buf: bytes) -> int:
    pos = 0
    while True:
        lf = buf.find(b"\n", pos)
        if lf < 0:
            return -1
        n = 0
        j = lf - 1
        while j >= 0 and buf[j] == 0x5C:
            n += 1
            j -= 1
        if n % 2 == 0:
            return lf
        pos = lf + 1


class GahpConformance:
    """Protocol conformance tests; subclass with ``server_command`` (or ``backend``) set
    (pytest collects it).

    ``async_probe`` is an asynchronous command line with ``{reqid}`` where the id goes,
    answering quickly (within ``probe_settle_s``) whatever the backend's state (e.g. a
    ping); it must be listed by ``COMMANDS``; without it the asynchronous checks are
    skipped. ``probe_result_fields`` is how many fields its result line has after the
    request id (by default what the probe's command declares as ``result_fields``, where
    ``backend`` is given): every probe result the kit reads must have that many (without
    it, they must all have the same number, at least one). ``server_env`` adds
    environment variables.

    ``backend`` (an installed backend's name or ``module:NAME``) lets the kit read the
    commands' declarations; with no ``server_command`` the kit runs the backend in its
    own process (:class:`InProcessClient`, with ``backend_args``) instead of spawning it.
    ``command_requests`` lists a request for each command to check (``{reqid}`` where an
    asynchronous one's id goes): each must be in ``COMMANDS`` and answer with the fields
    its command declares (``result_fields``, or ``error_fields`` for an error result).

    Every failure is an ``AssertionError`` that says what was expected and seen, with the
    server's stderr attached as a note.
    """

    server_command: Sequence[str] = ()
    server_env: Mapping[str, str] | None = None
    backend: str | None = None
    """The backend's name (or ``module:NAME``): its declarations are checked."""
    backend_args: Sequence[str] = ()
    """Options for an in-process server (no ``server_command``)."""
    async_probe: str | None = None
    probe_result_fields: int | None = None
    """The field count of the probe's result line, request id excluded."""
    command_requests: Mapping[str, str] = {}
    """A request line for each command whose declared result shape is checked."""
    required_commands: Sequence[str] = ("COMMANDS", "QUIT", "RESULTS", "VERSION")
    probe_settle_s: float = 0.5
    """How long one ``async_probe`` may take to produce its result."""
    burst_size: int = 50
    """Probes sent at once by :meth:`test_burst_of_probes_is_answered_at_once`."""
    burst_bound_s: float = 5.0
    """How long the ``S`` lines of a burst may take: generous, for a loaded machine; a
    handler that blocks the event loop (``time.sleep`` in an ``async def``) fails."""
    exit_bound_s: float = 10.0
    """How long the server may take to exit after ``QUIT`` or the end of its input: generous,
    for a loaded machine; a server that does not stop at all fails."""

    def client(self) -> GahpClient | InProcessClient:
        """A new session with the server under test."""
        if self.server_command:
            return GahpClient(self.server_command, env=self.server_env)
        if self.backend:
            return InProcessClient(self.backend, self.backend_args, env=self.server_env)
        raise AssertionError("set server_command (or backend) on the conformance class")

    def declarations(self) -> dict[str, Any]:
        """The backend's commands by name (``backend`` given), else an empty dict."""
        if not self.backend:
            return {}
        cached = self.__dict__.get("_declarations")
        if cached is None:
            with InProcessClient(self.backend, self.backend_args, env=self.server_env) as c:
                cached = dict(c.server.commands)
            self.__dict__["_declarations"] = cached
        return cached

    def _probe(self, c: _LineClient, reqid: str) -> list[str]:
        import pytest

        if not self.async_probe:
            pytest.skip("no async_probe command configured")
        return split(self.async_probe.format(reqid=reqid))

    def _probe_fields(self) -> int | None:
        if self.probe_result_fields is not None or not self.async_probe:
            return self.probe_result_fields
        cmd = self.declarations().get(split(self.async_probe)[0].upper())
        return None if cmd is None else shape_count(cmd.result_fields)

    def _check_probe_results(self, results: Sequence[Sequence[str]]) -> None:
        """Each probe result line (request id first) has the declared field count."""
        counts = {len(r) - 1 for r in results}
        want = self._probe_fields()
        if want is not None:
            bad = [list(r) for r in results if len(r) - 1 != want]
            assert not bad, f"probe results without {want} field(s) after the id: {bad}"
        else:
            assert len(counts) <= 1, f"probe results of different field counts: {results}"
            assert 0 not in counts, f"a probe result with no field after the id: {results}"

    def _accepted(self, c: _LineClient, request: Sequence[str]) -> None:
        reply = c.command(*request)
        assert reply == ["S"], f"{join(request)}: answered {reply!r}, not S"

    def _wait_exit(self, c: _LineClient, since: float, after: str) -> int:
        """The exit code, once the server has exited; fail if it runs ``exit_bound_s`` on."""
        try:
            code = c.wait(max(0.0, since + self.exit_bound_s - time.monotonic()))
        except GahpTimeout:
            took = time.monotonic() - since
            raise AssertionError(
                f"still running {took:.1f} s after {after} (bound {self.exit_bound_s:g} s)"
            ) from None
        took = time.monotonic() - since
        assert took <= self.exit_bound_s, (
            f"exited {took:.1f} s after {after} (bound {self.exit_bound_s:g} s)"
        )
        return code

    def test_banner(self) -> None:
        with self.client() as c:
            banner = c.banner
            assert banner.startswith("$GahpVersion: "), f"banner {banner!r}: not $GahpVersion:"
            assert len(banner) < 150, f"banner of {len(banner)} characters (over 149)"
            assert c.version() is not None, f"banner {banner!r}: HTCondor cannot read it"
            reply = c.command("VERSION")
            assert reply == ["S", *split(banner)], f"VERSION answered {reply!r}, not the banner"

    def test_commands_lists_required(self) -> None:
        with self.client() as c:
            reply = c.command("COMMANDS")
            assert reply[:1] == ["S"], f"COMMANDS answered {reply!r}"
            missing = [n for n in self.required_commands if n not in reply[1:]]
            assert not missing, f"COMMANDS does not list {missing}: {reply[1:]}"

    def test_commands_lists_the_probe_and_each_command_checked(self) -> None:
        """The probe, every command of ``command_requests`` and every declared command are
        listed by COMMANDS (a probe it does not list costs a client two long timeouts)."""
        with self.client() as c:
            reply = c.command("COMMANDS")
            assert reply[:1] == ["S"], f"COMMANDS answered {reply!r}"
            wanted = {split(r)[0].upper() for r in self.command_requests.values()}
            wanted |= {n.upper() for n in self.command_requests} | set(self.declarations())
            if self.async_probe:
                wanted.add(split(self.async_probe)[0].upper())
            missing = sorted(wanted - set(reply[1:]))
            assert not missing, f"COMMANDS does not list {missing}: {reply[1:]}"

    def test_case_insensitive_command_codes(self) -> None:
        with self.client() as c:
            reply = c.command("commands")
            assert reply[:1] == ["S"], f"'commands' answered {reply!r}"
            reply = c.command("ReSuLtS")
            assert reply == ["S", "0"], f"'ReSuLtS' answered {reply!r}, not S 0"

    def test_errors_keep_the_server_running(self) -> None:
        with self.client() as c:
            for request in (["NO_SUCH_COMMAND_XYZ"], ["RESULTS", "extra"], ["RESPONSE_PREFIX"]):
                reply = c.command(*request)
                assert reply[:1] == ["E"], f"{join(request)}: answered {reply!r}, not E"
            c.send_raw(b"\r\n")
            reply = c.read_fields()
            assert reply[:1] == ["E"], f"an empty line: answered {reply!r}, not E"
            reply = c.command("COMMANDS")
            assert reply[:1] == ["S"], f"COMMANDS after the errors answered {reply!r}"

    def test_bad_request_ids(self) -> None:
        with self.client() as c:
            probe = self._probe(c, "1")
            for bad in ("0", "abc", ""):
                reply = c.command(probe[0], bad, *probe[2:])
                assert reply[:1] == ["E"], f"request id {bad!r}: answered {reply!r}, not E"
            reply = c.command(probe[0])
            assert reply[:1] == ["E"], f"{probe[0]} without a request id: answered {reply!r}"
            reply = c.command("RESULTS")
            assert reply == ["S", "0"], f"RESULTS after refused requests answered {reply!r}"

    def test_response_prefix(self) -> None:
        with self.client() as c:
            for prefix in ("GAHP:", "NEW_"):
                reply = c.command("RESPONSE_PREFIX", prefix)
                assert reply == ["S"], f"RESPONSE_PREFIX {prefix}: answered {reply!r}"
                c.prefix = prefix
                reply = c.command("RESULTS")
                assert reply == ["S", "0"], f"RESULTS after the prefix answered {reply!r}"

    def test_probe_result_field_count(self) -> None:
        """The probe's result line has its declared field count, one at a time and several
        in one ``RESULTS``."""
        with self.client() as c:
            results = [[rid, *fields] for rid, fields in self._collect(c, ["1"]).items()]
            results += [[rid, *fields] for rid, fields in self._collect(c, ["2", "3"]).items()]
            ids = sorted(r[0] for r in results)
            assert ids == ["1", "2", "3"], f"results of ids {ids}, not 1 2 3: {results}"
            self._check_probe_results(results)

    def test_declared_result_shapes(self) -> None:
        """Each request of ``command_requests`` is answered with the fields its command
        declares: ``result_fields`` (or ``error_fields`` for an error result) after the
        request id of an asynchronous command; ``result_fields`` on a synchronous one's
        ``S`` line."""
        import pytest

        if not self.command_requests:
            pytest.skip("no command_requests configured")
        declared = self.declarations()
        with self.client() as c:
            for name, template in self.command_requests.items():
                cmd = declared.get(name.upper())
                if cmd is None:
                    assert not self.backend, f"{name}: not a command of backend {self.backend}"
                    continue
                if cmd.asynchronous:
                    rid = c.reqid()
                    request = split(template.format(reqid=rid))
                    self._accepted(c, request)
                    fields = c.wait_results([rid])[rid]
                    shapes = [cmd.result_fields, cmd.error_fields]
                    what = "result"
                else:
                    request = split(template)
                    reply = c.command(*request)
                    if reply[:1] != ["S"]:
                        continue
                    fields, shapes, what = reply[1:], [cmd.result_fields], "S line"
                counts = [shape_count(s) for s in shapes if s is not None]
                assert not counts or len(fields) in counts, (
                    f"{join(request)}: {what} of {len(fields)} field(s) {fields!r}, where"
                    f" {cmd.name} declares {' or '.join(map(str, counts))}"
                )

    def _collect(self, c: _LineClient, ids: Sequence[str]) -> dict[str, list[str]]:
        for rid in ids:
            self._accepted(c, self._probe(c, rid))
        return c.wait_results(ids)

    order_ids = ("20", "5", "30", "10")
    """Queued in this order: neither ascending nor descending, by number or as text."""
    order_attempts = 3

    def test_async_results_in_order(self) -> None:
        """RESULTS lists results in the order they were queued, not by request id.

        Probes go out one at a time with ids in no sorted order, each given
        ``probe_settle_s`` to finish before the next, so the queue order is known: a server
        that sorts its results (by id, either way) fails. Results collected over several
        RESULTS keep order. A machine too loaded for a probe to finish in time can reorder
        one round: a round in order within ``order_attempts`` passes; a server that sorts
        never gives one.
        """
        ids = list(self.order_ids)
        rounds: list[list[str]] = []
        with self.client() as c:
            for _ in range(self.order_attempts):
                for rid in ids:
                    self._accepted(c, self._probe(c, rid))
                    time.sleep(self.probe_settle_s)
                got: list[list[str]] = []
                deadline = time.monotonic() + 30
                while len(got) < len(ids) and time.monotonic() < deadline:
                    got += c.results()
                    time.sleep(0.02)
                self._check_probe_results(got)
                rounds.append([f[0] for f in got])
                if rounds[-1] == ids:
                    return
        raise AssertionError(f"results in the order {rounds}, queued in the order {ids}")

    def test_burst_of_probes_is_answered_at_once(self) -> None:
        """``burst_size`` probes written at once get their ``S`` lines within
        ``burst_bound_s``: a handler that holds the event loop (a blocking call in an
        ``async def``) delays every ``S`` behind it, and fails."""
        with self.client() as c:
            ids = [str(i) for i in range(1, self.burst_size + 1)]
            probes = [self._probe(c, rid) for rid in ids]
            sent = time.monotonic()
            c.send_raw(b"".join(join(p).encode() + c.eol for p in probes))
            replies: list[str] = []
            while len(replies) < len(ids):
                left = sent + self.burst_bound_s - time.monotonic()
                try:
                    replies.append(c.read_line(timeout=max(0.01, left)).rstrip("\r"))
                except GahpTimeout:
                    raise AssertionError(
                        f"{len(replies)} of {len(ids)} probes answered within"
                        f" {self.burst_bound_s:g} s of a burst: does a handler block the"
                        " event loop (time.sleep or blocking I/O in an async def)?"
                    ) from None
            assert replies == ["S"] * len(ids), f"a burst of probes answered {replies}"
            results = c.wait_results(ids, timeout=max(30.0, self.burst_bound_s))
            self._check_probe_results([[rid, *results[rid]] for rid in ids])

    def test_async_mode_single_r(self) -> None:
        """In asynchronous mode one ``R`` tells of results, however many land, until the
        client sends ``RESULTS``; none after ``ASYNC_MODE_OFF``.

        An ``R`` read before the reply to a ``RESULTS`` is one too many: every result that
        ``RESULTS`` lists had landed when it was asked for, so no wait is needed to see it.
        """
        with self.client() as c:
            c.keep_r = True
            reply = c.command("ASYNC_MODE_ON")
            assert reply == ["S"], f"ASYNC_MODE_ON answered {reply!r}"
            for rid in ("1", "2", "3"):
                c.send(*self._probe(c, rid))
            lines: list[str] = []
            while lines.count("S") < 3 or "R" not in lines:
                lines.append(c.read_line(timeout=30).rstrip("\r"))
            assert lines.count("R") == 1, f"{lines}: not one R before RESULTS"
            results: list[list[str]] = []
            while True:  # RESULTS after each R, as HTCondor does, until all three are in
                c.send("RESULTS")
                head = c.read_line().rstrip("\r")
                assert head.startswith("S "), f"{head!r}: an R before the RESULTS reply"
                results += [c.read_fields() for _ in range(int(head[2:]))]
                if len(results) == 3:
                    break
                line = c.read_fields(timeout=30)
                assert line == ["R"], f"{line!r} where one R was due (results so far {results})"
            ids = sorted(r[0] for r in results)
            assert ids == ["1", "2", "3"], f"results of ids {ids}, not 1 2 3: {results}"
            self._check_probe_results(results)
            reply = c.command("ASYNC_MODE_OFF")
            assert reply == ["S"], f"ASYNC_MODE_OFF answered {reply!r}"
            c.send(*self._probe(c, "4"))
            line = c.read_fields()
            assert line == ["S"], f"a probe after ASYNC_MODE_OFF: {line!r} (an R?), not S"
            c.wait_results(["4"])  # and no R in between (read_line would have returned it)

    def test_prefix_applies_to_r_and_results(self) -> None:
        with self.client() as c:
            c.keep_r = True
            c.set_prefix("GAHP:")
            reply = c.command("ASYNC_MODE_ON")
            assert reply == ["S"], f"ASYNC_MODE_ON answered {reply!r}"
            c.send(*self._probe(c, "7"))
            lines = sorted(c.read_line(timeout=30).rstrip("\r") for _ in range(2))
            assert lines == ["R", "S"], f"after a probe in async mode: {lines}, not S and R"
            results = c.results()
            assert results[:1] and results[0][0] == "7", f"RESULTS listed {results}, not 7"

    def test_quit_exits_promptly(self) -> None:
        """After QUIT's ``S`` the server exits with status 0 within ``exit_bound_s``, a
        request pending or not."""
        with self.client() as c:
            if self.async_probe:
                self._accepted(c, self._probe(c, "9"))
            sent = time.monotonic()
            reply = c.command("QUIT")
            assert reply == ["S"], f"QUIT answered {reply!r}"
            code = self._wait_exit(c, sent, "QUIT")
            assert code == 0, f"exit status {code} after QUIT"

    def test_stdin_eof_exits_promptly(self) -> None:
        """At the end of its input the server exits with status 0 within ``exit_bound_s``."""
        with self.client() as c:
            closed = time.monotonic()
            c.close_input()
            code = self._wait_exit(c, closed, "the end of its input")
            assert code == 0, f"exit status {code} at the end of its input"
