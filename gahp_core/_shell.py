"""``gahp-shell``: an interactive client for debugging any GAHP server by hand.

``gahp-shell [--transcript FILE] [--poll SECONDS] [--raw] -- COMMAND [ARGS...]`` spawns the
server, shows its banner and gives a prompt with line editing and history. Words are typed
with shell quoting and sent GAHP-escaped; ``@`` in the request-id position allocates a
fresh id; results of asynchronous requests are polled in the background and printed as
they arrive.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from gahp_core import __version__
from gahp_core._client import GahpClient, GahpTimeout
from gahp_core._client_connection import BadServerLine
from gahp_core._errors import GahpError
from gahp_core._escaping import join, split
from gahp_core._protocol import parse_reqid

try:  # line editing and history where the platform has them
    import readline as _readline
except ImportError:  # pragma: no cover - e.g. Windows
    _readline = None  # type: ignore[assignment]

PROMPT = "gahp> "
AUTO_REQID = "@"
HISTORY_NAME = ".gahp_shell_history"
SLOW_REPLY = 20.0
"""Seconds after which a missing reply is reported (HTCondor gives up at 20 s)."""

SYNC_BUILTINS = frozenset(
    {"COMMANDS", "VERSION", "QUIT", "RESULTS", "ASYNC_MODE_ON", "ASYNC_MODE_OFF", "RESPONSE_PREFIX"}
)

HELP = """\
Type a request as words, with shell quoting: ECHO @ 'two words' "a\\\\b"
Words are sent GAHP-escaped (space, backslash, CR, LF); replies are shown unescaped, a
field with special characters quoted. A second word '@' is replaced by a fresh request id.
Results of accepted asynchronous requests are polled with RESULTS in the background and
printed as 'result ID: FIELDS'; an 'R' notification (after ASYNC_MODE_ON) polls at once.

  :help           this text
  :raw LINE       send LINE exactly as typed (no quoting, no escaping, no '@')
  :results        poll RESULTS now
  :quit           send QUIT and wait for the server to exit (also Ctrl-D)
Ctrl-C clears the line, or stops waiting for a reply."""

_SAFE_FIELD = re.compile(r"[\w@%+=:,./#-]+")
_ANSI_C = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class ServerGone(GahpError):
    """The server process ended or closed its stdout."""


class NoBanner(GahpError):
    """The server ended, or said nothing, before its banner."""

    def __init__(self, client: GahpClient, cause: Exception) -> None:
        super().__init__(str(cause))
        self.client = client


def quote_field(field: str) -> str:
    """One field as it would be typed back: bare, in single or double quotes, or ``$'...'``."""
    if _SAFE_FIELD.fullmatch(field):
        return field
    if field.isprintable() and "'" not in field:
        return f"'{field}'"
    if field.isprintable() and not any(c in field for c in '"\\$`'):
        return f'"{field}"'
    body = "".join(_ANSI_C.get(c, c if c.isprintable() else f"\\x{ord(c):02x}") for c in field)
    return f"$'{body}'"


def readable(fields: Sequence[str]) -> str:
    """Unescaped fields joined by spaces, each quoted when needed."""
    return " ".join(quote_field(f) for f in fields)


def describe_exit(code: int) -> str:
    """``exit status N`` or ``killed by signal NAME``."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"killed by signal {name}"
    return f"exit status {code}"


class RequestIds:
    """Fresh request ids for ``@``, never reusing one typed by hand."""

    def __init__(self) -> None:
        self._next = 1
        self._used: set[int] = set()

    def note(self, text: str) -> None:
        """Remember an id the user typed."""
        if parse_reqid(text) is not None:
            self._used.add(int(text))

    def allocate(self) -> str:
        """The next unused positive id."""
        while self._next in self._used:
            self._next += 1
        rid = self._next
        self._used.add(rid)
        self._next += 1
        return str(rid)


def build_request(words: Sequence[str], ids: RequestIds) -> tuple[list[str], str | None]:
    """Replace ``@`` in the request-id position (second word); return words and new id."""
    out = list(words)
    if len(out) >= 2 and out[1] == AUTO_REQID:
        out[1] = ids.allocate()
        return out, out[1]
    if len(out) >= 2:
        ids.note(out[1])
    return out, None


class Transcript:
    """Every line sent (``>``), received (``<``), from stderr (``!``) and notes (``#``).

    One line per event: ``<ISO time with ms> <mark> <wire text>``; CR and LF inside a
    line are written as ``\\r`` and ``\\n``.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._fh: TextIO | None = (
            open(path, "a", encoding="utf-8", errors="surrogateescape") if path else None  # noqa: SIM115
        )
        self._lock = threading.Lock()

    def write(self, mark: str, text: str) -> None:
        if self._fh is None:
            return
        stamp = _dt.datetime.now().isoformat(sep=" ", timespec="milliseconds")
        text = text.replace("\r", "\\r").replace("\n", "\\n")
        with self._lock:
            self._fh.write(f"{stamp} {mark} {text}\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class Shell:
    """The interactive session: a prompt in the main thread, a poller thread beside it."""

    def __init__(
        self,
        command: Sequence[str],
        poll: float = 1.0,
        raw: bool = False,
        transcript: str | os.PathLike[str] | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.command = list(command)
        self.poll = poll
        self.raw = raw
        self.out = out or sys.stdout
        self.transcript = Transcript(transcript)
        self.ids = RequestIds()
        self.pending: set[str] = set()
        self.prefix = ""
        self.client: GahpClient | None = None
        self._interactive = sys.stdin.isatty() and self.out.isatty()
        self._io = threading.RLock()  # one request/reply exchange at a time
        self._out_lock = threading.Lock()
        self._stop = threading.Event()
        self._gone = threading.Event()
        self._r_seen = False
        self._at_prompt = False
        self._quitting = False
        self._main_ident = threading.get_ident()

    # ---- output -----------------------------------------------------------------------------

    def emit(self, text: str) -> None:
        """Print a line; at the prompt, redraw the prompt and the line being typed after it."""
        with self._out_lock:
            if self._at_prompt and self._interactive:
                typed = _readline.get_line_buffer() if _readline is not None else ""
                self.out.write(f"\r\x1b[K{text}\n{PROMPT}{typed}")
            else:
                self.out.write(text + "\n")
            self.out.flush()

    def _stderr_line(self, line: str) -> None:
        self.transcript.write("!", line)
        self.emit(f"stderr: {line}")

    def _show(self, wire: str, label: str = "") -> list[str]:
        """Display one received line (without prefix); return its fields."""
        fields = split(wire)
        self.emit(label + (wire if self.raw else readable(fields)))
        return fields

    # ---- wire -------------------------------------------------------------------------------

    def _send(self, wire: str) -> None:
        assert self.client is not None
        self.transcript.write(">", wire)
        try:
            self.client.send_raw(wire.encode("utf-8", "surrogateescape") + b"\r\n")
        except (BrokenPipeError, OSError, ValueError):
            raise ServerGone from None

    def _receive(self, timeout: float) -> str | None:
        """The next line (prefix removed), ``None`` after ``timeout``; R lines are noted."""
        assert self.client is not None
        while True:
            try:
                line = self.client.read_raw(timeout)
            except GahpTimeout:
                if self.client.poll() is not None and timeout > 0:
                    raise ServerGone from None
                return None
            except EOFError:
                raise ServerGone from None
            except BadServerLine as exc:  # dropped; the ones after it still count
                self.transcript.write("#", str(exc))
                self.emit(f"# {exc}")
                continue
            self.transcript.write("<", line)
            line = self._unprefixed(line.rstrip("\r"))
            if _is_r_line(line):
                self._note_r(line)
                continue
            return line

    def _unprefixed(self, line: str) -> str:
        """``line`` less the response prefix (when it starts with it)."""
        if self.prefix and line.startswith(self.prefix):
            return line[len(self.prefix) :]
        return line

    def _note_r(self, line: str) -> None:
        """Note an ``R`` line (shown in raw mode)."""
        self._r_seen = True
        if self.raw:
            self.emit(line)

    def _reply(self) -> str:
        """Wait for the reply to the request just sent (Ctrl-C stops waiting)."""
        waited = 0.0
        warned = False
        while True:
            line = self._receive(0.25)
            if line is not None:
                return line
            waited += 0.25
            if waited >= SLOW_REPLY and not warned:
                warned = True
                self.emit(f"# no reply after {SLOW_REPLY:.0f} s; still waiting (Ctrl-C stops)")

    def _drain_unsolicited(self) -> None:
        """Show lines that arrived while no request was waiting (R is only noted)."""
        while (line := self._receive(0)) is not None:
            self._show(line, "unexpected: ")
        assert self.client is not None
        if self.client.poll() is not None:
            # Exited: show what it still wrote, then report.
            while (line := self._receive(0.2)) is not None:
                self._show(line, "unexpected: ")
            raise ServerGone

    def _result_line(self, line: str, label: bool) -> None:
        fields = split(line)
        self.pending.discard(fields[0])
        if label and not self.raw:
            self.emit(f"result {quote_field(fields[0])}: {readable(fields[1:])}")
        else:
            self._show(line)

    def exchange(self, words: Sequence[str], wire: str, new_id: str | None = None) -> list[str]:
        """Send one request, show its reply (and RESULTS lines); return the reply's fields."""
        with self._io:
            self._drain_unsolicited()
            self._send(wire)
            reply = self._reply()
            fields = split(reply)
            note = f"  # request id {new_id}" if new_id else ""
            self.emit((reply if self.raw else readable(fields)) + note)
            self._after_reply(words, fields)
            return fields

    def _after_reply(self, words: Sequence[str], fields: list[str]) -> None:
        """What a reply changes: RESULTS lines to read, the prefix, quitting, a pending id."""
        cmd = words[0].upper() if words else ""
        if cmd == "RESULTS":  # a synchronous command: nothing else to note
            for _ in range(_results_count(fields)):
                self._result_line(self._reply(), label=False)
        elif cmd == "RESPONSE_PREFIX" and fields == ["S"] and len(words) == 2:
            self.prefix = words[1]
        elif cmd == "QUIT" and fields[:1] == ["S"]:
            self._quitting = True
        elif self._is_async_request(cmd, words, fields):
            self.pending.add(words[1])

    @staticmethod
    def _is_async_request(cmd: str, words: Sequence[str], fields: list[str]) -> bool:
        """True for an accepted request whose result comes later (it has a request id)."""
        return (
            fields == ["S"]
            and cmd not in SYNC_BUILTINS
            and len(words) >= 2
            and parse_reqid(words[1]) is not None
        )

    def poll_results(self) -> int:
        """Send RESULTS and print each result; return how many arrived."""
        with self._io:
            self._r_seen = False
            self._send("RESULTS")
            head = split(self._reply())
            if len(head) != 2 or head[0] != "S" or not head[1].isdigit():
                self.emit(f"unexpected RESULTS reply: {readable(head)}")
                return 0
            for _ in range(int(head[1])):
                self._result_line(self._reply(), label=True)
            return int(head[1])

    # ---- background poller ------------------------------------------------------------------

    def _poller(self) -> None:
        next_poll = time.monotonic() + self.poll
        while not self._stop.wait(0.05):
            try:
                with self._io:
                    if self._stop.is_set():
                        return
                    next_poll = self._poll_once(next_poll)
            except ServerGone:
                self._poller_lost_server()
                return
            except Exception as exc:  # keep the session usable whatever happens
                self.emit(f"# poller error: {exc!r}")

    def _poll_once(self, next_poll: float) -> float:
        """Show unsolicited lines; send RESULTS after an R, or when results are pending
        and the poll interval has passed; the time of the next poll."""
        self._drain_unsolicited()
        due = self.poll > 0 and self.pending and time.monotonic() >= next_poll
        if self._r_seen or due:
            self.poll_results()
            return time.monotonic() + self.poll
        return next_poll

    def _poller_lost_server(self) -> None:
        """The server went away under the poller: tell the prompt (unless quitting)."""
        if self._quitting or self._stop.is_set():
            return
        self._gone.set()
        if self._at_prompt:
            signal.pthread_kill(self._main_ident, signal.SIGUSR1)

    # ---- commands ---------------------------------------------------------------------------

    def handle(self, line: str) -> bool:
        """Act on one input line; False when the session should end."""
        text = line.strip()
        if not text:
            return True
        if text.startswith(":"):
            name, _, rest = text[1:].partition(" ")
            name = name.lower()
            if name in ("quit", "q", "exit"):
                return False
            if name in ("help", "h", "?"):
                self.emit(HELP)
            elif name == "raw":
                raw = line.lstrip()[len(":raw") :].removeprefix(" ")
                self.exchange(split(raw), raw)
            elif name == "results":
                self.poll_results()
            else:
                self.emit(f"unknown shell command :{name} (try :help)")
            return True
        try:
            words = shlex.split(line)
        except ValueError as exc:
            self.emit(f"error: {exc}")
            return True
        if not words:
            return True
        request, new_id = build_request(words, self.ids)
        self.exchange(request, join(request), new_id)
        return not self._quitting

    # ---- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the server and print its banner."""
        self.transcript.write("#", "spawn " + shlex.join(self.command))
        client = GahpClient(self.command, on_stderr=self._stderr_line, read_banner=False)
        try:
            client.read_banner()
        except (EOFError, GahpTimeout, BadServerLine) as exc:
            raise NoBanner(client, exc) from None
        self.client = client
        self.transcript.write("<", self.client.banner)
        self.emit(self.client.banner.rstrip("\r"))
        if self._interactive:
            self.emit("# :help for help, Ctrl-D to quit")

    def finish(self, asked: bool) -> int:
        """Stop the poller; QUIT if asked and still alive; wait and report the exit status."""
        self._stop.set()
        client = self.client
        if client is None:
            return 1
        if asked and not self._quitting and client.poll() is None:
            self._quit()
        code = self._wait_exit(client)
        how = describe_exit(code)
        self.transcript.write("#", f"server {how}")
        if asked:
            self.emit(f"# server {how}")
        else:
            self.emit(f"# the server exited unexpectedly: {how}")
        client.close()
        self.transcript.close()
        return 0 if asked and code == 0 else 1

    def _quit(self) -> None:
        """Send QUIT and show its reply (if it comes within 5 s)."""
        try:
            with self._io:
                self._quitting = True
                self._send("QUIT")
                reply = self._receive(5.0)
                if reply is not None:
                    self._show(reply)
        except ServerGone:
            pass

    def _wait_exit(self, client: GahpClient) -> int:
        """The server's exit status: waited for, then terminated, then killed."""
        try:
            return client.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.emit("# the server did not exit; terminating it")
            client.proc.terminate()
        try:
            return client.proc.wait(3)
        except subprocess.TimeoutExpired:
            client.proc.kill()
            return client.proc.wait()

    def run(self) -> int:
        """The prompt loop; returns the shell's exit status."""
        try:
            self.start()
        except NoBanner as exc:
            how = describe_exit(exc.client.wait(5))  # read_banner closed it
            self.emit(f"# no banner from the server ({exc}): {how}")
            self.transcript.write("#", f"no banner: {how}")
            self.transcript.close()
            return 1
        poller = threading.Thread(target=self._poller, name="gahp-shell-poller", daemon=True)
        poller.start()
        return self.finish(self._prompt_loop())

    def _prompt_loop(self) -> bool:
        """Read and act on input lines until the end; False when the server went away
        unasked."""
        while True:
            try:
                self._at_prompt = True
                if self._gone.is_set():
                    raise ServerGone
                line = input(PROMPT)
                self._at_prompt = False
                if not self.handle(line):
                    return True
            except EOFError:
                self._at_prompt = False
                self.emit("")
                return True
            except KeyboardInterrupt:
                was_prompt, self._at_prompt = self._at_prompt, False
                self.emit("^C" if was_prompt else "# interrupted: stopped waiting for the reply")
            except ServerGone:
                self._at_prompt = False
                return self._quitting
            finally:
                self._at_prompt = False
            if self._gone.is_set():
                return False


def _is_r_line(line: str) -> bool:
    """True for an ``R`` line (``R`` alone, or one field starting with R)."""
    return line == "R" or (line.startswith("R") and len(split(line)) == 1)


def _results_count(fields: list[str]) -> int:
    """The count of a RESULTS reply (``S <count>``); 0 for any other reply."""
    if len(fields) == 2 and fields[0] == "S" and fields[1].isdigit():
        return int(fields[1])
    return 0


def _raise_gone(signum: int, frame: FrameType | None) -> None:
    raise ServerGone


def _history_path() -> Path:
    return Path.home() / HISTORY_NAME


def _setup_history() -> Callable[[], None]:
    """Load the history file; return the function that saves it."""
    if _readline is None:
        return lambda: None
    path = _history_path()
    with contextlib.suppress(OSError):
        _readline.read_history_file(path)
    _readline.set_history_length(2000)

    def save() -> None:
        with contextlib.suppress(OSError):
            _readline.write_history_file(path)

    return save


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gahp-shell",
        description="Talk to a GAHP server by hand: spawn it, type requests, see replies.",
        epilog="Example: gahp-shell --transcript t.log -- boinc-gahp --log /tmp/gahp.log",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--transcript", metavar="FILE", help="append every line sent and received")
    p.add_argument(
        "--poll",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="poll RESULTS this often while requests are pending (default 1; 0: only on R)",
    )
    p.add_argument("--raw", action="store_true", help="show lines exactly as on the wire")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``gahp-shell``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("give the GAHP server command after --")
    if args.poll < 0:
        parser.error("--poll must be 0 or more")
    signal.signal(signal.SIGUSR1, _raise_gone)
    save_history = _setup_history() if sys.stdin.isatty() else (lambda: None)
    shell = Shell(command, poll=args.poll, raw=args.raw, transcript=args.transcript)
    try:
        code = shell.run()
    except FileNotFoundError as exc:
        print(f"gahp-shell: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        code = 127
    finally:
        save_history()
    raise SystemExit(code)


if __name__ == "__main__":
    main()
