"""A conformance suite any backend can run against itself, and helpers for tests.

Use the suite by subclassing :class:`GahpConformance` in a pytest module::

    class TestMyGahp(GahpConformance):
        server_command = ["my-gahp"]
        async_probe = "MY_PING {reqid}"   # any async command that answers quickly

:class:`GahpClient` (spawns a server and speaks to it over pipes, as HTCondor does) and
:class:`InProcessClient` (the same API, the backend in the test's process) are those of
:mod:`gahp_core`, importable here too (as they were before they moved there).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from gahp_core._client import GahpClient, GahpTimeout, InProcessClient, LineClient
from gahp_core._commands import shape_count
from gahp_core._escaping import join, split

__all__ = [
    "GahpConformance",
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

    def _probe(self, c: LineClient, reqid: str) -> list[str]:
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

    def _accepted(self, c: LineClient, request: Sequence[str]) -> None:
        reply = c.command(*request)
        assert reply == ["S"], f"{join(request)}: answered {reply!r}, not S"

    def _wait_exit(self, c: LineClient, since: float, after: str) -> int:
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

    def _collect(self, c: LineClient, ids: Sequence[str]) -> dict[str, list[str]]:
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
            results = self._results_after_each_r(c, 3)
            ids = sorted(r[0] for r in results)
            assert ids == ["1", "2", "3"], f"results of ids {ids}, not 1 2 3: {results}"
            self._check_probe_results(results)
            reply = c.command("ASYNC_MODE_OFF")
            assert reply == ["S"], f"ASYNC_MODE_OFF answered {reply!r}"
            c.send(*self._probe(c, "4"))
            line = c.read_fields()
            assert line == ["S"], f"a probe after ASYNC_MODE_OFF: {line!r} (an R?), not S"
            c.wait_results(["4"])  # and no R in between (read_line would have returned it)

    @staticmethod
    def _results_after_each_r(c: GahpClient | InProcessClient, count: int) -> list[list[str]]:
        """``RESULTS`` after each ``R``, as HTCondor does, until ``count`` results are in;
        one ``R`` due between two replies, none before a reply."""
        results: list[list[str]] = []
        while True:
            c.send("RESULTS")
            head = c.read_line().rstrip("\r")
            assert head.startswith("S "), f"{head!r}: an R before the RESULTS reply"
            results += [c.read_fields() for _ in range(int(head[2:]))]
            if len(results) == count:
                return results
            line = c.read_fields(timeout=30)
            assert line == ["R"], f"{line!r} where one R was due (results so far {results})"

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
