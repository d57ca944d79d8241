"""The GAHP protocol rules, checked in process against the sans-IO connection."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gahp_core import (
    ERROR,
    FAILURE,
    PROTOCOL_COMMANDS,
    SUCCESS,
    Closed,
    GahpConnection,
    ProtocolMisuse,
    Request,
    join,
)

BANNER = "$GahpVersion: 1.0.0 Jan 1 2026 Test\\ GAHP $"


def connection(max_line: int = 1024) -> GahpConnection:
    conn = GahpConnection(BANNER, max_line)
    conn.start()
    assert conn.data_to_send() == BANNER.encode() + b"\n"
    return conn


def feed(conn: GahpConnection, data: bytes) -> list:
    """Feed ``data``; answer each request with ``S``; return every event in order."""
    conn.receive_data(data)
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
        if isinstance(event, Closed):
            break
        conn.accept()
    return events


def lines(conn: GahpConnection) -> list[bytes]:
    return conn.data_to_send().splitlines()


def test_requests_are_split_and_unescaped():
    conn = connection()
    events = feed(conn, b"echo 1 a\\ b back\\\\slash  end\r\nHELLO\n")
    assert events == [
        Request("ECHO", ("1", "a b", "back\\slash", "", "end")),
        Request("HELLO", ()),
    ]
    assert lines(conn) == [b"S", b"S"]


def test_a_line_split_across_chunks_is_one_request():
    conn = connection()
    assert feed(conn, b"ECH") == []
    assert feed(conn, b"O 7 x") == []
    assert feed(conn, b"\\") == []  # an escape at a chunk's end...
    assert feed(conn, b"\ny\r") == []  # ...makes the next LF part of the argument
    assert feed(conn, b"\n") == [Request("ECHO", ("7", "x\ny"))]
    assert conn.data_to_send() == b"S\n"


def test_empty_and_over_long_lines_get_an_e_line_and_the_rest_goes_on():
    conn = connection(max_line=16)
    events = feed(conn, b"\r\n" + b"X" * 40 + b"\nPING\n")
    assert events == [Request("PING", ())]
    assert lines(conn) == [b"E empty\\ request", b"E request\\ line\\ too\\ long", b"S"]


def test_over_long_line_in_pieces_gives_one_e():
    conn = connection(max_line=16)
    for _ in range(5):
        assert feed(conn, b"Y" * 10) == []
    assert feed(conn, b"\nPING\n") == [Request("PING", ())]
    assert lines(conn) == [b"E request\\ line\\ too\\ long", b"S"]


def test_undecodable_bytes_survive_the_round_trip():
    conn = connection()
    (event,) = feed(conn, b"ECHO 1 \xff\xfe\n")
    conn.queue_result(event.args[0], event.args[1:])
    feed(conn, b"RESULTS\n")
    assert lines(conn) == [b"S", b"S 1", b"1 \xff\xfe"]


def test_response_prefix_applies_after_its_own_reply():
    conn = connection()
    assert feed(conn, b"RESPONSE_PREFIX GAHP:\nPING\n") == [Request("PING", ())]
    assert lines(conn) == [b"S", b"GAHP:S"]
    feed(conn, b"RESPONSE_PREFIX NEW_\nRESPONSE_PREFIX\n")
    assert lines(conn) == [b"GAHP:S", b"NEW_E wrong\\ number\\ of\\ arguments"]


def test_prefix_applies_to_every_kind_of_line():
    conn = connection()
    feed(conn, b"RESPONSE_PREFIX P>\nASYNC_MODE_ON\n")
    conn.queue_result("1", ("NULL",))
    feed(conn, b"VERSION\n\nRESULTS\n")
    assert lines(conn) == [
        b"S",
        b"P>S",
        b"P>R",
        b"P>S " + BANNER.encode(),
        b"P>E empty\\ request",
        b"P>S 1",
        b"P>1 NULL",
    ]


def test_results_come_in_the_order_they_were_queued_and_once():
    conn = connection()
    for reqid in ("3", "1", "2"):
        conn.queue_result(reqid, ("NULL", f"r{reqid}"))
    assert conn.results_pending == 3
    feed(conn, b"RESULTS\n")
    assert lines(conn) == [b"S 3", b"3 NULL r3", b"1 NULL r1", b"2 NULL r2"]
    feed(conn, b"RESULTS\n")
    assert lines(conn) == [b"S 0"]


def test_result_fields_are_escaped_one_line_each():
    conn = connection()
    conn.queue_result("5", ("a b", "line\nbreak", ""))
    conn.queue_result("6", ())
    feed(conn, b"RESULTS\n")
    assert conn.data_to_send() == b"S 2\n5 a\\ b line\\\nbreak \n6\n"


def test_one_r_per_results_in_async_mode():
    conn = connection()
    conn.queue_result("1", ())  # queued before the mode: no R, now or later
    feed(conn, b"ASYNC_MODE_ON\n")
    assert lines(conn) == [b"S"]
    conn.queue_result("2", ())
    conn.queue_result("3", ())
    assert lines(conn) == [b"R"]
    feed(conn, b"RESULTS\n")
    assert lines(conn) == [b"S 3", b"1", b"2", b"3"]
    conn.queue_result("4", ())
    conn.queue_result("5", ())
    assert lines(conn) == [b"R"]
    feed(conn, b"ASYNC_MODE_OFF\nRESULTS\n")
    conn.queue_result("6", ())
    assert lines(conn) == [b"S", b"S 2", b"4", b"5"]


def test_r_comes_after_the_return_line_of_the_request_it_belongs_to():
    conn = connection()
    feed(conn, b"ASYNC_MODE_ON\n")
    conn.receive_data(b"ECHO 1\n")
    event = conn.next_event()
    conn.accept()
    conn.queue_result(event.args[0], ("NULL",))  # a handler that finished at once
    assert lines(conn) == [b"S", b"S", b"R"]


def test_version_quit_and_nothing_after_quit():
    conn = connection()
    events = feed(conn, b"version\nQUIT\nPING\n")
    assert events == [Closed(by_quit=True)]
    assert lines(conn) == [b"S " + BANNER.encode(), b"S"]
    assert conn.closed and conn.next_event() == Closed(by_quit=True)
    assert conn.data_to_send() == b""


def test_end_of_input_delivers_the_unterminated_last_line_then_closes():
    conn = connection()
    assert feed(conn, b"PING 1\nPING 2") == [Request("PING", ("1",))]
    assert feed(conn, b"") == [Request("PING", ("2",)), Closed(by_quit=False)]
    assert lines(conn) == [b"S", b"S"]


def test_blank_tail_at_end_of_input_is_ignored():
    conn = connection()
    assert feed(conn, b"PING\n  \r") == [Request("PING", ())]
    assert feed(conn, b"") == [Closed(by_quit=False)]
    assert lines(conn) == [b"S"]


def test_protocol_commands_check_their_arguments():
    conn = connection()
    feed(conn, b"RESULTS now\nASYNC_MODE_ON x\nQUIT please\nVERSION 2\n")
    assert lines(conn) == [b"E wrong\\ number\\ of\\ arguments"] * 4
    assert not conn.closed and not conn.async_mode


def test_protocol_commands_are_case_insensitive_and_never_events():
    conn = connection()
    assert feed(conn, b"results\nAsync_Mode_On\nresponse_prefix x\n") == []
    assert lines(conn) == [b"S 0", b"S", b"S"]
    assert conn.async_mode and conn.prefix == "x"
    assert set(PROTOCOL_COMMANDS) == {
        "ASYNC_MODE_OFF",
        "ASYNC_MODE_ON",
        "QUIT",
        "RESPONSE_PREFIX",
        "RESULTS",
        "VERSION",
    }


def test_reply_codes_and_fields():
    conn = connection()
    conn.receive_data(b"A\nB\nC\n")
    for code, fields in ((SUCCESS, ("x y",)), (ERROR, ()), (FAILURE, ("no",))):
        assert isinstance(conn.next_event(), Request)
        conn.reply(code, fields)
    assert lines(conn) == [b"S x\\ y", b"E", b"F no"]


def test_block_reply():
    conn = connection()
    conn.receive_data(b"LIST\n")
    conn.next_event()
    conn.reply_block(("2",), [("a", "b c"), ("d",)])
    assert lines(conn) == [b"S 2", b"a b\\ c", b"d"]


def test_exactly_one_reply_per_request():
    conn = connection()
    with pytest.raises(ProtocolMisuse):
        conn.accept()  # nothing to answer
    conn.receive_data(b"A\nB\n")
    conn.next_event()
    with pytest.raises(ProtocolMisuse):
        conn.next_event()  # A is not answered yet
    conn.reply(SUCCESS)
    with pytest.raises(ProtocolMisuse):
        conn.reply(SUCCESS)  # A answered twice
    assert conn.next_event() == Request("B", ())
    with pytest.raises(ValueError):
        conn.reply("X")


def test_replies_keep_request_order_around_bad_lines():
    conn = connection()
    conn.receive_data(b"A\n\nB\n")
    assert conn.next_event() == Request("A", ())
    conn.reply(FAILURE, ("a",))
    assert conn.next_event() == Request("B", ())  # the blank line is answered on the way
    conn.reply(SUCCESS, ("b",))
    assert lines(conn) == [b"F a", b"E empty\\ request", b"S b"]


ARGS = st.lists(st.text(alphabet="ab \\\r\n\u00e9", max_size=6), min_size=1, max_size=4)


def run_session(chunks: list[bytes]) -> tuple[list, bytes]:
    """Feed ``chunks``, then end the input; answer each request with its own fields."""
    conn = GahpConnection(BANNER)
    events = []
    for chunk in [*chunks, b""]:
        conn.receive_data(chunk)
        while (event := conn.next_event()) is not None:
            events.append(event)
            if isinstance(event, Closed):
                return events, conn.data_to_send()
            conn.reply(SUCCESS, event.args)
    raise AssertionError("the end of input did not close the connection")


@given(requests=st.lists(ARGS, max_size=6), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_any_split_of_the_input_gives_the_same_session(requests, cuts):
    stream = b"".join(
        ("CMD " + join(args) + ("\r\n" if i % 2 else "\n")).encode()
        for i, args in enumerate(requests)
    )
    bounds = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    whole = run_session([stream] if stream else [])
    assert run_session(chunks) == whole
    events, out = whole
    assert [e.args for e in events[:-1]] == [tuple(args) for args in requests]  # escaping
    assert events[-1] == Closed(by_quit=False)
    assert out == b"".join(("S " + join(args) + "\n").encode() for args in requests)


def test_protocol_commands_cannot_be_declared_by_a_backend():
    from gahp_core import Command, GahpDialect, GahpServer, Version

    server = GahpServer(Version("1.0.0", "test"), GahpDialect())
    server.add_commands([Command("PING", lambda args: (), asynchronous=False)])
    assert server.command_names() == sorted([*PROTOCOL_COMMANDS, "PING"])
    with pytest.raises(ValueError, match="RESULTS declared twice"):
        server.add_commands([Command("results", lambda args: (), asynchronous=False)])
