"""Property-based fuzzing of the pure parsers: framing, escaping, request lines, ClassAds.

Complements tests/gahp_core/test_escaping.py (round trip, plain chunking) with escapes cut
across chunk boundaries, over-long lines mixed with good ones, request ids, and the BLAH
submit ClassAd path, which must never raise anything but its own errors.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gahp_blah.arguments import SyntaxProblem, parse_env_v1, parse_env_v2, split_v1, split_v2
from gahp_blah.submit_ad import SubmitError, parse_submit_ad
from gahp_core import LineSplitter, escape, join, parse_reqid, parse_request, split

FUZZ = settings(max_examples=300, deadline=None, derandomize=True)

# Text that stresses the escaping: the four specials, NUL, non-ASCII and lone surrogates
# (what surrogateescape turns invalid UTF-8 into).
nasty_chars = st.sampled_from([" ", "\\", "\r", "\n", "\0", "é", "\udcff", "a", "\t", "$"])
nasty_text = st.lists(nasty_chars | st.characters(blacklist_categories=("Cs",)), max_size=30).map(
    "".join
)
args_strategy = st.lists(nasty_text, min_size=1, max_size=12)


def _feed(splitter: LineSplitter, wire: bytes, cuts: list[int]) -> list[bytes | None]:
    out: list[bytes | None] = []
    pos = 0
    for cut in cuts:
        out += splitter.feed(wire[pos : pos + cut])
        pos += cut
    out += splitter.feed(wire[pos:])
    return out


@FUZZ
@given(st.lists(args_strategy, min_size=1, max_size=5), st.lists(st.integers(1, 5), max_size=60))
def test_chunking_never_splits_an_escape(lines: list[list[str]], cuts: list[int]) -> None:
    """Escaped LFs and backslash runs cut at every possible byte still frame identically."""
    wire = b"".join((join(a) + "\r\n").encode("utf-8", "surrogateescape") for a in lines)
    got = _feed(LineSplitter(), wire, cuts)
    assert [split(g.decode("utf-8", "surrogateescape")) for g in got if g is not None] == lines
    assert None not in got


@FUZZ
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 40)), min_size=1, max_size=12),
    st.lists(st.integers(1, 17), max_size=40),
)
def test_overlong_lines_are_dropped_one_for_one(
    plan: list[tuple[bool, int]], cuts: list[int]
) -> None:
    """Each over-long line gives exactly one None, every other line survives intact."""
    limit = 32
    lines = []
    for long, n in plan:
        body = "x\\ " * (limit + n) if long else "ok\\\\" + "y" * min(n, 20)
        lines.append(body.encode())
    wire = b"".join(line + b"\n" for line in lines)
    got = _feed(LineSplitter(max_line=limit), wire, cuts)
    assert len(got) == len(lines)
    for line, out in zip(lines, got, strict=True):
        assert out == (None if len(line) > limit else line)


@FUZZ
@given(st.binary(max_size=400), st.lists(st.integers(1, 64), max_size=20))
def test_splitter_memory_stays_bounded(data: bytes, cuts: list[int]) -> None:
    """Whatever arrives, the buffer never holds much more than max_line bytes."""
    s = LineSplitter(max_line=50)
    pos = 0
    for cut in [*cuts, len(data)]:
        s.feed(data[pos : pos + cut])
        pos += cut
        assert len(s.pending()) <= 50 + 64


@FUZZ
@given(nasty_text)
def test_escape_output_has_no_bare_specials(arg: str) -> None:
    """An escaped argument never contains an unescaped space, CR or LF."""
    esc = escape(arg)
    i = 0
    while i < len(esc):
        if esc[i] == "\\":
            i += 2
            continue
        assert esc[i] not in " \r\n"
        i += 1
    assert split(esc) == [arg]


@FUZZ
@given(st.text(max_size=60) | st.from_regex(r"\A[+-]?[0-9]{0,5000}\Z"))
def test_parse_reqid_never_raises(text: str) -> None:
    """Request ids: any text is either accepted as sent or refused (None), never an exception."""
    got = parse_reqid(text)
    if got is not None:
        t = text.strip().lstrip("+-")
        assert got == text and t.isascii() and t.isdigit() and t.strip("0")


@pytest.mark.parametrize(
    "text,ok",
    [
        ("1", True),
        ("+7", True),
        ("-3", True),
        ("007", True),
        ("0", False),
        ("-0", False),
        ("+", False),
        ("", False),
        ("²", False),
        ("١", False),
        ("1" * 5000, True),
        ("1e3", False),
    ],
)
def test_parse_reqid_edge_cases(text: str, ok: bool) -> None:
    assert (parse_reqid(text) is not None) is ok


@FUZZ
@given(st.text(max_size=200))
def test_parse_request_never_raises(line: str) -> None:
    req = parse_request(line)
    if req is not None:
        assert req.command == req.command.upper()


# ---- the ClassAd path of blahpd ----------------------------------------------------------------

ATTRS = [
    "Cmd",
    "Args",
    "Arguments",
    "Env",
    "Environment",
    "In",
    "Out",
    "Err",
    "Iwd",
    "gridtype",
    "TransferInput",
    "TransferOutput",
    "Queue",
    "RequestMemory",
    "NodeNumber",
    "SMPGranularity",
    "HostSMPSize",
    "BatchProject",
    "BatchRuntime",
    "x509UserProxy",
]
classad_values = st.one_of(
    st.text(max_size=40).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "undefined",
            "error",
            "true",
            "1e400",
            "-1e400",
            'real("NaN")',
            'real("INF")',
            "{1, 2}",
            "[a = 1]",
            "1/0",
            "x.y",
            '"/bin/true"',
            '"fork"',
            '"²"',
            "0",
            "-5",
        ]
    ),
)
classads = st.lists(st.tuples(st.sampled_from(ATTRS), classad_values), max_size=8).map(
    lambda kv: "[ " + "; ".join(f"{k} = {v}" for k, v in kv) + " ]"
)


@settings(FUZZ, suppress_health_check=[HealthCheck.too_slow])
@given(classads | st.text(max_size=200))
def test_parse_submit_ad_raises_only_submit_error(text: str) -> None:
    pytest.importorskip("classad2")
    try:
        ad = parse_submit_ad(text, default_gridtype="fork")
    except SubmitError as exc:
        assert str(exc)
    else:
        assert ad.spec.executable


@pytest.mark.parametrize(
    "attr",
    [
        "RequestMemory = 1e400",
        'RequestMemory = real("NaN")',
        'RequestMemory = "²"',
        "NodeNumber = -1e400",
        "BatchRuntime = 1e400",
    ],
)
def test_non_finite_and_unicode_numbers_are_submit_errors(attr: str) -> None:
    pytest.importorskip("classad2")
    with pytest.raises(SubmitError):
        parse_submit_ad(f'[ Cmd = "/bin/true"; gridtype = "fork"; {attr} ]')


@FUZZ
@given(nasty_text)
def test_argument_and_environment_syntaxes(text: str) -> None:
    for fn in (split_v1, split_v2, parse_env_v1, parse_env_v2):
        try:
            fn(text)
        except SyntaxProblem as exc:
            assert str(exc)


@FUZZ
@given(st.lists(st.text(max_size=10), max_size=6))
def test_v2_quoting_round_trip(args: list[str]) -> None:
    quoted = " ".join("'" + a.replace("'", "''") + "'" for a in args)
    assert split_v2(quoted) == args
