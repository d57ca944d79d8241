"""An in-memory BOINC transport for tests: give it to ``BoincRpc(transport=...)``.

:class:`FakeTransport` implements ``gahp_boinc._transport.Transport`` without a network:
each request (a form POST, a GET, or a streamed GET) is recorded in :attr:`requests` and
answered by the next of the scripted answers: a :class:`FakeReply` (status, headers,
body), an exception to raise (``HttpTimeout``, ``HttpTransportError``...), or an
awaitable-returning callable ``(FakeRequest) -> FakeReply`` for a reply that depends on the
request or never comes. With no answer left it fails the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs

from gahp_boinc._transport import Form  # private: unit test of the transport


@attrs.define
class FakeReply:
    """A reply as a transport gives it (body whole, headers with lower-case names)."""

    status_code: int = 200
    content: bytes = b""
    headers: dict[str, str] = attrs.field(factory=dict)
    reason_phrase: str = "Reason"

    @property
    def length(self) -> int | None:
        return len(self.content)

    async def aiter_bytes(self, size: int = 65536) -> AsyncGenerator[bytes, None]:
        for i in range(0, len(self.content), size):
            yield self.content[i : i + size]

    async def aread(self, limit: int | None = None, truncate: bool = False) -> bytes:
        return self.content if limit is None else self.content[:limit]


@attrs.frozen
class FakeRequest:
    """A request the transport was given: method, URL, the form (None for a GET) and the
    cookie of a streamed GET."""

    method: str
    url: str
    form: Form | None = None
    cookie: str | None = None

    @property
    def body(self) -> bytes | None:
        """The form as it would be sent (its files read), None for a GET."""
        return self.form.encode()[0] if self.form is not None else None

    @property
    def files(self) -> tuple[tuple[str, Path], ...]:
        return self.form.files if self.form is not None else ()


Answer = FakeReply | BaseException | Callable[[FakeRequest], Awaitable[FakeReply]]


class FakeTransport:
    """Answers requests with the scripted answers, in turn (see the module's docstring)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[FakeRequest] = []
        self.closed = False

    async def _answer(self, request: FakeRequest) -> FakeReply:
        self.requests.append(request)
        assert self.answers, f"no answer left for {request.method} {request.url}"
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return await answer(request)
        return answer

    async def send(
        self, method: str, url: str, form: Form | None = None, limit: int | None = None
    ) -> FakeReply:
        if form is not None:
            form.encode()  # as a real transport, it reads the files (OSError if it cannot)
        return await self._answer(FakeRequest(method, url, form))

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str, cookie: str | None = None
    ) -> AsyncIterator[FakeReply]:
        yield await self._answer(FakeRequest(method, url, cookie=cookie))

    async def aclose(self) -> None:
        self.closed = True
