"""httpx for what the lean client (:mod:`gahp_boinc._http`) leaves: TLS, proxies, large
uploads and a caller's own ``httpx.AsyncClient``, as a
:class:`~gahp_boinc._transport.Transport` (:class:`HttpxTransport`). Imported when first
needed: httpx and its stack take a tenth of a second to import."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx

from gahp_boinc._http import (
    ERROR_BODY,
    MIN_RATE,
    READ_SIZE,
    HttpTimeout,
    HttpTransportError,
    read_body,
)
from gahp_boinc._transport import SHARDS, TOTAL_CONNECTIONS, USER_AGENT, Form, tls_verify

_IDENTITY = {"Accept-Encoding": "identity"}
"""Bodies are read raw (and bounded as they arrive), so none is asked for compressed."""


class _HideAuthStr(logging.Filter):
    """Masks the authenticator in the get_output.php URLs httpx logs (``auth_str=...``)."""

    _pattern = re.compile(r"(auth_str=)[^&\s\"]*")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "auth_str=" in message:
            record.msg, record.args = self._pattern.sub(r"\1***", message), None
        return True


_httpx_log = logging.getLogger("httpx")
if not any(isinstance(f, _HideAuthStr) for f in _httpx_log.filters):
    _httpx_log.addFilter(_HideAuthStr())


def make_client(
    timeout: float = 60.0, verify: bool | str | ssl.SSLContext = True
) -> httpx.AsyncClient:
    """The shared HTTP client: pooled connections, timeouts, no redirects for POSTs.

    ``verify``: True (the usual CAs), False (no check), a CA bundle file or directory,
    or an ``ssl.SSLContext``.
    """
    checked = tls_verify(verify)
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 15.0)),
        verify=checked,
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT, **_IDENTITY},
        transport=ShardedTransport(checked),
    )


class Streamed:
    """An httpx reply read as :class:`gahp_boinc._http.Reply` is: its raw body (never
    decompressed) in pieces of bounded size, the whole request within its deadline (the
    client's ``timeout``, longer by a second per :data:`~gahp_boinc._http.MIN_RATE` bytes
    received), errors as :mod:`gahp_boinc._http`'s."""

    def __init__(self, resp: httpx.Response, deadline: float) -> None:
        self.status_code = resp.status_code
        self.reason_phrase = resp.reason_phrase
        self.headers = {k.lower(): v for k, v in resp.headers.items()}
        self.content = b""
        length = self.headers.get("content-length", "")
        self.length = int(length) if length.isdigit() else None
        self._resp, self._deadline = resp, deadline

    async def aiter_bytes(self, size: int = READ_SIZE) -> AsyncGenerator[bytes, None]:
        raw = self._resp.aiter_raw()
        try:
            while True:
                try:
                    async with asyncio.timeout_at(self._deadline):
                        piece = await anext(raw)
                except StopAsyncIteration:
                    break
                self._deadline += len(piece) / MIN_RATE
                for i in range(0, len(piece), size):
                    yield piece[i : i + size]
        except TimeoutError:
            raise HttpTimeout("ReadTimeout") from None
        except httpx.TimeoutException as exc:
            raise HttpTimeout(type(exc).__name__) from exc
        except httpx.TransportError as exc:
            raise _transport_error(exc) from exc
        finally:
            await raw.aclose()  # type: ignore[attr-defined]  # (an async generator)

    async def aread(self, limit: int | None = None, truncate: bool = False) -> bytes:
        """The whole body, as :meth:`gahp_boinc._http.Reply.aread` reads it."""
        self.content = await read_body(self, limit, truncate)
        return self.content


async def _open(
    client: httpx.AsyncClient, method: str, url: str, timeout: float, kwargs: dict[str, Any]
) -> Streamed:
    deadline = asyncio.get_running_loop().time() + timeout
    headers = {**kwargs.pop("headers", {}), **_IDENTITY}
    try:
        async with asyncio.timeout_at(deadline):
            request = client.build_request(method, url, headers=headers, **kwargs)
            resp = await client.send(request, stream=True)
    except TimeoutError:
        raise HttpTimeout("ReadTimeout") from None
    except httpx.TimeoutException as exc:
        raise HttpTimeout(type(exc).__name__) from exc
    except httpx.TransportError as exc:
        raise _transport_error(exc) from exc
    return Streamed(resp, deadline)


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    timeout: float,
    limit: int | None = None,
    **kwargs: Any,
) -> Streamed:
    """One request through ``client``, read whole (in :attr:`Streamed.content`): a
    success's body up to ``limit`` bytes (:class:`~gahp_boinc._http.HttpTooLarge`
    beyond), any other's first :data:`~gahp_boinc._http.ERROR_BODY` bytes."""
    got = await _open(client, method, url, timeout, kwargs)
    try:
        if 200 <= got.status_code < 300:
            await got.aread(limit)
        else:
            await got.aread(ERROR_BODY, truncate=True)
    finally:
        await got._resp.aclose()
    return got


@contextlib.asynccontextmanager
async def _stream(
    client: httpx.AsyncClient, method: str, url: str, timeout: float, cookie: str | None = None
) -> AsyncIterator[Streamed]:
    """A streamed request through ``client`` (with a ``Cookie`` header when given), its
    errors as :mod:`gahp_boinc._http`'s."""
    extra: dict[str, Any] = {"headers": {"Cookie": cookie}} if cookie else {}
    got = await _open(client, method, url, timeout, extra)
    try:
        yield got
    finally:
        await got._resp.aclose()


def _transport_error(exc: httpx.TransportError) -> HttpTransportError:
    return HttpTransportError(_transport_reason(exc), retryable=not _is_certificate_error(exc))


class HttpxTransport:
    """A :class:`~gahp_boinc._transport.Transport` over an ``httpx.AsyncClient``: a form's
    files are streamed from open handles (never held in memory); a request ends within
    ``timeout`` seconds (see :class:`Streamed`)."""

    def __init__(self, client: httpx.AsyncClient, timeout: float) -> None:
        self.client, self.timeout = client, timeout

    async def send(
        self, method: str, url: str, form: Form | None = None, limit: int | None = None
    ) -> Streamed:
        if form is None:
            return await send(self.client, method, url, self.timeout, limit)
        if not form.files:
            content, ctype = form.encode()
            headers = {"Content-Type": ctype}
            return await send(
                self.client, method, url, self.timeout, limit, content=content, headers=headers
            )
        with contextlib.ExitStack() as handles:
            parts: list[tuple[str, Any]] = [("request", (None, form.xml.encode("utf-8")))]
            for i, (_, path) in enumerate(form.files):
                fh = handles.enter_context(open(path, "rb"))
                parts.append((f"file_{i}", (path.name, fh, "application/octet-stream")))
            return await send(self.client, method, url, self.timeout, limit, files=parts)

    def stream(
        self, method: str, url: str, cookie: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[Streamed]:
        return _stream(self.client, method, url, self.timeout, cookie)

    async def aclose(self) -> None:
        await self.client.aclose()


class ShardedTransport(httpx.AsyncBaseTransport):
    """``TOTAL_CONNECTIONS`` pooled connections (``MAX_CONNECTIONS`` per project, as
    :class:`gahp_boinc._http.Slots` admits requests) as several small httpx pools, each
    request sent through the pool with the fewest requests in flight.

    httpcore's pool examines each of its connections, some of them with a poll() system
    call, for every request it starts and finishes (O(connections²) when some are idle):
    with 32 connections in one pool that was a third of the CPU time of a burst of pings.
    Small pools keep that cost flat whatever ``TOTAL_CONNECTIONS`` is.
    Every connection may stay open (with fewer kept alive, a burst closes and reopens the
    connections beyond them all the time).
    """

    def __init__(self, verify: bool | ssl.SSLContext = True, shards: int = SHARDS) -> None:
        per = max(1, TOTAL_CONNECTIONS // shards)
        limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
        self._shards = [
            httpx.AsyncHTTPTransport(verify=verify, limits=limits) for _ in range(shards)
        ]
        self._busy = [0] * shards

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        busy = self._busy
        i = busy.index(min(busy))
        busy[i] += 1
        try:
            resp = await self._shards[i].handle_async_request(request)
        except BaseException:
            busy[i] -= 1
            raise
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_CountedStream(resp.stream, busy, i),  # type: ignore[arg-type]
            extensions=resp.extensions,
        )

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.aclose()


class _CountedStream(httpx.AsyncByteStream):
    """A response body that marks its shard one request less busy once closed."""

    def __init__(self, stream: httpx.AsyncByteStream, busy: list[int], index: int) -> None:
        self._stream, self._busy, self._index = stream, busy, index
        self._open = True

    async def __aiter__(self):
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            if self._open:
                self._open = False
                self._busy[self._index] -= 1


def _is_certificate_error(exc: BaseException) -> bool:
    """A TLS certificate that failed verification: retrying cannot help."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _transport_reason(exc: Exception) -> str:
    text = str(exc).strip()
    if text:
        return text
    if isinstance(exc, httpx.ConnectError):
        return "connection failed"
    if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError):
        return "connection reset or closed by the server"
    return type(exc).__name__
