from hypothesis import given
from hypothesis import strategies as st

from gahp_ninfg.protocol import NinfgFramer, Request, format_line, parse_request, reply


def test_line_ends_lf_cr_crlf_even_split_across_chunks():
    f = NinfgFramer()
    out = f.feed(b"A 1\r") + f.feed(b"\nB 2\rC 3\nD")
    assert out == [b"A 1", b"B 2", b"C 3"]
    assert f.finish() == [b"D"]


def test_job_create_block_is_one_request():
    f = NinfgFramer()
    out = f.feed(b"JOB_CREATE 7\r\nargument a b\r\nenvironment X=1\r\nJOB_CREATE_END\r\nEXIT\r\n")
    assert len(out) == 2
    req = parse_request(out[0])
    assert req == Request("JOB_CREATE", ("7",), (("argument", "a b"), ("environment", "X=1")))
    assert parse_request(out[1]) == Request("EXIT", ())
    assert parse_request(b"  ") is None


def test_overlong_line_and_block_are_reported_once():
    f = NinfgFramer(max_bytes=50)
    assert f.feed(b"X" * 80) == []
    assert f.feed(b"\r\nEXIT\r\n") == [None, b"EXIT"]
    block = b"JOB_CREATE 1\r\n" + b"argument aaaaaaaaaa\r\n" * 10 + b"JOB_CREATE_END\r\n"
    out = f.feed(block + b"EXIT\n")
    assert out == [None, b"EXIT"]


def test_formatting_is_crlf_and_single_line():
    assert reply(True) == "S\r\n"
    assert reply(False, ("bad thing",)) == "F bad thing\r\n"
    assert format_line(("STATUS_NOTIFY", "j1", "DONE", "a\nb")) == "STATUS_NOTIFY j1 DONE a b\r\n"


@given(st.binary(), st.lists(st.integers(1, 9), max_size=12))
def test_framer_never_raises_and_chunking_does_not_matter(data, cuts):
    whole = NinfgFramer(max_bytes=64)
    expected = whole.feed(data) + whole.finish()
    parts = NinfgFramer(max_bytes=64)
    got, pos = [], 0
    for cut in cuts:
        got += parts.feed(data[pos : pos + cut])
        pos += cut
    got += parts.feed(data[pos:]) + parts.finish()
    if len(data) <= 64:  # overflow points may differ with chunking only past the limit
        assert got == expected
    for item in got:
        if item is not None:
            parse_request(item)
