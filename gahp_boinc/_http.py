"""A lean HTTP/1.1 client for plain-HTTP projects: kept-alive connections on asyncio streams.

httpx, with httpcore, h11 and anyio beneath it, spends about a millisecond of CPU on each
small request (URL and header models, the pool's bookkeeping, an event-driven parser, a
failed ``import sniffio`` whenever sniffio is not installed), and a tenth of a second of
imports at startup. A GAHP fetching a job's output makes two such requests, so that was
most of its CPU. This client writes a request in one piece and reads the reply with a few
stream calls. :mod:`gahp_boinc._rpc` uses it for ``http://`` URLs when no proxy is set in
the environment; TLS, proxies and a caller's own httpx client go through httpx.

Errors: :class:`HttpTimeout` (its ``kind`` named as httpx names it: ConnectTimeout,
WriteTimeout, ReadTimeout) and :class:`HttpTransportError`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from gahp_boinc._errors import BoincError

MAX_HEAD = 64 * 1024
"""The most a reply's status line and headers may take."""


class HttpTimeout(BoincError):
    """No connection, or no progress sending or reading, within the timeout."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class HttpTransportError(BoincError):
    """The connection failed, was reset or closed early, or the reply is not HTTP;
    ``retryable`` is false when retrying cannot help (a refused TLS certificate)."""

    retryable = True


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def usable(self) -> bool:
        """Still open, and the server has sent nothing since the last reply (a kept-alive
        connection the server closed has seen EOF)."""
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        self.writer.close()


class Reply:
    """A reply: status, headers (lower-case names) and a body read once, whole
    (:meth:`aread`, then :attr:`content`) or in pieces (:meth:`aiter_bytes`)."""

    def __init__(
        self,
        http: PlainHttp,
        key: tuple[str, int],
        conn: _Conn,
        status: int,
        reason: str,
        headers: dict[str, str],
        keep: bool,
        method: str,
    ) -> None:
        self.status_code, self.reason_phrase, self.headers = status, reason, headers
        self._http, self._key, self._conn, self._keep = http, key, conn, keep
        self.content = b""
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: int | None = None  # bytes still to read (None: until EOF or chunked)
        if method == "HEAD" or status in (204, 304):
            self._left, self._chunked = 0, False
        elif not self._chunked and length is not None:
            if not length.strip().isdigit():
                raise HttpTransportError(f"bad Content-Length: {length!r}")
            self._left = int(length)
        elif not self._chunked:
            self._keep = False  # the body ends when the server closes
        self._done = False

    async def aread(self) -> bytes:
        """The whole body (kept as :attr:`content`)."""
        if not self._chunked and self._left is not None:  # one read of Content-Length bytes
            try:
                async with asyncio.timeout(self._http.timeout):
                    self.content = await self._conn.reader.readexactly(self._left)
            except TimeoutError:
                self._keep = False
                raise HttpTimeout("ReadTimeout") from None
            except asyncio.IncompleteReadError:
                self._keep = False
                raise HttpTransportError("server closed the connection mid-reply") from None
            except BaseException:
                self._keep = False
                raise
            self._left, self._done = 0, True
            return self.content
        self.content = b"".join([chunk async for chunk in self.aiter_bytes(1 << 16)])
        return self.content

    async def aiter_bytes(self, size: int = 1 << 16) -> AsyncIterator[bytes]:
        """The body in pieces of at most ``size`` bytes (chunked bodies: per chunk)."""
        reader, timeout = self._conn.reader, self._http.timeout
        try:
            if self._chunked:
                while True:
                    async with asyncio.timeout(timeout):
                        line = await reader.readline()
                    try:
                        n = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise HttpTransportError(f"bad chunk size line: {line[:40]!r}") from None
                    if n == 0:
                        async with asyncio.timeout(timeout):
                            while (await reader.readline()).strip():  # trailers
                                pass
                        break
                    async with asyncio.timeout(timeout):
                        data = await reader.readexactly(n + 2)
                    yield data[:-2]
            elif self._left is not None:
                while self._left > 0:
                    async with asyncio.timeout(timeout):
                        data = await reader.read(min(size, self._left))
                    if not data:
                        raise HttpTransportError("server closed the connection mid-reply")
                    self._left -= len(data)
                    yield data
            else:
                while True:
                    async with asyncio.timeout(timeout):
                        data = await reader.read(size)
                    if not data:
                        break
                    yield data
        except TimeoutError:
            self._keep = False
            raise HttpTimeout("ReadTimeout") from None
        except asyncio.IncompleteReadError:
            self._keep = False
            raise HttpTransportError("server closed the connection mid-reply") from None
        except (OSError, asyncio.LimitOverrunError, ValueError) as exc:
            self._keep = False
            raise HttpTransportError(str(exc) or type(exc).__name__) from None
        except BaseException:
            self._keep = False
            raise
        self._done = True

    def release(self) -> None:
        """Give the connection back (fully read and reusable) or close it."""
        if self._done and self._keep:
            self._http._put(self._key, self._conn)
        else:
            self._conn.close()


class PlainHttp:
    """Kept-alive HTTP/1.1 connections (at most ``max_idle`` idle per server) for
    ``http://`` URLs. ``timeout`` bounds each read and write, ``connect_timeout`` each
    connection attempt. The caller bounds how many requests run at once."""

    def __init__(
        self, timeout: float, connect_timeout: float, user_agent: str, max_idle: int = 8
    ) -> None:
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.max_idle = max_idle
        self._agent = user_agent
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._targets: dict[str, tuple[tuple[str, int], str, str]] = {}

    def _target(self, url: str) -> tuple[tuple[str, int], str, str]:
        """((host, port), Host header, request target) of an http:// URL."""
        origin, sep, rest = url[7:].partition("/")
        known = self._targets.get(origin)
        if known is None:
            parts = urlsplit("http://" + origin)
            if parts.hostname is None:
                raise HttpTransportError(f"no host in {url!r}")
            known = ((parts.hostname, parts.port or 80), origin, "")
            if len(self._targets) < 64:
                self._targets[origin] = known
        return known[0], known[1], "/" + rest.split("#", 1)[0]

    async def _connect(self, key: tuple[str, int]) -> _Conn:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=MAX_HEAD)
        except TimeoutError:
            raise HttpTimeout("ConnectTimeout") from None
        except OSError as exc:
            raise HttpTransportError(str(exc) or "connection failed") from None
        return _Conn(reader, writer)

    def _put(self, key: tuple[str, int], conn: _Conn) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) < self.max_idle and conn.usable():
            idle.append(conn)
        else:
            conn.close()

    async def _send(
        self, method: str, url: str, body: bytes | None, content_type: str | None
    ) -> Reply:
        key, host, target = self._target(url)
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\n"
            f"Connection: keep-alive\r\nUser-Agent: {self._agent}\r\n"
        )
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n"
        if body is not None:
            head += f"Content-Length: {len(body)}\r\n"
        data = (head + "\r\n").encode("latin-1") + (body or b"")
        conn = await self._connect(key)
        try:
            try:
                conn.writer.write(data)
                if conn.writer.transport.get_write_buffer_size():
                    async with asyncio.timeout(self.timeout):
                        await conn.writer.drain()
            except TimeoutError:
                raise HttpTimeout("WriteTimeout") from None
            try:
                async with asyncio.timeout(self.timeout):
                    while True:
                        raw = await conn.reader.readuntil(b"\r\n\r\n")
                        status, reason, headers, keep = _parse_head(raw)
                        if not 100 <= status < 200 or status == 101:
                            break
            except TimeoutError:
                raise HttpTimeout("ReadTimeout") from None
            except asyncio.IncompleteReadError as exc:
                raise HttpTransportError(
                    "Server disconnected without sending a response."
                    if not exc.partial
                    else "server closed the connection mid-reply"
                ) from None
            except asyncio.LimitOverrunError:
                raise HttpTransportError("reply headers too long") from None
            except OSError as exc:
                raise HttpTransportError(str(exc) or type(exc).__name__) from None
            return Reply(self, key, conn, status, reason, headers, keep, method)
        except BaseException:
            conn.close()
            raise

    async def request(
        self, method: str, url: str, body: bytes | None = None, content_type: str | None = None
    ) -> Reply:
        """Send a request and read its whole reply (in :attr:`Reply.content`)."""
        reply = await self._send(method, url, body, content_type)
        try:
            await reply.aread()
        finally:
            reply.release()
        return reply

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str) -> AsyncIterator[Reply]:
        """Send a request; the reply's body is read by the caller, inside the block."""
        reply = await self._send(method, url, None, None)
        try:
            yield reply
        finally:
            reply.release()

    async def aclose(self) -> None:
        """Close the idle connections."""
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


def _parse_head(raw: bytes) -> tuple[int, str, dict[str, str], bool]:
    """(status, reason, headers, may keep the connection) of a reply's head."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise HttpTransportError(f"not an HTTP reply: {lines[0][:60]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpTransportError(f"bad header line: {line[:60]!r}")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    conn = headers.get("connection", "").lower()
    keep = "keep-alive" in conn if version == "HTTP/1.0" else "close" not in conn
    return int(code), reason, headers, keep
