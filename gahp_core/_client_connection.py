"""The client's side of a GAHP conversation, without I/O (sans-IO).

:class:`ClientConnection` is the mirror of :class:`~gahp_core.GahpConnection`: requests go
in and the bytes to write come out; the bytes the server wrote go in and its lines come
out, framed by the server's own :class:`~gahp_core.LineSplitter` (an escaped LF does not
end a line), with the response prefix removed and ``R`` notifications counted. Every line
is bounded (``max_line``); :func:`parse_results_head` bounds the count a ``RESULTS``
reply announces. It does no I/O and reads no clock: a client feeds it whatever it read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from gahp_core._connection import ENCODING, ERRORS
from gahp_core._errors import GahpError
from gahp_core._escaping import LineSplitter, join, split
from gahp_core._protocol import SUCCESS

CLIENT_MAX_LINE = 16 * 1024 * 1024
"""The longest line a client takes from a server by default (bytes, terminator excluded)."""
MAX_RESULTS = 10_000_000
"""The most result lines one ``RESULTS`` reply may announce."""


class BadServerLine(GahpError, ValueError):
    """The server wrote a line no GAHP server may write (too long, or without the prefix)."""


def parse_results_head(fields: list[str], limit: int = MAX_RESULTS) -> int:
    """The count a ``RESULTS`` reply announces (``["S", "<n>"]``); :class:`BadServerLine` if bad."""
    if len(fields) != 2 or fields[0] != SUCCESS:
        raise BadServerLine(f"bad RESULTS reply {fields!r}")
    text = fields[1]
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(limit)):
        raise BadServerLine(f"bad RESULTS count {text!r}")
    count = int(text)
    if count > limit:
        raise BadServerLine(f"RESULTS announces {count} lines (more than {limit})")
    return count


class ClientConnection:
    """GAHP client protocol state: requests in, bytes out; server bytes in, lines out.

    Give :meth:`receive_data` every chunk read from the server (``b""`` at the end of its
    output), then take lines with :meth:`next_line` (or :meth:`next_raw`) until it returns
    ``None``; :attr:`ended` then tells whether more can come. :meth:`request` gives the
    bytes of one request line.
    """

    def __init__(
        self, *, keep_r: bool = False, crlf: bool = True, max_line: int = CLIENT_MAX_LINE
    ) -> None:
        self.prefix = ""
        """The response prefix every line carries (set once RESPONSE_PREFIX is answered)."""
        self.keep_r = keep_r
        """Whether :meth:`next_line` returns ``R`` lines (else it counts and skips them)."""
        self.notifications = 0
        """``R`` lines skipped so far (counted as lines are taken, not as they arrive)."""
        self.eol = b"\r\n" if crlf else b"\n"
        """The terminator of request lines."""
        self.max_line = max_line
        self._splitter = LineSplitter(max_line)
        self._chunks: list[bytes] = []
        self._lines: list[str | None] = []  # framed and decoded; None: an over-long line
        self._pos = 0  # the next line to take
        self._dropped = 0  # None entries not yet taken
        self._size = 0
        self._eof = False

    # ---- requests -------------------------------------------------------------------------

    def request(self, args: Iterable[str]) -> bytes:
        """One request line: the arguments escaped and joined, with the terminator."""
        return join(args).encode(ENCODING, ERRORS) + self.eol

    # ---- input ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Add bytes the server wrote; ``b""`` means its output ended.

        Cheap (the bytes are framed when lines are taken), so that a reader thread hands
        them over without holding up the one taking lines."""
        if self._eof:
            return
        if data:
            self._chunks.append(data)
            self._size += len(data)
            return
        self._frame()
        self._eof = True
        tail = self._splitter.pending()
        if tail:
            self._add([tail])

    def _add(self, raw: Sequence[bytes | None]) -> None:
        texts = [None if b is None else b.decode(ENCODING, ERRORS) for b in raw]
        self._dropped += texts.count(None)
        self._size += sum(len(t) for t in texts if t is not None)
        self._lines += texts

    def _frame(self) -> None:
        """Cut the bytes received into lines (the server's framing: an escaped LF does not
        end a line; a line over ``max_line`` becomes ``None``) and decode them."""
        chunks = self._chunks
        if not chunks:
            return
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._size -= len(data)
        splitter = self._splitter
        if b"\\" in data or splitter.holding or len(data) > self.max_line:
            self._add(splitter.feed(data))
            return
        # No escape anywhere and no line too long: a line ends at each LF, and the whole
        # can be decoded at once (an LF byte is never part of a UTF-8 sequence): most
        # output, and much faster.
        end = data.rfind(b"\n") + 1
        if end:
            texts: list[str] = data[: end - 1].decode(ENCODING, ERRORS).split("\n")
            self._size += sum(map(len, texts))
            self._lines += texts
        if end < len(data):
            splitter.feed(data[end:])  # held until its end comes

    def _compact(self) -> None:
        """Forget the lines taken, now and then (amortised: a constant cost a line)."""
        if self._pos > 4096 and self._pos * 2 > len(self._lines):
            del self._lines[: self._pos]
            self._pos = 0

    @property
    def buffered(self) -> int:
        """What is received and not yet taken: the bytes not yet framed, the characters of
        the lines framed (part of a line may be held aside besides, up to ``max_line``)."""
        return self._size

    @property
    def waiting(self) -> bool:
        """Whether a complete line is ready to be taken."""
        self._frame()
        return self._pos < len(self._lines)

    @property
    def ended(self) -> bool:
        """Whether the output has ended and every line of it has been taken."""
        return self._eof and self._pos >= len(self._lines)

    def next_raw(self) -> str | None:
        """The next line as the server wrote it (terminator removed, ``R`` lines included),
        or ``None`` if no complete line is ready; :class:`BadServerLine` for an over-long one."""
        if self._pos >= len(self._lines):
            self._frame()
            if self._pos >= len(self._lines):
                self._lines.clear()
                self._pos = 0
                return None
        text = self._lines[self._pos]
        self._pos += 1
        self._compact()
        if text is None:
            self._dropped -= 1
            raise BadServerLine(f"a line longer than {self.max_line} bytes")
        self._size -= len(text)
        return text

    def next_lines(self, limit: int) -> list[str]:
        """Up to ``limit`` lines ready now, each as :meth:`next_line` gives it (in bulk); a
        bad line ends the lines returned, and raises on the next call."""
        self._frame()
        out: list[str] = []
        while len(out) < limit and self._pos < len(self._lines):
            if self.prefix or self._dropped:
                upcoming = self._lines[self._pos]
                if out and (upcoming is None or not upcoming.startswith(self.prefix)):
                    break  # the lines before a bad one first; the next call raises
                line = self.next_line()
                if line is None:
                    break
                out.append(line)
                continue
            start = self._pos
            self._pos = min(len(self._lines), start + limit - len(out))
            texts = cast("list[str]", self._lines[start : self._pos])  # no None: none dropped
            self._size -= sum(map(len, texts))
            if not self.keep_r and ("R" in texts or "R\r" in texts):
                kept = [t for t in texts if t.rstrip("\r") != "R"]
                self.notifications += len(texts) - len(kept)
                texts = kept
            out += texts
        self._compact()
        return out

    def next_line(self) -> str | None:
        """The next line with the prefix removed, or ``None`` if none is ready.

        ``R`` lines are counted (:attr:`notifications`) and skipped unless :attr:`keep_r`;
        a line without the prefix raises :class:`BadServerLine`.
        """
        while True:
            text = self.next_raw()
            if text is None:
                return None
            if self.prefix:
                if not text.startswith(self.prefix):
                    raise BadServerLine(f"line without prefix {self.prefix!r}: {text[:200]!r}")
                text = text[len(self.prefix) :]
            if not self.keep_r and text.rstrip("\r") == "R":
                self.notifications += 1
                continue
            return text

    def next_fields(self) -> list[str] | None:
        """The next line (as :meth:`next_line`) split into unescaped fields."""
        text = self.next_line()
        return None if text is None else split(text.rstrip("\r"))
