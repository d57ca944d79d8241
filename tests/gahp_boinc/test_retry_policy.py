"""BoincRpc's retry policy, over a scripted stand-in for the lean client (no network):
what is retried, how often, how long it waits, and what is sent once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gahp_boinc import Project, RpcError
from gahp_boinc._http import (  # private: unit test of the HTTP transport
    HttpTimeout,
    HttpTransportError,
)
from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer

PROJECT = Project("http://127.0.0.1:1/p/", "auth")


class _Reply:
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self.reason_phrase = "Reason"
        self.headers = headers or {}
        self.content = b"<ping><success/></ping>" if status == 200 else b"busy"


class _Script:
    """Answers requests with the given replies or exceptions, in turn."""

    def __init__(self, *answers: _Reply | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, bytes | None]] = []

    async def request(self, method: str, url: str, body=None, ctype=None, limit=None) -> _Reply:
        self.requests.append((method, body))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _refused() -> HttpTransportError:
    err = HttpTransportError("certificate refused")
    err.retryable = False
    return err


def _post(script: _Script, sleeps: list[float], **kwargs) -> bytes:
    rpc = BoincRpc(max_tries=kwargs.pop("max_tries", 5), deadline=kwargs.pop("deadline", 240))
    rpc.plain = script  # type: ignore[assignment]

    async def no_sleep(delay: float) -> None:
        sleeps.append(delay)

    async def main() -> bytes:
        real_sleep = asyncio.sleep
        asyncio.sleep = no_sleep  # type: ignore[assignment]
        try:
            return await rpc._post(PROJECT, "submit_rpc_handler.php", "ping", "<ping/>", **kwargs)
        finally:
            asyncio.sleep = real_sleep

    return asyncio.run(main())


def test_transient_failures_are_retried_with_growing_waits() -> None:
    sleeps: list[float] = []
    script = _Script(_Reply(503), HttpTimeout("read"), HttpTransportError("reset"), _Reply(200))
    assert _post(script, sleeps) == b"<ping><success/></ping>"
    assert len(script.requests) == 4 and len(sleeps) == 3
    assert 0.25 <= sleeps[0] <= 0.75 and 0.5 <= sleeps[1] <= 1.5 and 1 <= sleeps[2] <= 3


def test_retry_after_is_a_lower_bound_of_the_wait() -> None:
    sleeps: list[float] = []
    _post(_Script(_Reply(503, {"retry-after": "7"}), _Reply(200)), sleeps)
    assert sleeps == [7.0]


@pytest.mark.parametrize(
    ("answers", "kwargs", "tries", "match"),
    [
        ([_Reply(503)] * 5, {"max_tries": 3}, 3, "HTTP 503"),
        ([_Reply(503, {"retry-after": "100"})] * 5, {"deadline": 50}, 1, "HTTP 503"),
        ([_Reply(503)] * 5, {"idempotent": False}, 1, "HTTP 503"),
        ([HttpTimeout("connect")] * 5, {"idempotent": False}, 1, "no reply .* in time"),
        ([_Reply(500)] * 5, {}, 1, "HTTP 500"),
        ([_Reply(302, {"location": "http://x/"})] * 5, {}, 1, "redirects to http://x/"),
        ([_refused()] * 5, {}, 1, "cannot reach .* certificate refused"),
    ],
)
def test_what_is_not_retried_or_no_longer(answers, kwargs, tries, match) -> None:
    sleeps: list[float] = []
    script = _Script(*answers)
    with pytest.raises(RpcError, match=match):
        _post(script, sleeps, **kwargs)
    assert len(script.requests) == tries and len(sleeps) == tries - 1


def test_an_unreadable_input_file_fails_at_once(tmp_path: Path) -> None:
    sleeps: list[float] = []
    script = _Script(_Reply(200))
    with pytest.raises(RpcError, match="cannot read input file"):
        _post(script, sleeps, files=[("in", tmp_path / "absent")])
    assert script.requests == [] and sleeps == []


def test_files_and_a_get_reach_the_lean_client(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_bytes(b"file contents")
    script = _Script(_Reply(200), _Reply(200))
    _post(script, [], files=[("in", tmp_path / "in.txt")])
    _post(script, [], method="GET")
    (post, body), (get, no_body) = script.requests
    assert post == "POST" and b"file contents" in body and b"<ping/>" in body
    assert get == "GET" and no_body is None


def test_an_rpc_and_its_retries_end_within_the_deadline() -> None:
    """Whatever each request's own timeout, the RPC gives up at its deadline."""

    class _Hang(_Script):
        async def request(self, method: str, url: str, body=None, ctype=None, limit=None):
            await asyncio.Event().wait()

    rpc = BoincRpc(deadline=0.5)
    rpc.plain = _Hang()  # type: ignore[assignment]

    async def main() -> None:
        await asyncio.wait_for(rpc._post(PROJECT, "submit_rpc_handler.php", "ping", "<ping/>"), 30)

    with pytest.raises(RpcError, match="within the deadline"):
        asyncio.run(main())
