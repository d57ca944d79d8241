"""A GAHP client over pipes, and a conformance suite any backend can run against itself.

Use the suite by subclassing :class:`GahpConformance` in a pytest module::

    class TestMyGahp(GahpConformance):
        server_command = ["my-gahp"]
        async_probe = "MY_PING {reqid}"   # any async command that answers quickly
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from gahp_core._errors import GahpError
from gahp_core._escaping import join, split
from gahp_core._protocol import Version, parse_banner


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


class GahpClient:
    """Spawn a GAHP server and talk to it over its stdin/stdout, as HTCondor does.

    A reader thread collects stdout lines so reads can time out; ``R`` notifications are
    counted apart (``notifications``) unless ``keep_r`` is set.
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
        self.prefix = ""
        self.keep_r = keep_r
        self.eol = b"\r\n" if crlf else b"\n"
        self.notifications = 0
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr_chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self._stderr_reader: threading.Thread | None = None
        if self.proc.stderr is not None:
            self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
            self._stderr_reader.start()
        self._next_reqid = 1
        self.banner = self.read_line(timeout=20)

    # ---- low level ------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        while True:
            try:
                chunk = self.proc.stdout.read(65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            buf += chunk
            while True:
                lf = _unescaped_lf(buf)
                if lf < 0:
                    break
                self._lines.put(buf[:lf])
                buf = buf[lf + 1 :]
        if buf:
            self._lines.put(buf)
        self._lines.put(None)

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

    @property
    def stderr_text(self) -> str:
        """Everything the server wrote on stderr so far (all of it after :meth:`close`)."""
        return b"".join(self._stderr_chunks).decode("utf-8", "replace")

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the server's stdin as they are."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, *args: str) -> None:
        """Send one request line: the arguments escaped and joined, CRLF-terminated."""
        self.send_raw(join(args).encode("utf-8", "surrogateescape") + self.eol)

    def read_raw(self, timeout: float = 10.0) -> str:
        """The next stdout line as text (terminator removed), ``R`` lines included."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise GahpTimeout(f"no line from the server within {timeout} s") from None
        if line is None:
            self._lines.put(None)
            raise EOFError("the server closed its stdout")
        return line.decode("utf-8", "surrogateescape")

    def read_line(self, timeout: float = 10.0) -> str:
        """The next line with the expected prefix removed; ``R`` lines are counted, skipped."""
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
        """Send QUIT, expect ``S``, and wait for the process to exit."""
        ret = self.command("QUIT")
        if not ret or ret[0] != "S":
            raise AssertionError(f"QUIT answered {ret!r}")
        return self.proc.wait(timeout)

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

    def __enter__(self) -> GahpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    """Protocol conformance tests; subclass with ``server_command`` set (pytest collects it).

    ``async_probe`` is an asynchronous command line with ``{reqid}`` where the id goes,
    answering quickly (within ``probe_settle_s``) whatever the backend's state (e.g. a
    ping); without it the asynchronous checks are skipped. ``probe_result_fields`` is how
    many fields its result line has after the request id: every probe result the kit reads
    must have that many (without it, they must all have the same number, at least one).
    ``server_env`` adds environment variables.
    """

    server_command: Sequence[str] = ()
    server_env: Mapping[str, str] | None = None
    async_probe: str | None = None
    probe_result_fields: int | None = None
    """The field count of the probe's result line, request id excluded."""
    required_commands: Sequence[str] = ("COMMANDS", "QUIT", "RESULTS", "VERSION")
    probe_settle_s: float = 0.5
    """How long one ``async_probe`` may take to produce its result."""
    exit_bound_s: float = 10.0
    """How long the server may take to exit after ``QUIT`` or the end of its input: generous,
    for a loaded machine; a server that does not stop at all fails."""

    def client(self) -> GahpClient:
        if not self.server_command:
            raise AssertionError("set server_command on the conformance class")
        return GahpClient(self.server_command, env=self.server_env)

    def _probe(self, c: GahpClient, reqid: str) -> list[str]:
        import pytest

        if not self.async_probe:
            pytest.skip("no async_probe command configured")
        return split(self.async_probe.format(reqid=reqid))

    def _check_probe_results(self, results: Sequence[Sequence[str]]) -> None:
        """Each probe result line (request id first) has the declared field count."""
        counts = {len(r) - 1 for r in results}
        if self.probe_result_fields is not None:
            want = self.probe_result_fields
            bad = [list(r) for r in results if len(r) - 1 != want]
            assert not bad, f"probe results without {want} field(s) after the id: {bad}"
        else:
            assert len(counts) <= 1, f"probe results of different field counts: {results}"
            assert 0 not in counts, f"a probe result with no field after the id: {results}"

    def _wait_exit(self, c: GahpClient, since: float, after: str) -> int:
        """The exit code, once the server has exited; fail if it runs ``exit_bound_s`` on."""
        try:
            code = c.proc.wait(max(0.0, since + self.exit_bound_s - time.monotonic()))
        except subprocess.TimeoutExpired:
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
            assert c.banner.startswith("$GahpVersion: ")
            assert len(c.banner) < 150
            assert c.version() is not None, c.banner
            assert c.command("VERSION") == ["S", *split(c.banner)]

    def test_commands_lists_required(self) -> None:
        with self.client() as c:
            reply = c.command("COMMANDS")
            assert reply[0] == "S"
            for name in self.required_commands:
                assert name in reply[1:]

    def test_case_insensitive_command_codes(self) -> None:
        with self.client() as c:
            assert c.command("commands")[0] == "S"
            assert c.command("ReSuLtS") == ["S", "0"]

    def test_errors_keep_the_server_running(self) -> None:
        with self.client() as c:
            assert c.command("NO_SUCH_COMMAND_XYZ")[0] == "E"
            assert c.command("RESULTS", "extra")[0] == "E"
            assert c.command("RESPONSE_PREFIX")[0] == "E"
            c.send_raw(b"\r\n")
            assert c.read_fields()[0] == "E"
            assert c.command("COMMANDS")[0] == "S"

    def test_bad_request_ids(self) -> None:
        with self.client() as c:
            probe = self._probe(c, "1")
            for bad in ("0", "abc", ""):
                assert c.command(probe[0], bad, *probe[2:])[0] == "E"
            assert c.command(probe[0])[0] == "E"
            assert c.command("RESULTS") == ["S", "0"]

    def test_response_prefix(self) -> None:
        with self.client() as c:
            assert c.command("RESPONSE_PREFIX", "GAHP:") == ["S"]
            c.prefix = "GAHP:"
            assert c.command("RESULTS") == ["S", "0"]
            assert c.command("RESPONSE_PREFIX", "NEW_") == ["S"]
            c.prefix = "NEW_"
            assert c.command("RESULTS") == ["S", "0"]

    def test_probe_result_field_count(self) -> None:
        """The probe's result line has its declared field count, one at a time and several
        in one ``RESULTS``."""
        with self.client() as c:
            results = [[rid, *fields] for rid, fields in self._collect(c, ["1"]).items()]
            results += [[rid, *fields] for rid, fields in self._collect(c, ["2", "3"]).items()]
            assert sorted(r[0] for r in results) == ["1", "2", "3"], results
            self._check_probe_results(results)

    def _collect(self, c: GahpClient, ids: Sequence[str]) -> dict[str, list[str]]:
        for rid in ids:
            assert c.command(*self._probe(c, rid)) == ["S"]
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
                    assert c.command(*self._probe(c, rid)) == ["S"]
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

    def test_async_mode_single_r(self) -> None:
        """In asynchronous mode one ``R`` tells of results, however many land, until the
        client sends ``RESULTS``; none after ``ASYNC_MODE_OFF``.

        An ``R`` read before the reply to a ``RESULTS`` is one too many: every result that
        ``RESULTS`` lists had landed when it was asked for, so no wait is needed to see it.
        """
        with self.client() as c:
            c.keep_r = True
            assert c.command("ASYNC_MODE_ON") == ["S"]
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
                assert c.read_fields(timeout=30) == ["R"], results  # the rest land: one R
            assert sorted(r[0] for r in results) == ["1", "2", "3"]
            self._check_probe_results(results)
            assert c.command("ASYNC_MODE_OFF") == ["S"]
            c.send(*self._probe(c, "4"))
            assert c.read_fields() == ["S"]
            c.wait_results(["4"])  # and no R in between (read_line would have returned it)

    def test_prefix_applies_to_r_and_results(self) -> None:
        with self.client() as c:
            c.keep_r = True
            c.set_prefix("GAHP:")
            assert c.command("ASYNC_MODE_ON") == ["S"]
            c.send(*self._probe(c, "7"))
            lines = [c.read_line(timeout=30).rstrip("\r") for _ in range(2)]
            assert sorted(lines) == ["R", "S"]
            assert c.results()[0][0] == "7"

    def test_quit_exits_promptly(self) -> None:
        """After QUIT's ``S`` the server exits with status 0 within ``exit_bound_s``, a
        request pending or not."""
        c = self.client()
        try:
            if self.async_probe:
                assert c.command(*self._probe(c, "9")) == ["S"]
            sent = time.monotonic()
            assert c.command("QUIT") == ["S"]
            code = self._wait_exit(c, sent, "QUIT")
            assert code == 0, f"exit status {code} after QUIT"
        finally:
            c.close()

    def test_stdin_eof_exits_promptly(self) -> None:
        """At the end of its input the server exits with status 0 within ``exit_bound_s``."""
        c = self.client()
        try:
            assert c.proc.stdin is not None
            closed = time.monotonic()
            c.proc.stdin.close()
            code = self._wait_exit(c, closed, "the end of its input")
            assert code == 0, f"exit status {code} at the end of its input"
        finally:
            c.close()
