"""GAHP argument escaping and line framing (pure functions, no I/O).

On the wire an unescaped space separates arguments, a backslash makes the next character
literal, an unescaped CR is dropped and an unescaped LF ends the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SPECIAL = re.compile(r"[\\\r\n]")
_ESCAPE_TABLE = str.maketrans({" ": "\\ ", "\\": "\\\\", "\r": "\\\r", "\n": "\\\n"})


def escape(arg: str) -> str:
    """Escape one argument: a backslash before each space, backslash, CR and LF."""
    return arg.translate(_ESCAPE_TABLE)


def join(args: Iterable[str]) -> str:
    """Escape each argument and join them with single spaces (no line terminator)."""
    items = list(args)
    line = " ".join(items)
    # Most lines need no escaping: checking the joined line at once is much cheaper than
    # translating each argument (a result with thousands of fields).
    if line.count(" ") == len(items) - 1 and not _SPECIAL.search(line):
        return line
    return " ".join(escape(a) for a in items)


def split(line: str) -> list[str]:
    """Split one request line (without its terminator) into arguments.

    Each unescaped space ends an argument, so two spaces make an empty argument. A
    trailing lone backslash is kept literally. Never raises.
    """
    if "\\" not in line:
        return line.replace("\r", "").split(" ")
    args: list[str] = []
    cur: list[str] = []
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            if i + 1 < n:
                cur.append(line[i + 1])
                i += 2
                continue
            cur.append(c)
        elif c == " ":
            args.append("".join(cur))
            cur = []
        elif c != "\r":
            cur.append(c)
        i += 1
    args.append("".join(cur))
    return args


def _escaped_at(buf: bytes | bytearray, pos: int, start: int) -> bool:
    """True when the byte at ``pos`` is preceded by an odd run of backslashes."""
    count = 0
    j = pos - 1
    while j >= start and buf[j] == 0x5C:
        count += 1
        j -= 1
    return count % 2 == 1


class LineSplitter:
    """Incremental framing: feed bytes, get complete lines (bytes, terminator removed).

    A LF preceded by an escaping backslash belongs to the argument and does not end
    the line. A line longer than ``max_line`` bytes is dropped and reported as ``None``
    once its end arrives, so memory stays bounded whatever the input.
    """

    def __init__(self, max_line: int = 64 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._scan = 0
        self._overflow = False
        self.max_line = max_line

    def feed(self, data: bytes) -> list[bytes | None]:
        """Add ``data`` and return every line it completes (``None`` for an over-long one)."""
        buf = self._buf
        buf += data
        out: list[bytes | None] = []
        start = 0
        pos = self._scan
        while True:
            lf = buf.find(b"\n", pos)
            if lf < 0:
                break
            if _escaped_at(buf, lf, start):
                pos = lf + 1
                continue
            if self._overflow:
                out.append(None)
                self._overflow = False
            elif lf - start > self.max_line:  # arrived whole in one chunk: still too long
                out.append(None)
            else:
                out.append(bytes(buf[start:lf]))
            start = pos = lf + 1
        if start:
            del buf[:start]
            pos -= start
        self._scan = pos
        if len(buf) > self.max_line:
            # Keep only the tail that could still hold an escape; remember to drop the line.
            self._overflow = True
            keep = buf[-1:] if buf[-1:] == b"\\" else b""
            self._buf = bytearray(keep)
            self._scan = 0
        return out

    @property
    def holding(self) -> bool:
        """Whether part of a line is held (or an over-long line is being dropped): the next
        bytes continue it."""
        return bool(self._buf) or self._overflow

    def pending(self) -> bytes:
        """Bytes received after the last complete line (an unterminated last line)."""
        return bytes(self._buf)
