"""The transport :class:`gahp_boinc._rpc.BoincRpc` makes for itself: the lean client for
plain HTTP, httpx for the rest."""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from gahp_boinc._http import PlainHttp
from gahp_boinc._transport import (
    MAX_BYTES_PER_UPLOAD,
    USER_AGENT,
    Form,
    Reply,
    Transport,
    tls_verify,
)

if TYPE_CHECKING:
    import ssl

    import httpx

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
"""With one of these set, plain-HTTP requests go through httpx, which honours them."""


def make_client(
    timeout: float = 60.0, verify: bool | str | ssl.SSLContext = True
) -> httpx.AsyncClient:
    """An httpx client as :class:`RoutedTransport` makes its own (pooled connections,
    timeouts, no redirects for POSTs). httpx is imported here, when first needed: it and
    its stack take a tenth of a second to import."""
    from gahp_boinc._httpx_transport import make_client as make

    return make(timeout, verify)


class RoutedTransport:
    """A :class:`~gahp_boinc._transport.Transport` sending each request through the lean
    client (:class:`~gahp_boinc._http.PlainHttp`) when it can (an ``http://`` URL of
    printable ASCII, no proxy in the environment, a form of at most
    :data:`~gahp_boinc._transport.MAX_BYTES_PER_UPLOAD` bytes of files), else through
    httpx: ``client`` when given (then for every request), else one made when first
    needed with ``verify`` (checked here: a bad CA bundle fails at once)."""

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        timeout: float = 60.0,
        verify: bool | str | ssl.SSLContext = True,
    ) -> None:
        self._client = client
        self._timeout = timeout
        self._verify = tls_verify(verify)
        self._plain: PlainHttp | None = None
        if client is None and not any(os.environ.get(v) for v in PROXY_VARIABLES):
            self._plain = PlainHttp(timeout, min(timeout, 15.0), USER_AGENT)
        self._httpx: Transport | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The httpx client (made on first use when none was given)."""
        if self._client is None:
            self._client = make_client(self._timeout, self._verify)
        return self._client

    def uses_lean_client(self, url: str, upload_bytes: int = 0) -> bool:
        """Whether a request to ``url`` (with that many bytes of files) goes through the
        lean client."""
        return (
            self._plain is not None
            and url.startswith("http://")
            and url.isascii()
            and url.isprintable()
            and " " not in url
            and upload_bytes <= MAX_BYTES_PER_UPLOAD
        )

    def _route(self, url: str, form: Form | None = None) -> Transport:
        size = form.size() if form is not None and form.files else 0
        if self._plain is not None and self.uses_lean_client(url, size):
            return self._plain
        if self._httpx is None:
            from gahp_boinc._httpx_transport import HttpxTransport

            self._httpx = HttpxTransport(self.client, self._timeout)
        return self._httpx

    async def send(
        self, method: str, url: str, form: Form | None = None, limit: int | None = None
    ) -> Reply:
        return await self._route(url, form).send(method, url, form, limit)

    def stream(
        self, method: str, url: str, cookie: str | None = None
    ) -> AbstractAsyncContextManager[Reply]:
        return self._route(url).stream(method, url, cookie)

    async def aclose(self) -> None:
        if self._plain is not None:
            await self._plain.aclose()
        if self._client is not None:
            await self._client.aclose()
