"""BoincRpc's retry policy, over the in-memory transport (no network): what is retried, how
often, how long it waits, and what is sent once, seen through the RPCs themselves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_transport import FakeReply, FakeRequest, FakeTransport

from gahp_boinc import Project, RpcError
from gahp_boinc._http import (  # private: unit test of the HTTP transport
    HttpTimeout,
    HttpTransportError,
)
from gahp_boinc._retry import RetryPolicy  # private: unit test of the retry policy
from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer

PROJECT = Project("http://127.0.0.1:1/p/", "auth")
PONG = b"<ping><success>1</success></ping>"


def _ok(body: bytes = PONG) -> FakeReply:
    return FakeReply(200, body)


def _busy(status: int = 503, **headers: str) -> FakeReply:
    return FakeReply(status, b"busy", {k.replace("_", "-"): v for k, v in headers.items()})


def _call(
    transport: FakeTransport,
    sleeps: list[float],
    rpc_call: Callable[[BoincRpc], Awaitable[Any]] = lambda rpc: rpc.ping(PROJECT),
    **policy: Any,
) -> Any:
    async def no_sleep(delay: float) -> None:
        sleeps.append(delay)

    rpc = BoincRpc(transport=transport, retry=RetryPolicy(**policy, sleep=no_sleep))

    async def main() -> Any:
        return await rpc_call(rpc)

    return asyncio.run(main())


def test_transient_failures_are_retried_with_growing_waits() -> None:
    sleeps: list[float] = []
    transport = FakeTransport(
        _busy(), HttpTimeout("ReadTimeout"), HttpTransportError("reset"), _ok()
    )
    _call(transport, sleeps)
    assert len(transport.requests) == 4 and len(sleeps) == 3
    assert 0.25 <= sleeps[0] <= 0.75 and 0.5 <= sleeps[1] <= 1.5 and 1 <= sleeps[2] <= 3


def test_retry_after_is_a_lower_bound_of_the_wait() -> None:
    sleeps: list[float] = []
    _call(FakeTransport(_busy(retry_after="7"), _ok()), sleeps)
    assert sleeps == [7.0]


def test_an_http_error_carries_its_status_retry_after_and_body() -> None:
    transport = FakeTransport(_busy(retry_after="9"))
    with pytest.raises(RpcError) as info:
        _call(transport, [], max_tries=1)
    err = info.value
    assert (err.status, err.retry_after, err.body, err.retryable) == (503, 9.0, b"busy", True)


def _create(rpc: BoincRpc) -> Awaitable[int]:
    return rpc.create_batch(PROJECT, "b", "app", 0)


def _refused() -> HttpTransportError:
    return HttpTransportError("certificate refused", retryable=False)


@pytest.mark.parametrize(
    ("answers", "policy", "call", "tries", "match"),
    [
        ([_busy()] * 5, {"max_tries": 3}, None, 3, "HTTP 503"),
        ([_busy(retry_after="100")] * 5, {"deadline": 50}, None, 1, "HTTP 503"),
        ([_busy()] * 5, {}, _create, 1, "HTTP 503"),
        ([HttpTimeout("ConnectTimeout")] * 5, {}, _create, 1, "no reply .* in time"),
        ([_busy(500)] * 5, {}, None, 1, "HTTP 500"),
        ([_busy(302, location="http://x/")] * 5, {}, None, 1, "redirects to http://x/"),
        ([_refused()] * 5, {}, None, 1, "cannot reach .* certificate refused"),
    ],
)
def test_what_is_not_retried_or_no_longer(answers, policy, call, tries, match) -> None:
    sleeps: list[float] = []
    transport = FakeTransport(*answers)
    with pytest.raises(RpcError, match=match):
        _call(transport, sleeps, call or (lambda rpc: rpc.ping(PROJECT)), **policy)
    assert len(transport.requests) == tries and len(sleeps) == tries - 1


def test_an_unreadable_input_file_fails_at_once(tmp_path: Path) -> None:
    sleeps: list[float] = []
    transport = FakeTransport(_ok())
    unreadable = [("in", tmp_path)]  # a directory: its size known, its contents not
    with pytest.raises(RpcError, match="cannot read input file"):
        _call(transport, sleeps, lambda rpc: rpc.upload_files(PROJECT, 1, unreadable))
    assert transport.requests == [] and sleeps == []


def test_files_and_a_get_reach_the_transport(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_bytes(b"file contents")
    transport = FakeTransport(
        _ok(b"<upload_files><success/></upload_files>"), _ok(b"<job_counts></job_counts>")
    )

    async def both(rpc: BoincRpc) -> None:
        await rpc.upload_files(PROJECT, 1, [("in", tmp_path / "in.txt")])
        await rpc.get_job_counts(PROJECT)

    _call(transport, [], both)
    post, get = transport.requests
    assert post.method == "POST" and post.url == PROJECT.url + "job_file.php"
    assert b"file contents" in (post.body or b"") and b"<upload_files>" in (post.body or b"")
    assert get.method == "GET" and get.form is None
    assert get.url == PROJECT.url + "server_status.php?counts=1"


def test_an_rpc_and_its_retries_end_within_the_deadline() -> None:
    """Whatever each request's own timeout, the RPC gives up at its deadline."""

    async def hang(request: FakeRequest) -> FakeReply:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    rpc = BoincRpc(transport=FakeTransport(hang), deadline=0.5)

    async def main() -> None:
        await asyncio.wait_for(rpc.ping(PROJECT), 30)

    with pytest.raises(RpcError, match="within the deadline"):
        asyncio.run(main())
