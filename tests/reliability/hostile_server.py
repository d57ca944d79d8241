"""A malicious BOINC project for the tests: an HTTP server on a free loopback port whose
replies are huge, trickling, malformed or lying.

Each project URL names how its replies misbehave: ``server.url("trickle")`` is
``http://127.0.0.1:PORT/trickle/``, and every request under it (an RPC or a download)
gets that treatment. :data:`MALFORMED` lists the replies with bad framing, each of which
the old hand-written parser read as a successful ping.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

PING = b"<ping>\n<success>1</success>\n</ping>\n"
SMUGGLED_ERROR = (
    b"<ping><error><error_num>-1</error_num><error_msg>smuggled</error_msg></error></ping>"
)
ENTITY = (
    b'<?xml version="1.0"?>\n<!DOCTYPE ping [<!ENTITY ok "1">]>\n'
    b"<ping><success>&ok;</success></ping>\n"
)
MiB = 1 << 20


def _head(*lines: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


def _chunk(data: bytes, size: bytes | None = None, end: bytes = b"\r\n") -> bytes:
    return (size if size is not None else b"%x" % len(data)) + b"\r\n" + data + end


def _cl(body: bytes) -> bytes:
    return b"Content-Length: %d" % len(body)


TE = b"Transfer-Encoding: chunked"
MALFORMED: dict[str, bytes] = {
    # chunk sizes that are not bare hex digits
    "hex-prefix": _head(TE) + _chunk(PING, b"0x%x" % len(PING)) + b"0\r\n\r\n",
    "plus-sign": _head(TE) + _chunk(PING, b"+%x" % len(PING)) + b"0\r\n\r\n",
    # two bytes that are not CRLF after a chunk's data
    "no-crlf-after-chunk": _head(TE) + _chunk(PING, end=b"XX") + b"0\r\n\r\n",
    # a coding that merely contains "chunked"
    "xchunked": _head(b"Transfer-Encoding: xchunked") + _chunk(PING) + b"0\r\n\r\n",
    # both framings: which one a proxy in between believes is anyone's guess
    "content-length-and-chunked": _head(b"Content-Length: 5", TE) + _chunk(PING) + b"0\r\n\r\n",
    # a digit that is not ASCII: Latin-1 "²" (str.isdigit() says yes, int() says no)
    "superscript-content-length": _head(b"Content-Length: \xb2") + PING,
    # an XML entity declaration in the reply
    "entity-declaration": _head(_cl(ENTITY)) + ENTITY,
}


class HostileServer:
    """The server (a thread per connection); :attr:`connections` counts the connections
    accepted, :attr:`sent` the body bytes written, :attr:`huge` is the size of the huge
    replies (1 GiB)."""

    def __init__(self, huge: int = 1 << 30, trickle_every: float = 0.5) -> None:
        self.huge, self.trickle_every = huge, trickle_every
        self.connections = 0
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socks: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="hostile-server", daemon=True)

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/"

    def start(self) -> HostileServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for s in self._socks:
                _quietly(s.close)
        self._thread.join(5)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- serving ---------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._socks.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            buf = b""
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                path = head.split(b" ")[1].decode()
                mode = path.split("/")[1]
                download = "get_output" in path  # get_output.php, get_output2.php
                if not self._reply(conn, mode, download):
                    return
        except OSError:
            pass
        finally:
            with self._lock:
                self._socks.discard(conn)
            _quietly(conn.close)

    def _body(self, conn: socket.socket, size: int) -> None:
        block = b"\0" * MiB
        left = size
        while left > 0 and not self._stop.is_set():
            piece = block[: min(left, MiB)]
            conn.sendall(piece)
            left -= len(piece)
            with self._lock:
                self.sent += len(piece)

    def _reply(self, conn: socket.socket, mode: str, download: bool) -> bool:
        """Answer one request; False to close the connection."""
        ctype = b"Content-Type: " + (b"application/octet-stream" if download else b"text/xml")
        if mode == "ok":
            body = b"\0" * 1000 if download else PING
            conn.sendall(_head(ctype, _cl(body)) + body)
            return True
        if mode in MALFORMED:
            conn.sendall(MALFORMED[mode])
            return True
        if mode == "smuggle":
            # a reply shorter than what follows it: a second reply, unasked, rides behind it
            extra = _head(_cl(SMUGGLED_ERROR)) + SMUGGLED_ERROR
            conn.sendall(_head(ctype, _cl(PING)) + PING + extra)
            return True
        if mode == "longer-than-sent":  # Content-Length larger than the body, then close
            conn.sendall(_head(ctype, b"Content-Length: %d" % (len(PING) + 100)) + PING)
            return False
        if mode == "huge":  # 1 GiB announced by its Content-Length
            conn.sendall(_head(ctype, b"Content-Length: %d" % self.huge))
            self._body(conn, self.huge)
            return False
        if mode == "huge-chunk":  # one 1 GiB chunk
            conn.sendall(_head(ctype, TE) + b"%x\r\n" % self.huge)
            self._body(conn, self.huge)
            conn.sendall(b"\r\n0\r\n\r\n")
            return False
        if mode == "endless":  # no length: until the server closes, which it does not
            conn.sendall(_head(ctype, b"Connection: close"))
            self._body(conn, 1 << 62)
            return False
        if mode == "endless-trailers":  # a short body, then trailer fields without end
            conn.sendall(_head(ctype, TE) + _chunk(PING) + b"0\r\n")
            while not self._stop.is_set():
                conn.sendall(b"X-Pad: " + b"a" * 1000 + b"\r\n")
                with self._lock:
                    self.sent += 1009
            return False
        if mode == "endless-trailer":  # one trailer field without end
            conn.sendall(_head(ctype, TE) + _chunk(PING) + b"0\r\nX-Pad: ")
            while not self._stop.is_set():
                conn.sendall(b"a" * 65536)
                with self._lock:
                    self.sent += 65536
            return False
        if mode == "trickle":  # a one-byte chunk every trickle_every seconds
            conn.sendall(_head(ctype, TE))
            while not self._stop.wait(self.trickle_every):
                conn.sendall(b"1\r\n \r\n")
                with self._lock:
                    self.sent += 1
            return False
        raise AssertionError(f"no such mode {mode!r}")


def _quietly(fn: Callable[[], object]) -> None:
    with contextlib.suppress(OSError):
        fn()
