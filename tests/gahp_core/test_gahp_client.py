"""The GAHP client: its sans-IO protocol unit by unit, then over pipes, against scripted
servers and the real executables (boinc-gahp, blahpd)."""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest

from gahp_core import (
    BadServerLine,
    ClientConnection,
    GahpClient,
    GahpTimeout,
    LineSplitter,
    join,
    parse_results_head,
    split,
)
from gahp_core.testing import wait_for

# ---- ClientConnection: framing ----------------------------------------------------------


def lines_of(conn: ClientConnection) -> list[str]:
    out = []
    while (line := conn.next_raw()) is not None:
        out.append(line)
    return out


def test_a_line_ends_at_an_unescaped_lf_only():
    conn = ClientConnection()
    conn.receive_data(b"S a\\\nb\nS c\\\\\nS d")
    assert lines_of(conn) == ["S a\\\nb", "S c\\\\"]
    assert not conn.ended
    conn.receive_data(b"")
    assert lines_of(conn) == ["S d"] and conn.ended


@pytest.mark.parametrize("seed", range(20))
def test_any_chunking_frames_as_the_servers_splitter_does(seed):
    """The client's framing (a fast path for chunks without a backslash) gives the lines
    the server's own LineSplitter gives the whole stream, however the stream is cut."""
    rng = random.Random(seed)
    atoms = [b"S", b" ", b"x", b"\\", b"\\\\", b"\\\n", b"\n", b"\r\n", b"R\n", b"y" * 40]
    atoms += [b"\xc3\xa9", b"\xff"]  # UTF-8 (cut anywhere by a chunk) and a byte that is not
    stream = b"".join(rng.choice(atoms) for _ in range(400)) + b"\n"
    expected = [line for line in LineSplitter(64).feed(stream)]
    conn = ClientConnection(max_line=64)
    got: list[str | None] = []
    pos = 0
    while pos < len(stream):
        step = rng.randint(1, 30)
        conn.receive_data(stream[pos : pos + step])
        pos += step
        while True:
            try:
                line = conn.next_raw()
            except BadServerLine:
                got.append(None)
                continue
            if line is None:
                break
            got.append(line)
    assert got == [None if e is None else e.decode("utf-8", "surrogateescape") for e in expected]
    assert conn.buffered == 0


@pytest.mark.parametrize("data", ["S é ü\n1 ß\n", "S a\\ é\n1 \\\\\n"], ids=["plain", "escaped"])
def test_what_is_taken_leaves_the_backlog(data):
    """The backlog count (what bounds a reader) goes back to nothing once every line is
    taken, whatever the lines hold (here characters of two bytes)."""
    conn = ClientConnection()
    for _ in range(3):
        conn.receive_data(data.encode() + b"\xff\n")
        assert conn.buffered > 0
        assert len(conn.next_lines(10)) == 3
        assert conn.buffered == 0


@pytest.mark.parametrize("escape", [b"", b"\\\\"], ids=["plain", "escaped"])
def test_an_over_long_line_is_refused_and_the_next_ones_still_come(escape):
    conn = ClientConnection(max_line=10)
    conn.receive_data(b"S ok\n" + escape + b"x" * 11 + b"\nS after\n")
    assert conn.next_raw() == "S ok"
    with pytest.raises(BadServerLine, match="longer than 10 bytes"):
        conn.next_raw()
    assert conn.next_raw() == "S after"
    assert conn.buffered == 0


def test_an_over_long_line_across_chunks_is_dropped_not_kept():
    conn = ClientConnection(max_line=10)
    for _ in range(100):
        conn.receive_data(b"y" * 7)
        assert conn.next_raw() is None
    assert conn.buffered <= 10 + 7
    conn.receive_data(b"\nS next\n")
    with pytest.raises(BadServerLine):
        conn.next_raw()
    assert conn.next_raw() == "S next"
    assert conn.buffered == 0


# ---- ClientConnection: prefix, R, RESULTS -------------------------------------------------


def test_the_prefix_is_removed_and_a_line_without_it_refused():
    conn = ClientConnection()
    conn.prefix = "GAHP:"
    conn.receive_data(b"GAHP:S 1\nGAHP:R\nS\nGAHP:S 2\n")
    assert conn.next_line() == "S 1"
    with pytest.raises(BadServerLine, match="without prefix"):
        conn.next_line()
    assert conn.notifications == 1  # the R before it
    assert conn.next_line() == "S 2"
    conn.receive_data(b"GAHP:S 3\nS\nGAHP:S 4\n")
    assert conn.next_lines(10) == ["S 3"]
    with pytest.raises(BadServerLine):
        conn.next_lines(10)
    assert conn.next_lines(10) == ["S 4"]


def test_r_lines_are_counted_and_skipped_unless_kept():
    conn = ClientConnection()
    conn.receive_data(b"R\nS\nR\r\n1 NULL\n")
    assert conn.next_lines(10) == ["S", "1 NULL"]
    assert conn.notifications == 2
    conn = ClientConnection(keep_r=True)
    conn.receive_data(b"R\nS\n")
    assert conn.next_lines(10) == ["R", "S"] and conn.notifications == 0


def test_next_lines_gives_what_next_line_gives():
    data = b"S\nR\nS 2\n1 a\\ b\n2 c\nR\n"
    one = ClientConnection()
    one.receive_data(data)
    singly = []
    while (line := one.next_line()) is not None:
        singly.append(line)
    bulk = ClientConnection()
    bulk.receive_data(data)
    assert bulk.next_lines(2) + bulk.next_lines(100) == singly
    assert bulk.notifications == one.notifications == 2


def test_next_lines_stops_at_an_over_long_line():
    conn = ClientConnection(max_line=10)
    conn.receive_data(b"S 1\nS 2\n")
    conn.receive_data(b"x" * 20 + b"\nS 3\n")
    assert conn.next_lines(10) == ["S 1", "S 2"]  # what came before it is not lost
    with pytest.raises(BadServerLine):
        conn.next_lines(10)
    assert conn.next_lines(10) == ["S 3"]
    assert conn.buffered == 0


def test_a_request_is_escaped_and_terminated():
    assert ClientConnection().request(["ECHO", "1", "a b", "c\\d"]) == b"ECHO 1 a\\ b c\\\\d\r\n"
    assert ClientConnection(crlf=False).request(["QUIT"]) == b"QUIT\n"


@pytest.mark.parametrize(
    "fields", [["S"], ["E", "1"], ["S", "-1"], ["S", "1x"], ["S", "²"], ["S", "1" * 40]]
)
def test_a_bad_results_head_is_refused(fields):
    with pytest.raises(BadServerLine):
        parse_results_head(fields)


def test_a_results_head_is_bounded():
    assert parse_results_head(["S", "3"]) == 3
    assert parse_results_head(["S", "0"]) == 0
    with pytest.raises(BadServerLine, match="more than 5"):
        parse_results_head(["S", "6"], limit=5)


# ---- GahpClient over pipes ---------------------------------------------------------------


def scripted(body: str) -> list[str]:
    """A server: python running ``body`` with ``out`` (binary stdout) and ``err`` at hand."""
    head = "import sys, time\nout = sys.stdout.buffer\nerr = sys.stderr.buffer\n"
    return [sys.executable, "-c", head + body]


BANNER = "out.write(b'$GahpVersion: 1.0.0 Jan 1 2024 test $\\n'); out.flush()\n"


def test_stderr_is_kept_to_its_limit_and_given_line_by_line():
    seen: list[str] = []
    body = BANNER + "err.write(b'first\\n' + b'x' * 5000 + b'\\nlast\\n'); err.flush()\n"
    with GahpClient(scripted(body), on_stderr=seen.append, stderr_limit=100) as c:
        assert c.wait(10) == 0
    assert seen == ["first", "x" * 5000, "last"]
    text = c.stderr_text
    assert text.startswith("[... ") and "bytes of stderr dropped]" in text
    assert text.endswith("\n" + "x" * 94 + "\nlast\n")  # the last 100 bytes


def test_the_unread_backlog_is_bounded_and_nothing_is_lost():
    """With 64 KiB unread the client stops reading; the server, with 20 MiB to write,
    cannot finish until the lines are read, and then every one arrives."""
    body = BANNER + "line = b'S ' + b'z' * 1000 + b'\\n'\nfor _ in range(20000): out.write(line)\n"
    limit = 64 * 1024
    with GahpClient(scripted(body), max_backlog=limit) as c:
        wait_for(lambda: c.connection.buffered >= limit, what="the backlog to fill")
        time.sleep(0.5)  # time to read on, which a client without a bound would take
        assert c.connection.buffered < limit + 65536  # at most one more read
        assert c.poll() is None  # still writing: its output was not all taken
        lines = c.read_lines(20000, timeout=60)
        assert len(lines) == 20000 and set(lines) == {"S " + "z" * 1000}
        assert c.wait(10) == 0


@pytest.mark.parametrize("thread", [True, False], ids=["reader-thread", "caller-reads"])
def test_a_silent_server_times_out_and_an_ended_one_says_how(thread):
    silent = scripted(BANNER + "time.sleep(30)\n")
    with GahpClient(silent, reader_thread=thread) as c, pytest.raises(GahpTimeout):
        c.read_line(timeout=0.2)
    body = BANNER + "out.write(b'S\\n'); out.flush(); err.write(b'bye\\n'); sys.exit(3)\n"
    with GahpClient(scripted(body), reader_thread=thread) as c:
        assert c.read_line() == "S"
        with pytest.raises(EOFError, match=r"(?s)exit status 3.*bye"):
            c.read_line()


def test_no_banner_leaves_the_client_to_the_caller():
    c = GahpClient(scripted("err.write(b'cannot start\\n'); sys.exit(2)\n"), read_banner=False)
    with pytest.raises(EOFError, match="cannot start"):
        c.read_banner(timeout=20)
    assert c.wait(5) == 2 and c.poll() == 2


def test_a_server_lines_long_beyond_the_limit_is_refused():
    body = BANNER + "out.write(b'S ' + b'q' * 5000 + b'\\nS ok\\n'); out.flush(); time.sleep(30)\n"
    with GahpClient(scripted(body), max_line=1000) as c:
        with pytest.raises(BadServerLine):
            c.read_line()
        assert c.read_line() == "S ok"


@pytest.mark.parametrize("thread", [True, False], ids=["reader-thread", "caller-reads"])
def test_lines_are_taken_while_another_thread_writes(thread):
    """Pipelined as the benchmarks do: one thread writes every request, the reader takes
    the return lines in bulk; then RESULTS in pieces."""
    body = BANNER + (
        "n = 0\n"
        "for raw in sys.stdin.buffer:\n"
        "    words = raw.split()\n"
        "    if words[0] == b'QUIT': out.write(b'S\\n'); out.flush(); break\n"
        "    if words[0] == b'RESULTS':\n"
        "        out.write(b'S 2\\n%d a\\\\ b\\n%d c\\n' % (n + 1, n + 2)); n += 2\n"
        "    else: out.write(b'S\\n')\n"
        "    out.flush()\n"
    )
    with GahpClient(scripted(body), reader_thread=thread) as c:
        requests = [("PING", str(i)) for i in range(1, 3001)]
        writer = threading.Thread(target=c.send_many, args=(requests,))
        writer.start()
        assert c.read_lines(3000, timeout=60) == ["S"] * 3000
        writer.join()
        assert c.results() == [["1", "a b"], ["2", "c"]]
        assert c.quit() == 0


# ---- against the real executables ---------------------------------------------------------

REAL = {
    "boinc-gahp": ([sys.executable, "-m", "gahp_boinc"], "BOINC_PING", 1),
    "blahpd": ([sys.executable, "-m", "gahp_blah"], "BLAH_PING", 2),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_the_real_servers_over_pipes(name, tmp_path):
    command, ping, nfields = REAL[name]
    (tmp_path / "blahpd.toml").write_text("")
    env = {"BLAHPD_CONFIG": str(tmp_path / "blahpd.toml")}
    if name == "blahpd":
        command, probe = [*command, "--state-dir", str(tmp_path / "state")], [ping, "{}", "fork"]
    else:
        probe = [ping, "{}"]
    with GahpClient(command, env=env) as c:
        version = c.version()
        assert version is not None and version.number.count(".") == 2, c.banner
        assert c.command("VERSION") == ["S", *split(c.banner)]
        assert ping in c.command("COMMANDS")
        ids = [c.reqid() for _ in range(3)]
        c.send_many([[(rid if w == "{}" else w) for w in probe] for rid in ids])
        assert c.read_lines(3) == ["S"] * 3
        results = c.wait_results(ids)
        assert sorted(results) == sorted(ids)
        assert {len(f) for f in results.values()} == {nfields}, results
        c.set_prefix("P:")
        c.keep_r = True
        assert c.command("ASYNC_MODE_ON") == ["S"]
        c.send(*[(ids[0] + "0" if w == "{}" else w) for w in probe])
        assert sorted(c.read_line(timeout=30) for _ in range(2)) == ["R", "S"]
        got = c.results()
        assert [f[0] for f in got] == [ids[0] + "0"] and join(got[0]).count("\\") >= 1
        assert c.quit() == 0


def test_gahp_shell_uses_the_client_not_the_test_kit():
    """The shipped gahp-shell takes the public client as it is: no test kit, no override."""
    import ast
    from pathlib import Path

    import gahp_core

    source = Path(gahp_core.__file__).with_name("_shell.py").read_text()
    tree = ast.parse(source)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "gahp_core.testing" not in imported
    bases = [b for n in ast.walk(tree) if isinstance(n, ast.ClassDef) for b in n.bases]
    assert not [ast.unparse(b) for b in bases if "Client" in ast.unparse(b)]
