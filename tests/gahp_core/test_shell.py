"""gahp-shell driven through a pseudo-terminal, as a person at a keyboard would use it."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gahp_core import join
from gahp_core._shell import (  # private: gahp-shell's helpers as units
    RequestIds,
    build_request,
    describe_exit,
    main,
    quote_field,
    readable,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
ECHO = [sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")


class Terminal:
    """gahp-shell running on the slave side of a pty; read and type on the master side."""

    def __init__(self, args: Sequence[str], home: Path) -> None:
        master, slave = os.openpty()
        env = dict(os.environ, HOME=str(home), TERM="dumb", PYTHONPATH=str(EXAMPLES))
        env.pop("INPUTRC", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gahp_core._shell", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.fd = master
        self.text = ""  # everything shown, escape sequences and CRs removed
        self.pos = 0  # expect() searches from here

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the slave side is closed
            return False
        if not data:
            return False
        self.text += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def expect(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        """Wait until ``pattern`` appears after the previous match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.text, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{pattern!r} not shown; screen after pos:\n{self.text[self.pos :]}"
                )
            if not self._read(min(left, 0.2)) and self.proc.poll() is not None:
                while self._read(0.05):
                    pass
                if not rx.search(self.text, self.pos):
                    raise AssertionError(f"shell exited; {pattern!r} not shown:\n{self.text}")

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def line(self, text: str) -> None:
        self.type(text + "\r")

    def wait(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0.05):
            pass
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        os.close(self.fd)


@pytest.fixture
def term_factory(tmp_path: Path):
    terms: list[Terminal] = []

    def make(*args: str) -> Terminal:
        t = Terminal(args, tmp_path)
        terms.append(t)
        return t

    yield make
    for t in terms:
        t.close()


def test_echo_session_auto_ids_results_transcript_and_eof(term_factory, tmp_path: Path) -> None:
    transcript = tmp_path / "t.log"
    t = term_factory("--transcript", str(transcript), "--poll", "0.2", "--", *ECHO)
    t.expect(r"\$GahpVersion: 1\.0\.0 \w+ \d+ \d+ Echo\\ GAHP\\ example \$")
    t.expect("gahp> ")
    t.line("ECHO @ 'two words' back\\\\slash")
    t.expect(r"S  # request id 1")
    t.expect(r"result 1: NULL 'two words' 'back\\slash'")
    t.line("HELLO world")
    t.expect("S hello world")
    t.line("NO_SUCH")
    t.expect("E 'unknown command'")
    t.line("ECHO 7 typed")  # a typed id is used as is, and @ skips it later
    t.expect(r"result 7: NULL typed")
    t.line("ECHO @ x")
    t.expect(r"# request id 2")
    t.expect(r"result 2: NULL x")
    t.line(":raw ECHO 8 a\\ b  c")
    t.expect(r"result 8: NULL 'a b' '' c")
    t.line("FAIL @ boom")
    t.expect(r"result 3: 'failed on purpose: boom'")
    t.line("'unclosed")
    t.expect("error: No closing quotation")
    t.line(":help")
    t.expect(":raw LINE")
    t.expect("gahp> ")
    t.type("\x04")  # Ctrl-D
    t.expect(r"# server exit status 0")
    assert t.wait() == 0
    log = transcript.read_text()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}"
    assert re.search(rf"^{stamp} > ECHO 1 two\\ words back\\\\slash$", log, re.M), log
    assert re.search(rf"^{stamp} < \$GahpVersion: ", log, re.M)
    assert re.search(rf"^{stamp} > RESULTS$", log, re.M)
    assert re.search(rf"^{stamp} < 1 NULL two\\ words back\\\\slash$", log, re.M)
    assert re.search(rf"^{stamp} > QUIT$", log, re.M)
    assert re.search(rf"^{stamp} # server exit status 0$", log, re.M)
    history = (tmp_path / ".gahp_shell_history").read_text()
    assert "HELLO world" in history


def test_async_mode_r_triggers_poll_and_prefix(term_factory) -> None:
    t = term_factory("--poll", "0", "--", *ECHO)  # no periodic polling: only R polls
    t.expect("gahp> ")
    t.line("RESPONSE_PREFIX GAHP:")
    t.expect(r"\nS\n")
    t.line("ASYNC_MODE_ON")
    t.expect(r"\nS\n")
    t.line("WAIT @ 0.3")
    t.expect(r"# request id 1")
    t.expect(r"result 1: NULL", timeout=5)
    t.line("QUIT")
    t.expect("# server exit status 0")
    assert t.wait() == 0


def test_raw_display_and_results_by_hand(term_factory) -> None:
    t = term_factory("--raw", "--poll", "0", "--", *ECHO)
    t.expect("gahp> ")
    t.line("ECHO @ 'a b'")
    t.expect(r"S  # request id 1")
    t.line("RESULTS")  # ECHO, a coroutine, has its result queued before the next request
    t.expect(r"S 1\n")
    t.expect(r"1 NULL a\\ b\n")
    t.line(":quit")
    assert t.wait() == 0


def test_server_death_is_reported_at_the_prompt(term_factory, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = (
        "import os,sys; open(sys.argv[1],'w').write(str(os.getpid()));"
        "os.execvp(sys.argv[2], sys.argv[2:])"
    )
    t = term_factory("--", sys.executable, "-c", script, str(pidfile), *ECHO)
    t.expect("gahp> ")
    os.kill(int(pidfile.read_text()), signal.SIGKILL)
    t.expect(r"the server exited unexpectedly: killed by signal SIGKILL", timeout=5)
    assert t.wait(5) == 1


def test_server_exit_while_typing_and_bad_banner(term_factory) -> None:
    t = term_factory("--", sys.executable, "-c", "print('$GahpVersion: x $', flush=True)")
    t.expect(r"the server exited unexpectedly: exit status 0", timeout=5)
    assert t.wait(5) == 1
    t2 = term_factory("--", sys.executable, "-c", "import sys; sys.exit(3)")
    t2.expect(r"no banner from the server .*: exit status 3", timeout=10)
    assert t2.wait(5) == 1


def test_boinc_gahp_session(term_factory, tmp_path: Path) -> None:
    from gahp_boinc.emulator import EmulatorServer

    boinc = [sys.executable, "-m", "gahp_boinc"]
    srv = EmulatorServer(state_dir=tmp_path / "emu", port=0, job_delay=0.05)
    srv.start()
    try:
        _boinc_session(term_factory("--poll", "0.2", "--", *boinc), srv.url, srv.authenticator)
    finally:
        srv.stop()


def _boinc_session(t: Terminal, url: str, authenticator: str) -> None:
    t.expect(r"\$GahpVersion: \S+ \w+ \d+ \d+ Python\\ BOINC\\ GAHP \$")
    t.line("COMMANDS")
    t.expect(r"S .*BOINC_FETCH_OUTPUT.*BOINC_SUBMIT")
    t.line("BOINC_PING @")  # no project selected yet: an error result, not a hang
    t.expect(r"# request id 1")
    t.expect(r"result 1: 'no project selected: .*'", timeout=10)
    t.line(f"BOINC_SELECT_PROJECT {url} {authenticator}")
    t.expect(r"\nS\n")
    t.line("BOINC_PING @")
    t.expect(r"# request id 2")
    t.expect(r"result 2: NULL\n", timeout=10)
    t.line("BOINC_QUERY_BATCHES @ 0 1 nosuchbatch")
    t.expect(r"result 3: .*no batch named nosuchbatch", timeout=10)
    t.line("BOINC_SELECT_PROJECT ftp://x y")
    t.expect(r"E \"project URL must start with http:// or https://: 'ftp://x'\"")
    t.expect("gahp> ")  # keys typed before the prompt go through the tty's cooked mode
    t.type("\x04")
    t.expect("# server exit status 0")
    assert t.wait() == 0


# ---- pure helpers -------------------------------------------------------------------------


def test_server_stderr_is_shown(term_factory, tmp_path: Path) -> None:
    """A server's stderr lines appear as ``stderr:`` lines (a missing log file, here)."""
    blocked = tmp_path / "plain-file"
    blocked.write_text("")
    t = term_factory("--", sys.executable, "-m", "gahp_boinc", "--log", f"{blocked}/x.log")
    t.expect(r"stderr: warning: cannot open log file .*plain-file/x\.log")
    t.expect("gahp> ")
    t.line("QUIT")
    assert "Traceback" not in t.text


def test_build_request_escapes_and_allocates() -> None:
    ids = RequestIds()
    words, rid = build_request(["ECHO", "@", "a b", "c\\d", "e\r\nf"], ids)
    assert rid == "1" and words[1] == "1"
    assert join(words) == "ECHO 1 a\\ b c\\\\d e\\\r\\\nf"
    build_request(["ECHO", "2", "x"], ids)  # typed by hand: skipped by @
    assert build_request(["ECHO", "@"], ids)[1] == "3"
    assert build_request(["COMMANDS"], ids) == (["COMMANDS"], None)
    assert build_request(["ECHO", "1", "@"], ids) == (["ECHO", "1", "@"], None)


def test_readable_quoting() -> None:
    assert readable(["S", "1", "NULL"]) == "S 1 NULL"
    assert quote_field("") == "''"
    assert quote_field("a b") == "'a b'"
    assert quote_field("it's") == '"it\'s"'
    assert quote_field("it's \\") == "$'it\\'s \\\\'"
    assert quote_field("l1\nl2\\") == "$'l1\\nl2\\\\'"
    assert quote_field("condor#x#1.0") == "condor#x#1.0"
    assert describe_exit(0) == "exit status 0"
    assert describe_exit(-9) == "killed by signal SIGKILL"


def test_version_and_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("gahp-shell ")
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
