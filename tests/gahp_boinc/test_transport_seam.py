"""BoincRpc over the in-memory transport: downloads go through ``Transport.stream`` with the
login cookie, land whole or not at all, and a refusal or an HTTP error becomes the typed
error carrying its status; the transport is closed with the client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_transport import FakeReply, FakeTransport

from gahp_boinc import NoSuchJob, Project, RpcError
from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer

PROJECT = Project("http://127.0.0.1:1/p/", "secret-auth")
OCTETS = {"content-type": "application/octet-stream"}


def _run(transport: FakeTransport, coro_of) -> object:
    rpc = BoincRpc(transport=transport)

    async def main() -> object:
        try:
            return await coro_of(rpc)
        finally:
            await rpc.aclose()

    return asyncio.run(main())


def test_a_download_streams_with_the_login_cookie(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    transport = FakeTransport(FakeReply(200, b"x" * 100_000, OCTETS))
    assert _run(transport, lambda rpc: rpc.download_output(PROJECT, "j", 0, dest, 7)) == 100_000
    assert dest.read_bytes() == b"x" * 100_000 and [p.name for p in tmp_path.iterdir()] == ["out"]
    (request,) = transport.requests
    assert request.method == "GET" and request.cookie == "auth=secret-auth"
    assert request.url == PROJECT.url + "get_output2.php?cmd=file&result_id=7&file_num=0"
    assert "secret-auth" not in request.url and transport.closed


def test_a_refusal_is_its_typed_error_and_leaves_no_file(tmp_path: Path) -> None:
    transport = FakeTransport(FakeReply(200, b"ERROR: no job j", {"content-type": "text/plain"}))
    with pytest.raises(NoSuchJob, match="no job j"):
        _run(transport, lambda rpc: rpc.download_output(PROJECT, "j", 0, tmp_path / "out", 7))
    assert list(tmp_path.iterdir()) == []


def test_an_http_error_of_a_download_carries_its_status(tmp_path: Path) -> None:
    transport = FakeTransport(FakeReply(503, b"busy"))
    with pytest.raises(RpcError) as info:
        _run(transport, lambda rpc: rpc.download_job_outputs(PROJECT, 3, tmp_path / "out"))
    assert (info.value.status, info.value.retryable) == (503, True)
    assert list(tmp_path.iterdir()) == []


def test_a_server_error_reply_with_http_500_keeps_the_server_s_words() -> None:
    body = (
        b"<query_batch2><error><error_num>-1</error_num>"
        b"<error_msg>no batch named b</error_msg></error></query_batch2>"
    )
    transport = FakeTransport(FakeReply(500, body))
    with pytest.raises(RpcError, match="HTTP 500: no batch named b") as info:
        _run(transport, lambda rpc: rpc.query_batch2(PROJECT, ["b"], "0"))
    assert type(info.value).__name__ == "NoSuchBatch" and info.value.batch == "b"
