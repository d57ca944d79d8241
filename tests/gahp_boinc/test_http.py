"""The lean plain-HTTP client (gahp_boinc._http) against scripted servers, and which client
BoincRpc uses for which URL."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from gahp_boinc._http import (  # private: unit test of the HTTP transport
    ERROR_BODY,
    HttpTimeout,
    HttpTooLarge,
    HttpTransportError,
    PlainHttp,
    Slots,
)
from gahp_boinc._route import RoutedTransport  # private: unit test of the transport routing
from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer
from gahp_boinc._transport import MAX_BYTES_PER_UPLOAD  # private: unit test of the transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def _run(handler: Handler, client: Callable[[str, list[int]], Awaitable[None]]) -> list[int]:
    """Serve ``handler`` on a loopback port; run ``client(url, connections)``; the number of
    connections the server saw is in the list."""
    conns: list[int] = [0]

    async def main() -> None:
        async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            conns[0] += 1
            try:
                await handler(r, w)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                w.close()

        server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            await client(f"http://127.0.0.1:{port}/p/x.php?a=1", conns)

    asyncio.run(main())
    return conns


async def _keep_alive_ok(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    while True:
        head, body = await _read_request(r)
        reply = b"got " + head.split(b" ", 2)[1] + b" " + body
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply))
        await w.drain()


def test_requests_share_one_kept_alive_connection() -> None:
    async def client(url: str, conns: list[int]) -> None:
        http = PlainHttp(5, 5, "t")
        for i in range(3):
            reply = await http.request("POST", url, b"body%d" % i, "text/plain")
            assert reply.status_code == 200 and reply.reason_phrase == "OK"
            assert reply.content == b"got /p/x.php?a=1 body%d" % i
        await http.aclose()

    assert _run(_keep_alive_ok, client) == [1]


def test_chunked_and_close_delimited_bodies_and_an_interim_reply() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
            b"X-A: 1\r\nx-a: 2\r\n\r\n5;ext\r\nhello\r\n6\r\n world\r\n0\r\nT: v\r\n\r\n"
        )
        await _read_request(r)
        w.write(b"HTTP/1.0 404 Not Found\r\n\r\nno such page")
        await w.drain()

    async def client(url: str, conns: list[int]) -> None:
        http = PlainHttp(5, 5, "t")
        reply = await http.request("GET", url)
        assert reply.content == b"hello world"
        assert reply.headers["x-a"] == "1, 2"
        reply = await http.request("GET", url)  # the same connection: chunked kept it
        assert (reply.status_code, reply.content) == (404, b"no such page")
        assert not http._idle[("127.0.0.1", int(url.split(":")[2].split("/")[0]))]

    assert _run(handler, client) == [1]


def test_a_connection_the_server_closed_is_not_reused() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        # then closes (the caller's finally), as a keep-alive timeout does

    async def client(url: str, conns: list[int]) -> None:
        http = PlainHttp(5, 5, "t")
        assert (await http.request("GET", url)).content == b"ok"
        await asyncio.sleep(0.2)  # the FIN arrives
        assert (await http.request("GET", url)).content == b"ok"

    assert _run(handler, client) == [2]


def test_streamed_body_in_pieces() -> None:
    data = bytes(range(256)) * 1000

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        await w.drain()

    async def client(url: str, conns: list[int]) -> None:
        http = PlainHttp(5, 5, "t")
        async with http.stream("GET", url) as reply:
            pieces = [p async for p in reply.aiter_bytes(4096)]
        assert b"".join(pieces) == data and max(map(len, pieces)) <= 4096

    _run(handler, client)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"", "Server disconnected without sending a response."),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "mid-reply"),
        (b"SMTP ready\r\n\r\n", "not an HTTP reply"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "bad Content-Length"),
    ],
)
def test_broken_replies_are_transport_errors(reply: bytes, message: str) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(reply)
        await w.drain()

    async def client(url: str, conns: list[int]) -> None:
        with pytest.raises(HttpTransportError, match=message):
            await PlainHttp(5, 5, "t").request("GET", url)

    _run(handler, client)


def test_timeouts_and_a_refused_connection() -> None:
    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        await asyncio.sleep(2)

    async def client(url: str, conns: list[int]) -> None:
        with pytest.raises(HttpTimeout) as info:
            await PlainHttp(0.3, 5, "t").request("GET", url)
        assert info.value.kind == "ReadTimeout"

    _run(silent, client)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HttpTransportError):
        asyncio.run(PlainHttp(5, 5, "t").request("GET", f"http://127.0.0.1:{port}/"))


def test_rpc_uses_httpx_for_tls_proxies_and_a_given_client(monkeypatch) -> None:
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    routed = RoutedTransport()
    assert routed.uses_lean_client("http://h/p/x.php")
    assert routed.uses_lean_client("http://h/p/x.php", upload_bytes=MAX_BYTES_PER_UPLOAD)
    assert not routed.uses_lean_client("http://h/p/x.php", upload_bytes=MAX_BYTES_PER_UPLOAD + 1)
    assert not routed.uses_lean_client("https://h/p/x.php")
    assert not routed.uses_lean_client("http://h/p q/x.php")
    assert not RoutedTransport(BoincRpc.make_client(5)).uses_lean_client("http://h/p/x.php")
    assert isinstance(BoincRpc().transport, RoutedTransport)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not RoutedTransport().uses_lean_client("http://h/p/x.php")


def test_an_error_body_is_read_to_4_kib_and_its_connection_closed() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            await _read_request(r)
            body = b"x" * (1 << 20)
            w.write(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await w.drain()

    async def client(url: str, conns: list[int]) -> None:
        http = PlainHttp(5, 5, "t")
        for _ in range(2):
            reply = await http.request("GET", url)
            assert reply.status_code == 500 and reply.content == b"x" * ERROR_BODY

    assert _run(handler, client) == [2]


def test_a_success_beyond_the_limit_is_refused_by_its_content_length() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\nabc")
        await w.drain()
        await asyncio.sleep(2)

    async def client(url: str, conns: list[int]) -> None:
        with pytest.raises(HttpTooLarge, match="1000000000 bytes announced"):
            await PlainHttp(5, 5, "t").request("GET", url, limit=1000)

    _run(handler, client)


def test_slots_are_per_server() -> None:
    """A server holding all its slots leaves another server's free."""

    async def main() -> None:
        slots = Slots(per_origin=2, total=8)
        held = [slots.hold("http://slow:80/p/x.php") for _ in range(2)]
        for slot in held:
            await slot.__aenter__()
        waiting = asyncio.create_task(slots.hold("http://slow:80/p/y.php").__aenter__())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # its server's slots are taken
        async with asyncio.timeout(5), slots.hold("http://fast/p/x.php"):
            pass
        await held[0].__aexit__(None, None, None)
        await asyncio.wait_for(waiting, 5)
        assert set(slots.origins) == {"http://slow:80"}

    asyncio.run(main())
