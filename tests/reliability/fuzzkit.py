"""A protocol fuzzer for GAHP executables: random and adversarial request lines over pipes.

Every request line must get exactly one return line (``S``, ``E`` or ``F``), every accepted
asynchronous request exactly one result, the server must keep answering ``COMMANDS`` and its
memory must stay bounded. Used by tests/reliability/test_fuzz_servers.py (small, seeded) and
benchmarks/gahp_fuzz.py (large).
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import attrs

from gahp_core import (
    BadServerLine,
    GahpClient,
    GahpTimeout,
    escape,
    parse_results_head,
    split,
)
from gahp_core.testing import proc_status

RESULT_TIMEOUT = 60.0


@attrs.define
class FuzzReport:
    """What a fuzz run did and saw."""

    cases: int = 0
    accepted_async: int = 0
    returns: Counter[str] = attrs.Factory(Counter)
    results: int = 0
    peak_rss_kib: int = 0
    bytes_sent: int = 0
    problems: list[str] = attrs.Factory(list)


class RawGahp:
    """A GAHP process driven with raw bytes, through the public client (stderr discarded);
    every failure to read a line is an ``AssertionError``."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.client = GahpClient(argv, env=env, stderr=subprocess.DEVNULL, read_banner=False)
        self.proc = self.client.proc
        try:
            self.banner = self.line(20)
        except AssertionError:
            self.client.close()
            raise

    def send(self, data: bytes) -> None:
        self.client.send_raw(data)

    def line(self, timeout: float = 20.0) -> str:
        try:
            return self.client.read_raw(timeout).rstrip("\r")
        except GahpTimeout:
            raise AssertionError(f"no line from the server within {timeout} s") from None
        except EOFError:
            raise AssertionError(f"server exited (status {self.proc.poll()})") from None
        except BadServerLine as exc:
            raise AssertionError(str(exc)) from None

    def request(self, data: bytes, timeout: float = 20.0) -> list[str]:
        """Send one request line (terminator included); return its return line's fields."""
        self.send(data)
        return split(self.line(timeout))

    def results(self) -> list[list[str]]:
        head = self.request(b"RESULTS\r\n")
        return [split(self.line()) for _ in range(parse_results_head(head))]

    def close(self) -> None:
        self.client.close()


# ---- case generation -----------------------------------------------------------------------

NUMBERS = [
    "0",
    "1",
    "2",
    "-1",
    "-2147483649",
    "2147483648",
    "9223372036854775808",
    "1" * 400,
    "1e309",
    "-1e309",
    "nan",
    "inf",
    "0x10",
    "+3",
    "²",
    "٣",
    " 1",
    "1.5",
    "NULL",
    "",
]
WORDS = [
    "NULL",
    "ALL",
    "SOME",
    "fork",
    "slurm",
    "pbs",
    "/dev/null",
    "../../etc/passwd",
    "/tmp",
    "$(touch /tmp/gahp-fuzz-pwned)",
    "`id`",
    "a;b",
    '[ Cmd = "x" ]',
    "[",
    "]",
    "fork/20240101/abc",
    "slurm/20240101/1",
    "fork/2024/..",
    "é",
    "\udcff\udcfe",
    "\0",
    "a\0b",
    "\\",
    "x\r",
    "\r",
    "\t",
    "#",
    "b#1.0",
]


def _token(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.35:
        return rng.choice(NUMBERS)
    if pick < 0.7:
        return rng.choice(WORDS)
    if pick < 0.85:
        return "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x2FFF)]))
            for _ in range(rng.randrange(0, 12))
        ).replace("\n", "")
    return rng.choice(WORDS) * rng.randrange(1, 50)


def _raw_bytes(rng: random.Random, n: int) -> bytes:
    """Random bytes without a bare LF (it would make two requests of one)."""
    return bytes(
        rng.choice([rng.randrange(256), 0, 0x5C, 0x0D, 0x20, 0xFF]) for _ in range(n)
    ).replace(b"\n", b"n")


def _line(fields: Sequence[str]) -> bytes:
    return " ".join(escape(f) for f in fields).encode("utf-8", "surrogateescape") + b"\r\n"


@attrs.frozen
class Case:
    """One request line and what to expect of it."""

    data: bytes
    reqid: str | None = None
    """The id an asynchronous request carries, if it is a well-formed one."""
    command: str = ""
    note: str = ""


def _reqid(rng: random.Random, counter: list[int]) -> tuple[str, bool]:
    """A request id: usually fresh and valid, sometimes adversarial (valid or not)."""
    if rng.random() < 0.85:
        counter[0] += 1
        return str(counter[0]), True
    bad = rng.choice(["0", "-0", "", "abc", "²", "1e3", "+", "0" * 50, "\0", "1 2"])
    return bad, False


def generate(
    rng: random.Random,
    commands: Sequence[str],
    headers: Mapping[str, Callable[[random.Random], list[str]]],
    counter: list[int],
) -> Case:
    """A random request: a known command with adversarial arguments, or raw garbage."""
    kind = rng.random()
    if kind < 0.08:
        return Case(_raw_bytes(rng, rng.randrange(0, 200)) + b"\r\n", note="raw bytes")
    if kind < 0.12:
        return Case(b"\r\n" if rng.random() < 0.5 else b"   \r\n", note="blank")
    cmd = rng.choice(commands)
    rid, valid = _reqid(rng, counter)
    if cmd in headers and rng.random() < 0.7:
        args = headers[cmd](rng)
    else:
        args = [_token(rng) for _ in range(rng.randrange(0, 9))]
    name = cmd if rng.random() < 0.9 else cmd.lower()
    data = _line([name, rid, *args])
    if rng.random() < 0.1:  # lone CR and NUL bytes inside the line, invalid UTF-8 at the end
        data = data[:-2].replace(b" ", b" \r", 1) + b"\0\xc3\x28\xff\r\n"
    return Case(data, reqid=rid if valid else None, command=cmd)


def special_cases(commands: Sequence[str], counter: list[int], big: int) -> list[Case]:
    """Fixed adversarial lines: several MB, thousands of arguments, mismatched counts."""
    cases = []

    def add(cmd: str, args: list[str], note: str) -> None:
        counter[0] += 1
        rid = str(counter[0])
        cases.append(Case(_line([cmd, rid, *args]), reqid=rid, command=cmd, note=note))

    first = commands[0]
    add(first, ["x" * big], "one argument of several MB")
    add(first, ["a"] * 20000, "twenty thousand arguments")
    cases.append(Case(b"Z" * big + b"\r\n", note="several MB of garbage"))
    cases.append(Case(b"\0" * 4096 + b"\r\n", note="NUL bytes"))
    cases.append(Case(b"\xff\xfe\xc3" * 1000 + b"\r\n", note="invalid UTF-8"))
    cases.append(Case(b"COMMANDS\rRESULTS\r\r\n", note="lone CRs"))
    for rid in ("1" * 5000, "²", "-" + "9" * 30):
        ok = rid.lstrip("-").isascii()
        if ok:
            cases.append(Case(_line([first, rid]), reqid=rid, command=first, note="odd reqid"))
        else:
            cases.append(Case(_line([first, rid]), note="bad reqid"))
    return cases


def run_fuzz(
    argv: Sequence[str],
    commands: Sequence[str],
    headers: Mapping[str, Callable[[random.Random], list[str]]],
    *,
    cases: int,
    seed: int,
    env: Mapping[str, str] | None = None,
    setup: Sequence[bytes] = (),
    check_result: Callable[[str, list[str]], str | None] = lambda cmd, fields: None,
    big: int = 3 * 1024 * 1024,
    rss_every: int = 25,
) -> FuzzReport:
    """Run ``cases`` random requests (plus the special ones) against a fresh server."""
    rng = random.Random(seed)
    report = FuzzReport()
    gahp = RawGahp(argv, env)
    try:
        for line in setup:
            assert gahp.request(line)[0] == "S", line
        counter = [0]
        plan = special_cases(commands, counter, big) + [
            generate(rng, commands, headers, counter) for _ in range(cases)
        ]
        rng.shuffle(plan)
        pending: dict[str, str] = {}
        answered: Counter[str] = Counter()
        for i, case in enumerate(plan):
            ret = gahp.request(case.data)
            report.cases += 1
            report.bytes_sent += len(case.data)
            report.returns[ret[0]] += 1
            if ret[0] not in ("S", "E", "F"):
                what = case.note or case.command
                report.problems.append(f"bad return line {ret[:3]!r} for {what}")
            if ret[0] == "S" and case.reqid is not None:
                if case.reqid in pending:
                    report.problems.append(f"reqid {case.reqid[:20]} reused by the generator")
                pending[case.reqid] = case.command
                report.accepted_async += 1
            elif ret[0] == "S" and case.command:
                report.problems.append(f"{case.note or case.command} accepted with a bad reqid")
            if i % rss_every == 0:
                report.peak_rss_kib = max(report.peak_rss_kib, proc_status(gahp.proc.pid, "VmRSS"))
                if gahp.request(b"COMMANDS\r\n")[0] != "S":
                    report.problems.append("COMMANDS not answered with S")
        deadline = time.monotonic() + RESULT_TIMEOUT
        while set(pending) - set(answered) and time.monotonic() < deadline:
            for fields in gahp.results():
                rid = fields[0]
                answered[rid] += 1
                report.results += 1
                if rid not in pending:
                    report.problems.append(f"result for unknown reqid {rid[:20]!r}")
                    continue
                why = check_result(pending[rid], fields[1:])
                if why:
                    report.problems.append(f"{pending[rid]} {rid[:20]}: {why}")
            time.sleep(0.05)
        for rid in set(pending) - set(answered):
            report.problems.append(f"no result for {pending[rid]} {rid[:20]}")
        report.problems += [f"{n} results for {rid[:20]}" for rid, n in answered.items() if n > 1]
        commands_reply = gahp.request(b"COMMANDS\r\n")
        if commands_reply[0] != "S" or not set(commands) <= set(commands_reply):
            report.problems.append(f"COMMANDS after the run: {commands_reply[:4]!r}")
        report.peak_rss_kib = max(report.peak_rss_kib, proc_status(gahp.proc.pid, "VmHWM"))
    finally:
        gahp.close()
    return report


# ---- per-server header generators: counts that do not match the arguments ------------------


def _n(rng: random.Random) -> str:
    return rng.choice(["0", "1", "2", "3", "1000000", "99999999999999999999", "-1", "x", "²"])


def boinc_submit(rng: random.Random) -> list[str]:
    args = ["batch", "uppercase", _n(rng)]
    for _ in range(rng.randrange(0, 4)):
        args += [
            f"j{rng.randrange(9)}",
            _n(rng),
            *[_token(rng) for _ in range(rng.randrange(3))],
            _n(rng),
            *[_token(rng) for _ in range(rng.randrange(4))],
        ]
    if rng.random() < 0.5:
        args += [rng.choice(NUMBERS) for _ in range(rng.choice([5, 6, 7]))]
    return args


def boinc_query(rng: random.Random) -> list[str]:
    return [rng.choice(NUMBERS), _n(rng), *[f"b{i}" for i in range(rng.randrange(0, 4))]]


def boinc_fetch(rng: random.Random) -> list[str]:
    args = [
        "job",
        rng.choice(["/tmp", "NULL", "/nonexistent", ""]),
        "err.txt",
        rng.choice(["ALL", "SOME", "all", "NONE"]),
        _n(rng),
    ]
    return args + [_token(rng) for _ in range(rng.randrange(0, 6))]


BOINC_COMMANDS = [
    "BOINC_PING",
    "BOINC_SUBMIT",
    "BOINC_QUERY_BATCHES",
    "BOINC_FETCH_OUTPUT",
    "BOINC_ABORT_JOBS",
    "BOINC_RETIRE_BATCH",
    "BOINC_SET_LEASE",
]


def tokens(n: int) -> Callable[[random.Random], list[str]]:
    """A generator of ``n`` adversarial arguments (the right count for a command)."""
    return lambda rng: [_token(rng) for _ in range(n)]


BOINC_HEADERS = {
    "BOINC_SUBMIT": boinc_submit,
    "BOINC_QUERY_BATCHES": boinc_query,
    "BOINC_FETCH_OUTPUT": boinc_fetch,
    "BOINC_PING": tokens(0),
    "BOINC_ABORT_JOBS": tokens(3),
    "BOINC_RETIRE_BATCH": tokens(1),
    "BOINC_SET_LEASE": lambda rng: [_token(rng), rng.choice(NUMBERS)],
}


def boinc_check(cmd: str, fields: list[str]) -> str | None:
    """Every accepted BOINC request in the fuzz must fail, with one readable message."""
    if not fields or fields[0] == "NULL":
        return f"expected an error result, got {fields[:3]!r}"
    if len(fields) != 1:
        return f"error result with {len(fields)} fields"
    return None


BLAH_COMMANDS = [
    "BLAH_JOB_SUBMIT",
    "BLAH_JOB_STATUS",
    "BLAH_JOB_CANCEL",
    "BLAH_JOB_HOLD",
    "BLAH_JOB_RESUME",
    "BLAH_JOB_REFRESH_PROXY",
    "BLAH_PING",
]
BLAH_FIELDS = {"BLAH_JOB_SUBMIT": 3, "BLAH_JOB_STATUS": 4}


def blah_ad(rng: random.Random) -> list[str]:
    vals = [
        '"$(touch /tmp/gahp-fuzz-pwned)"',
        '"`id`"',
        "1e400",
        "undefined",
        '"fork"',
        "-1",
        '"a;b"',
        "{}",
        '"' + "x" * 1000 + '"',
    ]
    attrs_ = ["Cmd", "Args", "Env", "In", "Iwd", "gridtype", "RequestMemory", "NodeNumber"]
    body = "; ".join(f"{rng.choice(attrs_)} = {rng.choice(vals)}" for _ in range(rng.randrange(6)))
    return [f"[ {body} ]"]


BLAH_HEADERS = {
    "BLAH_JOB_SUBMIT": blah_ad,
    "BLAH_JOB_STATUS": tokens(1),
    "BLAH_JOB_CANCEL": tokens(1),
    "BLAH_JOB_HOLD": tokens(1),
    "BLAH_JOB_RESUME": tokens(1),
    "BLAH_JOB_REFRESH_PROXY": tokens(2),
    "BLAH_PING": tokens(1),
}


def blah_check(cmd: str, fields: list[str]) -> str | None:
    """Field counts HTCondor checks; a submission that passes makes a fork job id."""
    want = BLAH_FIELDS.get(cmd, 2)
    if len(fields) != want:
        return f"{len(fields)} result fields, {want} expected: {fields[:4]!r}"
    if fields[0] not in ("0", "1"):
        return f"rc {fields[0]!r}"
    if cmd == "BLAH_JOB_SUBMIT" and fields[0] == "0" and not fields[2].startswith("fork/"):
        return f"unexpected job id {fields[2]!r}"
    return None
