"""A lean HTTP/1.1 client for plain-HTTP projects: kept-alive connections on asyncio streams.

httpx, with httpcore, h11 and anyio beneath it, spends about a millisecond of CPU on each
small request (URL and header models, the pool's bookkeeping, an event-driven parser, a
failed ``import sniffio`` whenever sniffio is not installed), and a tenth of a second of
imports at startup. A GAHP fetching a job's output makes two such requests, so that was
most of its CPU. This client writes a request in one piece and feeds the reply, as it
arrives, to httptools (llhttp, Node.js's parser), which frames it. It is one
:class:`~gahp_boinc._transport.Transport`; :class:`gahp_boinc._route.RoutedTransport`
uses it for ``http://`` URLs when no proxy is set in the environment; TLS, proxies and a
caller's own httpx client go through httpx.

Bounded against a hostile server: a reply's head is at most :data:`MAX_HEAD` bytes, its
body is read in pieces of at most :data:`READ_SIZE` bytes whatever its framing (a caller
reading it whole gives a size limit), and a request ends within ``timeout`` seconds plus
one second per :data:`MIN_RATE` bytes of body received. A connection is reused only when
its reply was framed unambiguously, read to its end, and nothing followed it.

Errors: :class:`HttpTimeout` (its ``kind`` named as httpx names it: ConnectTimeout,
WriteTimeout, ReadTimeout), :class:`HttpTransportError` and :class:`HttpTooLarge`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httptools

from gahp_boinc._errors import BoincError

if TYPE_CHECKING:
    from gahp_boinc._transport import Form

MAX_HEAD = 64 * 1024
"""The most a reply's status line and headers may take."""
READ_SIZE = 64 * 1024
"""The most read from a connection at once (so the largest piece of a body handed on)."""
MIN_RATE = 16 * 1024
"""Bytes per second a reply's body must keep up: a request's deadline (``timeout``) grows
by one second for each such amount received, so large bodies may take longer, trickles not."""
ERROR_BODY = 4096
"""The most read of the body of a reply that is not a success (the rest is not read)."""


class HttpTimeout(BoincError):
    """No connection, or no complete reply, within the request's deadline."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class HttpTransportError(BoincError):
    """The connection failed, was reset or closed early, or the reply is not HTTP;
    ``retryable`` is false when retrying cannot help (a refused TLS certificate)."""

    retryable = True

    def __init__(self, reason: str, *, retryable: bool | None = None) -> None:
        super().__init__(reason)
        if retryable is not None:
            self.retryable = retryable


class HttpTooLarge(HttpTransportError):
    """A reply larger than the caller's limit (by its Content-Length or as read)."""

    retryable = False


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def usable(self) -> bool:
        """Still open, and the server has sent nothing since the last reply (a kept-alive
        connection the server closed has seen EOF; bytes it sent unasked are buffered)."""
        return not (
            self.writer.is_closing()
            or self.reader.at_eof()
            or getattr(self.reader, "_buffer", None)
        )

    def close(self) -> None:
        self.writer.close()


class _Events:
    """What httptools reports of one reply (its callbacks)."""

    __slots__ = (
        "parser",
        "status",
        "reason",
        "headers",
        "head_done",
        "keep",
        "body",
        "done",
        "extra",
    )

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.reason = b""
        self.headers: dict[str, str] = {}
        self.head_done = self.keep = self.done = self.extra = False
        self.body: list[bytes] = []

    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True  # another reply follows, unasked: ignored, the connection closed

    def on_status(self, reason: bytes) -> None:
        if not self.extra:
            self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.extra or self.head_done:  # trailers are not kept
            return
        key, text = name.decode("latin-1").lower(), value.decode("latin-1").strip()
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        if not self.extra:
            self.head_done = True
            self.status = self.parser.get_status_code()
            self.keep = self.parser.should_keep_alive()  # (llhttp forgets it at the end)

    def on_body(self, data: bytes) -> None:
        if not self.extra:
            self.body.append(data)

    def on_message_complete(self) -> None:
        if self.extra:
            return
        if 100 <= self.status < 200:  # an interim reply: the real one follows
            self.reason, self.headers, self.head_done = b"", {}, False
            return
        self.done = True

    def feed(self, data: bytes) -> None:
        """Parse ``data``; bytes after the reply that are not one are its end too."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if not self.done:
                raise
            self.extra = True


def _framing_error(exc: Exception, head: bool) -> HttpTransportError:
    """The transport error for a reply httptools refuses."""
    text = str(exc) or type(exc).__name__
    if "Content-Length" in text:
        return HttpTransportError(f"bad Content-Length ({text})")
    if head:
        return HttpTransportError(f"not an HTTP reply ({text})")
    return HttpTransportError(f"malformed reply body ({text})")


class Reply:
    """A reply: status, headers (lower-case names) and a body read once, whole
    (:meth:`aread`, then :attr:`content`) or in pieces (:meth:`aiter_bytes`)."""

    def __init__(
        self,
        http: PlainHttp,
        key: tuple[str, int],
        conn: _Conn,
        events: _Events,
        deadline: float,
    ) -> None:
        headers = events.headers
        self.status_code = events.status
        self.reason_phrase = events.reason.decode("latin-1").strip()
        self.headers = headers
        self.content = b""
        self._http, self._key, self._conn, self._events = http, key, conn, events
        self._deadline = deadline
        self._keep = events.keep
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        self.length: int | None = None
        """The body's Content-Length, when it has one."""
        if coding is not None:
            if coding.lower() != "chunked":
                raise HttpTransportError(f"unsupported Transfer-Encoding: {coding[:40]!r}")
            if length is not None:  # llhttp refuses this too: ambiguous framing
                raise HttpTransportError("both Content-Length and chunked framing")
        elif length is not None:
            if not length.isdigit():  # llhttp checked it; kept for clarity
                raise HttpTransportError(f"bad Content-Length: {length[:40]!r}")
            self.length = int(length)
        elif not events.done:
            self._keep = False  # the body ends when the server closes
        self._close_delimited = coding is None and length is None
        self._framing = 0  # bytes read since the last that carried body
        self._done = False

    async def _more(self) -> bool:
        """Read what has arrived (at most :data:`READ_SIZE` bytes) into the parser; False at
        the end of the connection. Only body bytes extend the deadline, and at most
        :data:`MAX_HEAD` bytes in a row may carry none (chunk headers, trailers)."""
        async with asyncio.timeout_at(self._deadline):
            data = await self._conn.reader.read(READ_SIZE)
        if not data:
            return False
        events = self._events
        events.feed(data)
        body = sum(map(len, events.body)) if events.body else 0
        if body:
            self._deadline += body / MIN_RATE
            self._framing = 0
        else:
            self._framing += len(data)
            if self._framing > MAX_HEAD:
                raise HttpTransportError("reply framing too long (chunk headers or trailers)")
        return True

    async def aiter_bytes(self, size: int = READ_SIZE) -> AsyncGenerator[bytes, None]:
        """The body in pieces of at most ``size`` bytes, whatever its framing."""
        events = self._events
        try:
            while True:
                if events.body:
                    pieces, events.body = events.body, []
                    for piece in pieces:
                        if len(piece) <= size:
                            yield piece
                        else:
                            for i in range(0, len(piece), size):
                                yield piece[i : i + size]
                if events.done:
                    break
                if not await self._more():
                    if self._close_delimited:
                        break
                    raise HttpTransportError("server closed the connection mid-reply")
        except TimeoutError:
            self._keep = False
            raise HttpTimeout("ReadTimeout") from None
        except httptools.HttpParserError as exc:
            self._keep = False
            raise _framing_error(exc, False) from None
        except OSError as exc:
            self._keep = False
            raise HttpTransportError(str(exc) or type(exc).__name__) from None
        except BaseException:
            self._keep = False
            raise
        self._done = True

    async def aread(self, limit: int | None = None, truncate: bool = False) -> bytes:
        """The whole body (kept as :attr:`content`). Beyond ``limit`` bytes: :class:`HttpTooLarge`
        (by the Content-Length before any is read), or with ``truncate`` its first ``limit``
        bytes (the rest left unread, and the connection closed)."""
        try:
            self.content = await read_body(self, limit, truncate)
        finally:
            if not self._done:
                self._keep = False
        return self.content

    def release(self) -> None:
        """Give the connection back (fully read, nothing after it, reusable) or close it."""
        if self._done and self._keep and not self._events.extra:
            self._http._put(self._key, self._conn)
        else:
            self._conn.close()


class PlainHttp:
    """Kept-alive HTTP/1.1 connections (at most ``max_idle`` idle per server) for
    ``http://`` URLs. A request (connecting, sending, its whole reply) ends within
    ``timeout`` seconds (see :data:`MIN_RATE`), a connection attempt within
    ``connect_timeout``. The caller bounds how many requests run at once."""

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

    async def _connect(self, key: tuple[str, int], deadline: float) -> _Conn:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()
        until = min(deadline, asyncio.get_running_loop().time() + self.connect_timeout)
        try:
            async with asyncio.timeout_at(until):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=READ_SIZE)
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
        self,
        method: str,
        url: str,
        body: bytes | None,
        content_type: str | None,
        cookie: str | None = None,
    ) -> Reply:
        deadline = asyncio.get_running_loop().time() + self.timeout
        key, host, target = self._target(url)
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\n"
            f"Connection: keep-alive\r\nUser-Agent: {self._agent}\r\n"
        )
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n"
        if cookie is not None:
            head += f"Cookie: {cookie}\r\n"
        if body is not None:
            head += f"Content-Length: {len(body)}\r\n"
        data = (head + "\r\n").encode("latin-1") + (body or b"")
        conn = await self._connect(key, deadline)
        kind = "WriteTimeout"
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    conn.writer.write(data)
                    if conn.writer.transport.get_write_buffer_size():
                        await conn.writer.drain()
                    kind = "ReadTimeout"
                    events = _Events()
                    seen = 0
                    while not events.head_done:
                        data = await conn.reader.read(READ_SIZE)
                        if not data:
                            raise HttpTransportError(
                                "Server disconnected without sending a response."
                                if not seen
                                else "server closed the connection mid-reply"
                            )
                        seen += len(data)
                        events.feed(data)
                        if not events.head_done and seen > MAX_HEAD:
                            raise HttpTransportError("reply headers too long")
            except TimeoutError:
                raise HttpTimeout(kind) from None
            except httptools.HttpParserError as exc:
                raise _framing_error(exc, not events.head_done) from None
            except OSError as exc:
                raise HttpTransportError(str(exc) or type(exc).__name__) from None
            return Reply(self, key, conn, events, deadline)
        except BaseException:
            conn.close()
            raise

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        content_type: str | None = None,
        limit: int | None = None,
    ) -> Reply:
        """Send a request and read its whole reply (in :attr:`Reply.content`): a success's
        body up to ``limit`` bytes (:class:`HttpTooLarge` beyond), any other's first
        :data:`ERROR_BODY` bytes."""
        reply = await self._send(method, url, body, content_type)
        try:
            if 200 <= reply.status_code < 300:
                await reply.aread(limit)
            else:
                await reply.aread(ERROR_BODY, truncate=True)
        finally:
            reply.release()
        return reply

    async def send(
        self, method: str, url: str, form: Form | None = None, limit: int | None = None
    ) -> Reply:
        """:meth:`request` with ``form``'s body (its files read into it): the
        :class:`~gahp_boinc._transport.Transport` way."""
        if form is None:
            return await self.request(method, url, limit=limit)
        body, content_type = form.encode()
        return await self.request(method, url, body, content_type, limit=limit)

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str, cookie: str | None = None
    ) -> AsyncIterator[Reply]:
        """Send a request (with a ``Cookie`` header when given); the reply's body is read
        by the caller, inside the block."""
        reply = await self._send(method, url, None, None, cookie)
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


async def read_body(reply: _Body, limit: int | None, truncate: bool) -> bytes:
    """``reply``'s whole body as :meth:`Reply.aread` reads it (either client's reply)."""
    if limit is not None and not truncate and reply.length is not None and reply.length > limit:
        raise HttpTooLarge(f"{reply.length} bytes announced, the limit is {limit}")
    parts: list[bytes] = []
    got = 0
    async with contextlib.aclosing(reply.aiter_bytes()) as pieces:
        async for piece in pieces:
            got += len(piece)
            if limit is not None and got > limit:
                if not truncate:
                    raise HttpTooLarge(f"more than {limit} bytes")
                parts.append(piece[: len(piece) - (got - limit)])
                break
            parts.append(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Body(Protocol):
    """What :func:`read_body` needs of a reply."""

    length: int | None

    def aiter_bytes(self, size: int = ...) -> AsyncGenerator[bytes, None]: ...


def origin(url: str) -> str:
    """``scheme://host[:port]`` of an URL."""
    start = url.find("//") + 2
    end = url.find("/", start)
    return url if end < 0 else url[:end]


class Slots:
    """Request slots: at most ``per_origin`` requests at once to one server (project), and
    ``total`` to all, so that a slow server holds only its own."""

    def __init__(self, per_origin: int, total: int) -> None:
        self.per_origin = per_origin
        self.total = asyncio.Semaphore(total)
        self.origins: dict[str, list[Any]] = {}  # origin -> [its semaphore, requests]

    def hold(self, url: str) -> _Slot:
        """``async with slots.hold(url):`` a slot for a request to ``url``."""
        return _Slot(self, origin(url))


class _Slot:
    __slots__ = ("slots", "key")

    def __init__(self, slots: Slots, key: str) -> None:
        self.slots, self.key = slots, key

    async def __aenter__(self) -> None:
        slots = self.slots
        entry = slots.origins.get(self.key)
        if entry is None:
            entry = slots.origins[self.key] = [asyncio.Semaphore(slots.per_origin), 0]
        entry[1] += 1
        try:
            await entry[0].acquire()
            try:
                await slots.total.acquire()
            except BaseException:
                entry[0].release()
                raise
        except BaseException:
            self._leave(entry)
            raise

    async def __aexit__(self, *exc: object) -> None:
        entry = self.slots.origins[self.key]
        self.slots.total.release()
        entry[0].release()
        self._leave(entry)

    def _leave(self, entry: list[Any]) -> None:
        entry[1] -= 1
        if not entry[1]:
            del self.slots.origins[self.key]
