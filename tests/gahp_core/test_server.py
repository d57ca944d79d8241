"""The runtime seen from outside: spawn a server, talk to it over pipes."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gahp_core.testing import GahpClient

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

CMD = [sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp"]
ENV = {"PYTHONPATH": str(EXAMPLES)}


def client(*extra: str) -> GahpClient:
    return GahpClient([*CMD, *extra], env=ENV)


def test_escaped_arguments_round_trip():
    with client() as c:
        odd = ["a b", "back\\slash", "cr\rlf\nend", "", "ünïcode"]
        assert c.call("ECHO", *odd) == ["NULL", *odd]


def test_sync_command_and_arity():
    with client() as c:
        assert c.command("hello", "x y") == ["S", "hello", "x y"]
        assert c.command("HELLO", "a", "b")[0] == "E"


def test_bad_argument_gives_e_and_handler_error_gives_result():
    with client() as c:
        assert c.command("WAIT", "1", "soon")[0] == "E"
        assert c.call("FAIL", "boom") == ["failed on purpose: boom"]
        assert c.command("COMMANDS")[0] == "S"


def test_blocking_handlers_do_not_block_the_protocol():
    with client("--workers", "2") as c:
        for i in range(1, 6):  # more blocked handlers than workers, for 30 s
            assert c.command("BLOCK", str(i), "30") == ["S"]
        assert c.command("HELLO") == ["S", "hello"]
        assert c.results() == []  # answered while every worker is still blocked


def test_thousands_in_flight_use_few_threads():
    with client("--workers", "4") as c:
        n = 2000
        c.send_raw(b"".join(f"WAIT {i} 1\r\n".encode() for i in range(1, n + 1)))
        for _ in range(n):
            assert c.read_line() == "S"
        threads = len(os.listdir(f"/proc/{c.proc.pid}/task"))
        assert threads < 16, threads
        got = c.wait_results([str(i) for i in range(1, n + 1)], timeout=30)
        assert len(got) == n and all(v == ["NULL"] for v in got.values())


def test_overload_answers_threads_limit_reached():
    with client("--max-in-flight", "3") as c:
        for i in (1, 2, 3):
            assert c.command("WAIT", str(i), "0.5") == ["S"]
        assert c.command("WAIT", "4", "0.5") == ["F", "Threads limit reached"]
        c.wait_results(["1", "2", "3"])
        assert c.command("WAIT", "5", "0") == ["S"]


def test_results_keep_completion_order():
    with client() as c:
        assert c.command("WAIT", "1", "3") == ["S"]
        assert c.command("WAIT", "2", "1.5") == ["S"]
        assert c.command("ECHO", "3") == ["S"]
        order: list[str] = []
        deadline = time.monotonic() + 30
        while len(order) < 3 and time.monotonic() < deadline:
            order += [r[0] for r in c.results()]
            time.sleep(0.1)
        assert order == ["3", "2", "1"]


def test_garbage_input_never_kills_the_server():
    with client() as c:
        c.send_raw(b"\x00\xff\xfe BOINC\r\n")
        assert c.read_fields()[0] == "E"
        c.send_raw(b"ECHO 5 \xff\xfe\r\n")
        assert c.read_fields() == ["S"]
        c.send_raw(b"ECHO " + b"1 " + b"x " * 50000 + b"\r\n")
        assert c.read_fields() == ["S"]
        c.send_raw(b"\r\r\r\n")
        assert c.read_fields()[0] == "E"
        assert c.command("COMMANDS")[0] == "S"
        got = c.wait_results(["5", "1"])
        assert got["5"][0] == "NULL" and got["1"][1:] == ["x"] * 50000 + [""]


def test_sigterm_exits_promptly_with_work_in_flight():
    c = client()
    try:
        assert c.command("BLOCK", "1", "30") == ["S"]
        assert c.command("WAIT", "2", "30") == ["S"]
        start = time.monotonic()
        c.proc.send_signal(signal.SIGTERM)
        assert c.proc.wait(25) == 0
        assert time.monotonic() - start < 25  # did not wait for the 30 s handlers
    finally:
        c.close()


def test_quit_with_blocked_worker_exits_within_a_second():
    c = client()
    try:
        assert c.command("BLOCK", "1", "30") == ["S"]
        start = time.monotonic()
        assert c.quit(timeout=25) == 0
        assert time.monotonic() - start < 25  # did not wait for the 30 s worker
    finally:
        c.close()


def test_unknown_backend_is_a_clear_cli_error(tmp_path):
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "gahp_core", "--backend", "nope"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 2
    assert "no backend named 'nope'" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("mode", ["regular-file"])
def test_stdin_from_a_regular_file(tmp_path, mode):
    import subprocess

    script = tmp_path / "in.txt"
    script.write_text("ECHO 1 a\nCOMMANDS\nQUIT\n")
    with script.open("rb") as stdin:
        r = subprocess.run(
            CMD, stdin=stdin, capture_output=True, env={**os.environ, **ENV}, timeout=20
        )
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("$GahpVersion:")
    assert lines[1] == "S" and lines[2].startswith("S ") and lines[3] == "S"


def test_stdin_from_dev_null_is_an_immediate_eof():
    """/dev/null is a device the event loop cannot watch: the server must still see EOF."""
    import subprocess

    with open(os.devnull, "rb") as stdin:
        r = subprocess.run(
            CMD, stdin=stdin, capture_output=True, env={**os.environ, **ENV}, timeout=20
        )
    assert r.returncode == 0 and r.stdout.decode().startswith("$GahpVersion:")
    assert b"Traceback" not in r.stderr


def test_a_misspelt_hook_implementation_is_refused(tmp_path):
    """A backend whose hookimpl matches no hook specification fails loudly at load."""
    import subprocess

    (tmp_path / "typo_gahp.py").write_text(
        "from gahp_core import hookimpl\n\n@hookimpl\ndef gahp_comands(context):\n    return []\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "gahp_core", "--backend", "module:typo_gahp"],
        capture_output=True,
        text=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert r.returncode == 2 and "gahp_comands" in r.stderr, r.stderr
    assert r.stdout == ""
