"""BoincClient and boinc-gahp against a malicious project (hostile_server.py): malformed
and lying replies end in an RpcError, huge ones in an error with memory kept low, trickling
ones in a timeout after about ``timeout``, and a trickling project does not stall a healthy
one. Memory is each child process's peak RSS (VmHWM, or ru_maxrss), asserted generously."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_server import MALFORMED, HostileServer
from relkit import BOINC_GAHP

from gahp_boinc import BoincClient, RpcError
from gahp_boinc._client import project  # private: builds a Project as the client does
from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient, proc_status

RSS_LIMIT_MIB = 300
"""Peak RSS allowed while a 1 GiB reply is refused (the old client took 3 GiB)."""


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as srv:
        yield srv


def _ping(url: str, limit: float = 120, **options: object) -> None:
    async def main() -> None:
        async with BoincClient(url, "auth", retries=0, **options) as client:  # type: ignore[arg-type]
            await asyncio.wait_for(client.ping(), limit)

    asyncio.run(main())


# ---- framing -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", sorted(MALFORMED))
def test_malformed_framing_is_an_rpc_error(hostile: HostileServer, mode: str) -> None:
    """Each of these replies holds a valid ping answer, which the hand-written parser read
    (or it let a bare ValueError out): llhttp refuses the framing, the client says so."""
    with pytest.raises(RpcError):
        _ping(hostile.url(mode), timeout=10)


def test_a_reply_shorter_than_what_follows_does_not_poison_the_next(
    hostile: HostileServer,
) -> None:
    """A second reply sent unasked behind the first is never taken for the next request's:
    the connection is closed, not reused with bytes buffered."""

    async def main() -> None:
        async with BoincClient(hostile.url("smuggle"), "auth", retries=0, timeout=10) as c:
            for _ in range(3):
                await c.ping()

    asyncio.run(main())
    assert hostile.connections == 3


def test_a_content_length_longer_than_the_body_is_an_rpc_error(hostile: HostileServer) -> None:
    with pytest.raises(RpcError, match="mid-reply"):
        _ping(hostile.url("longer-than-sent"), timeout=10)


@pytest.mark.parametrize("mode", ["endless-trailers", "endless-trailer"])
def test_endless_trailers_are_an_rpc_error(hostile: HostileServer, mode: str) -> None:
    """Trailer fields without end after a chunked body: refused once 64 KiB carry no body
    (neither kept nor read for ever)."""
    with pytest.raises(RpcError, match="too long"):
        _ping(hostile.url(mode), timeout=30)
    assert hostile.sent < 64 << 20


# ---- size ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["huge", "huge-chunk", "endless"])
def test_a_reply_beyond_the_limit_is_refused_without_reading_it(
    hostile: HostileServer, mode: str
) -> None:
    """Announced (Content-Length: refused at once) or not (refused once past the limit)."""
    with pytest.raises(RpcError, match="too large"):
        _ping(hostile.url(mode), timeout=30, max_reply_bytes=1 << 20)
    assert hostile.sent < 64 << 20  # the client stopped reading long before 1 GiB


_DOWNLOAD = """
import asyncio, resource, sys
from pathlib import Path
from gahp_boinc._rpc import BoincRpc, Project

url, dest, via = sys.argv[1:4]

async def main():
    client = BoincRpc.make_client(60) if via == "httpx" else None
    rpc = BoincRpc(client, timeout=60)
    try:
        # result_id given: the download itself, with no query_completed_job before it
        print(await rpc.download_output(Project(url, "auth"), "job", 0, Path(dest), result_id=1))
    finally:
        await rpc.aclose()

asyncio.run(main())
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


@pytest.mark.parametrize("via", ["lean client", "httpx"])
def test_a_512_mib_chunk_is_downloaded_in_pieces(tmp_path: Path, via: str) -> None:
    """A download's single 512 MiB chunk reaches the disk whole, never held in memory."""
    dest = tmp_path / "out"
    with HostileServer(huge=512 << 20) as srv:
        proc = subprocess.run(
            [sys.executable, "-c", _DOWNLOAD, srv.url("huge-chunk"), str(dest), via],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    size, peak_mib = map(int, proc.stdout.split())
    assert size == dest.stat().st_size == 512 << 20
    assert peak_mib < RSS_LIMIT_MIB, f"peak RSS {peak_mib} MiB"


@pytest.mark.parametrize("mode", ["huge", "huge-chunk", "endless"])
def test_gahp_answers_a_1_gib_ping_reply_with_an_error_in_little_memory(
    hostile: HostileServer, mode: str
) -> None:
    """BOINC_PING against a project answering 1 GiB: an error result, the GAHP's peak RSS
    stays low, and it keeps serving."""
    gahp = GahpClient([*BOINC_GAHP, "--timeout", "60", "--retries", "0"])
    try:
        assert gahp.command("BOINC_SELECT_PROJECT", hostile.url(mode), "auth") == ["S"]
        res = gahp.call("BOINC_PING", timeout=240)
        peak_mib = proc_status(gahp.proc.pid, "VmHWM") // 1024
        assert len(res) == 1 and "too large" in res[0], res
        assert 0 < peak_mib < RSS_LIMIT_MIB, f"peak RSS {peak_mib} MiB"
        print(f"{mode}: boinc-gahp peak RSS {peak_mib} MiB")
        assert gahp.command("BOINC_SELECT_PROJECT", hostile.url("ok"), "auth") == ["S"]
        assert gahp.call("BOINC_PING") == ["NULL"]
    finally:
        gahp.close()


# ---- time ----------------------------------------------------------------------------------


def test_a_trickling_reply_times_out_after_about_the_timeout(hostile: HostileServer) -> None:
    """A byte every 0.5 s: each read makes progress, yet the request ends near ``timeout``
    (generous bound: it took for ever before)."""
    start = time.monotonic()
    with pytest.raises(RpcError, match="in time"):
        _ping(hostile.url("trickle"), limit=120, timeout=2)
    print(f"BoincClient: clean error {time.monotonic() - start:.1f} s into a trickle")
    assert time.monotonic() - start < 60


def test_gahp_answers_a_trickling_project_well_before_the_command_deadline(
    hostile: HostileServer,
) -> None:
    gahp = GahpClient([*BOINC_GAHP, "--timeout", "3", "--retries", "0"])
    try:
        assert gahp.command("BOINC_SELECT_PROJECT", hostile.url("trickle"), "auth") == ["S"]
        start = time.monotonic()
        res = gahp.call("BOINC_PING", timeout=120)
        took = time.monotonic() - start
        assert len(res) == 1 and "in time" in res[0], res
        print(f"boinc-gahp: clean error {took:.1f} s into a trickle (--timeout 3)")
        assert took < 100  # the command deadline (290 s) used to be what ended it
    finally:
        gahp.close()


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorServer]:
    srv = EmulatorServer(state_dir=tmp_path / "emu", job_delay=0.05, volunteers=1)
    srv.start()
    yield srv
    srv.stop()


def test_a_trickling_project_does_not_stall_a_healthy_one(
    hostile: HostileServer, emulator: EmulatorServer
) -> None:
    """Sixteen pings hang on a trickling project (more than the client's connections per
    project); a healthy project's pings are answered meanwhile."""
    gahp = GahpClient([*BOINC_GAHP, "--timeout", "60", "--retries", "0"])
    try:
        assert gahp.command("BOINC_SELECT_PROJECT", hostile.url("trickle"), "auth") == ["S"]
        slow = [gahp.reqid() for _ in range(16)]
        for rid in slow:
            assert gahp.command("BOINC_PING", rid) == ["S"]
        assert gahp.command("BOINC_SELECT_PROJECT", emulator.url, emulator.authenticator) == ["S"]
        for _ in range(3):
            assert gahp.call("BOINC_PING", timeout=30) == ["NULL"]
    finally:
        gahp.close()


def test_boinc_client_keeps_a_healthy_project_answering_beside_a_trickling_one(
    hostile: HostileServer, emulator: EmulatorServer
) -> None:
    async def main() -> None:
        async with BoincClient(timeout=60, retries=0) as client:
            slow = [
                asyncio.create_task(client.ping(project=project(hostile.url("trickle"), "a")))
                for _ in range(16)
            ]
            await asyncio.sleep(0.5)
            healthy = project(emulator.url, emulator.authenticator)
            for _ in range(3):
                await asyncio.wait_for(client.ping(project=healthy), 30)
            for task in slow:
                task.cancel()
            await asyncio.gather(*slow, return_exceptions=True)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        ("huge-chunk", {"max_reply_bytes": 1 << 20}, "too large"),
        ("endless", {}, "too large"),
        ("trickle", {"timeout": 2}, "in time"),
        ("hex-prefix", {}, "cannot reach"),
    ],
)
def test_the_httpx_path_is_bounded_alike(
    hostile: HostileServer, mode: str, options: dict[str, int], message: str
) -> None:
    """TLS and proxied projects go through httpx: the same size and time bounds hold."""
    from gahp_boinc import Project
    from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer

    async def main() -> None:
        rpc = BoincRpc(BoincRpc.make_client(60), max_tries=1, **options)  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(rpc.ping(Project(hostile.url(mode), "auth")), 120)
        finally:
            await rpc.aclose()

    start = time.monotonic()
    with pytest.raises(RpcError, match=message):
        asyncio.run(main())
    assert time.monotonic() - start < 60
    assert hostile.sent < 256 << 20
