"""Ninf-G invoke-server protocol: framing and formatting (pure functions, no I/O).

Requests end in LF, CR or CRLF (the client writes CRLF); replies and notifications end
in CRLF, the only terminator the C client recognises. ``JOB_CREATE <reqid>`` opens a
block of ``<name> <value>`` attribute lines closed by ``JOB_CREATE_END``; values are the
rest of the line, unescaped. A framed request is its lines joined by LF (no line can
hold one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

CRLF = "\r\n"
BLOCK_START = "JOB_CREATE"
BLOCK_END = "JOB_CREATE_END"


def format_line(fields: Iterable[str]) -> str:
    """Fields joined by single spaces, CRLF-terminated; CR and LF inside become spaces."""
    text = " ".join(fields)
    return text.replace("\r", " ").replace("\n", " ") + CRLF


@attrs.frozen
class Request:
    """A framed request: the command (upper case), its arguments and any attribute lines."""

    command: str
    args: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...] = ()


def parse_request(framed: bytes) -> Request | None:
    """Parse a framed request; ``None`` for a blank line."""
    lines = framed.decode("utf-8", "surrogateescape").split("\n")
    head = lines[0].split()
    if not head:
        return None
    attributes = []
    for line in lines[1:]:
        name, _, value = line.strip(" \t").partition(" ")
        if name:
            attributes.append((name, value.strip(" \t")))
    return Request(head[0].upper(), tuple(head[1:]), tuple(attributes))


class NinfgFramer:
    """Split input into requests: single lines, or whole JOB_CREATE blocks.

    A line (or block) longer than ``max_bytes`` is dropped and reported once as ``None``.
    """

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._skip_lf = False
        self._block: list[bytes] | None = None
        self._block_size = 0
        self._overflow = False
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes | None]:
        out: list[bytes | None] = []
        buf = self._buf
        for line in self._lines(data):
            self._take(line, out)
        if len(buf) > self.max_bytes:
            self._overflow = True
            buf.clear()
        return out

    def finish(self) -> list[bytes | None]:
        """The unterminated last line, if any (a block never closed is dropped)."""
        out: list[bytes | None] = []
        if self._buf.strip():
            self._take(bytes(self._buf), out)
            self._buf.clear()
        return out

    def _lines(self, data: bytes) -> Iterable[bytes | None]:
        buf = self._buf
        start = 0
        if self._skip_lf and data[:1] == b"\n":
            start = 1
        self._skip_lf = False
        n = len(data)
        i = start
        while i < n:
            c = data[i]
            if c == 0x0A or c == 0x0D:
                buf += data[start:i]
                line = bytes(buf)
                buf.clear()
                if self._overflow:
                    self._overflow = False
                    yield None
                else:
                    yield line
                if c == 0x0D:
                    if i + 1 < n:
                        if data[i + 1] == 0x0A:
                            i += 1
                    else:
                        self._skip_lf = True
                start = i + 1
            i += 1
        buf += data[start:]

    def _take(self, line: bytes | None, out: list[bytes | None]) -> None:
        if self._discarding:
            # the rest of an over-long block: one reply for the whole of it, at its end
            if line is not None and line.strip() == BLOCK_END.encode():
                self._discarding = False
                out.append(None)
            return
        if line is None:
            if self._block is not None:
                self._block = None
                self._discarding = True
            else:
                out.append(None)
            return
        if self._block is not None:
            self._block_size += len(line) + 1
            if line.strip() == BLOCK_END.encode():
                out.append(b"\n".join(self._block))
                self._block = None
            elif self._block_size > self.max_bytes:
                self._block = None
                self._discarding = True
            else:
                self._block.append(line)
            return
        words = line.split()
        if words and words[0].upper() == BLOCK_START.encode():
            self._block = [line]
            self._block_size = len(line)
            return
        out.append(line)


def reply(ok: bool, fields: Sequence[str] = ()) -> str:
    """``S [fields]`` or ``F [message]``, CRLF-terminated."""
    return format_line(("S" if ok else "F", *fields))
