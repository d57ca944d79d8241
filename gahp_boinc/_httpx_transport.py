"""httpx for what the lean client (:mod:`gahp_boinc._http`) leaves: TLS, proxies, large
uploads and a caller's own ``httpx.AsyncClient``. Imported when first needed: httpx and
its stack take a tenth of a second to import."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gahp_boinc._http import HttpTimeout, HttpTransportError
from gahp_boinc._rpc import MAX_CONNECTIONS, SHARDS, USER_AGENT, tls_verify


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
        headers={"User-Agent": USER_AGENT},
        transport=ShardedTransport(checked),
    )


async def send(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request through ``client``, its errors as :mod:`gahp_boinc._http`'s."""
    try:
        return await client.request(method, url, **kwargs)
    except httpx.TimeoutException as exc:
        raise HttpTimeout(type(exc).__name__) from exc
    except httpx.TransportError as exc:
        raise _transport_error(exc) from exc


@contextlib.asynccontextmanager
async def stream(client: httpx.AsyncClient, url: str) -> AsyncIterator[httpx.Response]:
    """A streamed GET through ``client``, its errors as :mod:`gahp_boinc._http`'s."""
    try:
        async with client.stream("GET", url) as resp:
            yield resp
    except httpx.TimeoutException as exc:
        raise HttpTimeout(type(exc).__name__) from exc
    except httpx.TransportError as exc:
        raise _transport_error(exc) from exc


def _transport_error(exc: httpx.TransportError) -> HttpTransportError:
    err = HttpTransportError(_transport_reason(exc))
    err.retryable = not _is_certificate_error(exc)
    return err


class ShardedTransport(httpx.AsyncBaseTransport):
    """``MAX_CONNECTIONS`` pooled connections as several small httpx pools, each request
    sent through the pool with the fewest requests in flight.

    httpcore's pool examines each of its connections, some of them with a poll() system
    call, for every request it starts and finishes (O(connections²) when some are idle):
    with 32 connections in one pool that was a third of the CPU time of a burst of pings.
    Small pools keep that cost flat whatever ``MAX_CONNECTIONS`` is.
    Every connection may stay open (with fewer kept alive, a burst closes and reopens the
    connections beyond them all the time).
    """

    def __init__(self, verify: bool | ssl.SSLContext = True, shards: int = SHARDS) -> None:
        per = max(1, MAX_CONNECTIONS // shards)
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
