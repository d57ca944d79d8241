from hypothesis import given
from hypothesis import strategies as st

from gahp_core import LineSplitter, escape, join, split

args_strategy = st.lists(st.text(), min_size=1, max_size=8)


def test_split_plain_and_escaped():
    assert split("BOINC_PING 1") == ["BOINC_PING", "1"]
    assert split(r"A a\ b c\\d") == ["A", "a b", "c\\d"]
    assert split("A  B") == ["A", "", "B"]
    assert split("A B\r") == ["A", "B"]
    assert split("A\\\rB") == ["A\rB"]
    assert split("trailing\\") == ["trailing\\"]


def test_escape_specials():
    assert escape("a b\\c\r\nd") == "a\\ b\\\\c\\\r\\\nd"
    assert join(["x y", "z"]) == "x\\ y z"


@given(args_strategy)
def test_split_inverts_join(args):
    assert split(join(args)) == args


@given(st.text())
def test_split_never_raises_on_text(text):
    assert isinstance(split(text), list)


@given(st.binary())
def test_parser_never_raises_on_bytes(data):
    splitter = LineSplitter(max_line=256)
    for line in splitter.feed(data) + [splitter.pending()]:
        if line is not None:
            split(line.decode("utf-8", "surrogateescape"))


@given(args_strategy, st.lists(st.integers(min_value=1, max_value=7), max_size=20))
def test_framing_survives_any_chunking(args, cuts):
    wire = (join(args) + "\r\n").encode("utf-8", "surrogateescape") * 3
    splitter = LineSplitter()
    lines: list = []
    pos = 0
    for cut in cuts:
        lines += splitter.feed(wire[pos : pos + cut])
        pos += cut
    lines += splitter.feed(wire[pos:])
    assert len(lines) == 3
    for line in lines:
        assert split(line.decode("utf-8", "surrogateescape")) == args


def test_escaped_lf_does_not_end_the_line():
    s = LineSplitter()
    assert s.feed(b"ECHO 1 a\\\nb\n") == [b"ECHO 1 a\\\nb"]
    assert split("ECHO 1 a\\\nb") == ["ECHO", "1", "a\nb"]
    assert s.feed(b"X \\\\\nY\n") == [b"X \\\\", b"Y"]


def test_overlong_line_is_reported_once_and_dropped():
    s = LineSplitter(max_line=10)
    out = s.feed(b"A" * 25)
    out += s.feed(b"B" * 25 + b"\nOK\n")
    assert out == [None, b"OK"]
