"""The HTTP seam under the BOINC RPCs: what :mod:`gahp_boinc._rpc` asks of a transport.

A :class:`Transport` sends a request (a :class:`Form` POST, or a GET) and gives back a
:class:`Reply`, read whole, or opens a streamed GET whose body the caller reads. Two
implement it: the lean client for plain HTTP (:class:`gahp_boinc._http.PlainHttp`) and
httpx (:class:`gahp_boinc._httpx_transport.HttpxTransport`) for TLS, proxies and large
uploads; :class:`gahp_boinc._route.RoutedTransport` picks one per request. Tests give
:class:`gahp_boinc._rpc.BoincRpc` a transport of their own.

Errors a transport raises: :class:`~gahp_boinc._http.HttpTimeout`,
:class:`~gahp_boinc._http.HttpTransportError`, :class:`~gahp_boinc._http.HttpTooLarge`
(and :class:`OSError` for a file of a form that cannot be read). The retry policy and the
HTTP status codes are the caller's.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    import ssl

USER_AGENT = "gahp-boinc (BOINC Condor adapter)"
MAX_CONNECTIONS = 8
"""Concurrent HTTP requests to one project, over every command in flight.

Each kept-alive connection holds one of an Apache prefork server's children (BOINC's
usual mod_php setup) between requests; a burst that opens more connections than the
server has spare children waits while it forks more (at first one a second)."""
TOTAL_CONNECTIONS = 4 * MAX_CONNECTIONS
"""Concurrent HTTP requests to all projects: a slow project holds only its own
``MAX_CONNECTIONS`` slots, the others keep theirs."""
SHARDS = 2
"""httpx connection pools the connections are spread over (see
:class:`gahp_boinc._httpx_transport.ShardedTransport`)."""
MAX_BYTES_PER_UPLOAD = 6 * 1024 * 1024
"""Stay under PHP's default post_max_size (8 MB) with room for the request part; a form
with more is streamed from its files (by httpx), never held in memory."""


class Reply(Protocol):
    """A reply: status, headers (lower-case names), and a body read once, whole
    (:meth:`aread`, then :attr:`content`; a transport's ``send`` has done so) or in
    pieces (:meth:`aiter_bytes`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes:
        """The body, once read whole."""
        ...

    @property
    def length(self) -> int | None:
        """The body's Content-Length, when it has one."""
        ...

    def aiter_bytes(self, size: int = ...) -> AsyncGenerator[bytes, None]: ...

    async def aread(self, limit: int | None = None, truncate: bool = False) -> bytes: ...


@attrs.frozen
class Form:
    """A BOINC RPC's multipart/form-data request: the XML request as part ``request`` and
    the files (physical name, local path) as parts ``file_0``, ``file_1``..."""

    xml: str
    files: tuple[tuple[str, Path], ...] = ()

    def size(self) -> int:
        """The files' total size (0 when one cannot be read: it fails when sent)."""
        try:
            return sum(path.stat().st_size for _, path in self.files)
        except OSError:
            return 0

    def encode(self) -> tuple[bytes, str]:
        """The whole body (the files read into it) and its content type.

        The parts httpx's multipart encoder makes, built at once: that encoder streams a
        body in many small chunks, one socket write each, which made half the CPU time
        of a burst of small RPCs."""
        boundary = os.urandom(16).hex()
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n'.encode(),
            self.xml.encode("utf-8"),
            b"\r\n",
        ]
        for i, (_, path) in enumerate(self.files):
            name = path.name.replace("\\", "\\\\").replace('"', "%22")
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="file_{i}"; '
                f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
            )
            parts += [path.read_bytes(), b"\r\n"]
        parts.append(f"--{boundary}--\r\n".encode())
        return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Transport(Protocol):
    """Sends requests; bounds each (connecting, sending, reading) by its own timeout."""

    async def send(
        self, method: str, url: str, form: Form | None = None, limit: int | None = None
    ) -> Reply:
        """Send ``form`` (POST) or nothing (GET) and read the whole reply: a success's
        body up to ``limit`` bytes (:class:`~gahp_boinc._http.HttpTooLarge` beyond), any
        other's first :data:`~gahp_boinc._http.ERROR_BODY` bytes."""
        ...

    def stream(
        self, method: str, url: str, cookie: str | None = None
    ) -> AbstractAsyncContextManager[Reply]:
        """Send a bodiless request (with a ``Cookie`` header when given); the reply's body
        is read by the caller, inside the block."""
        ...

    async def aclose(self) -> None:
        """Close every pooled connection."""
        ...


def tls_verify(verify: bool | str | ssl.SSLContext) -> bool | ssl.SSLContext:
    """httpx's ``verify`` for a CA bundle path: an SSL context trusting the certificates of
    that file (or directory), as httpx made of a path itself before deprecating it."""
    if not isinstance(verify, str):
        return verify
    import ssl

    if os.path.isdir(verify):
        return ssl.create_default_context(capath=verify)
    return ssl.create_default_context(cafile=verify)
