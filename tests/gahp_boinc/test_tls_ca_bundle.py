"""--ca-bundle with an https project: a real TLS server on loopback whose certificate a
private CA signed. The whole job life (select, ping, submit with uploads, query, fetch)
works with the CA bundle and fails, never retried, without it."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient

GAHP = [sys.executable, "-m", "gahp_boinc"]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def private_ca(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate for 127.0.0.1 signed by the CA, server key)."""
    ca_key, ca = tmp_path / "ca.key", tmp_path / "ca.pem"
    key, csr, cert = tmp_path / "srv.key", tmp_path / "srv.csr", tmp_path / "srv.pem"
    ext = tmp_path / "srv.ext"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "1",
        "-subj",
        "/CN=gahp test CA",
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        "/CN=127.0.0.1",
    )
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "1",
        "-extfile",
        str(ext),
    )
    return ca, cert, key


class _TlsRelay(socketserver.ThreadingTCPServer):
    """Terminates TLS on 127.0.0.1 and relays the bytes to a plain HTTP server."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, context: ssl.SSLContext, backend: tuple[str, int]) -> None:
        self.context, self.backend = context, backend
        super().__init__(("127.0.0.1", 0), _Relay)


class _Relay(socketserver.BaseRequestHandler):
    server: _TlsRelay

    def handle(self) -> None:
        try:
            tls = self.server.context.wrap_socket(self.request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client that refused our certificate
        with tls, socket.create_connection(self.server.backend) as plain:
            back = threading.Thread(target=_pump, args=(plain, tls), daemon=True)
            back.start()
            _pump(tls, plain)
            back.join(10)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@pytest.fixture
def https_project(tmp_path: Path, private_ca) -> Iterator[tuple[str, EmulatorServer]]:
    _, cert, key = private_ca
    emu = EmulatorServer(state_dir=tmp_path / "emu", port=0, job_delay=0.05, volunteers=2)
    emu.start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    relay = _TlsRelay(context, ("127.0.0.1", emu.port))
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    path = emu.url.split("/", 3)[3]
    yield f"https://127.0.0.1:{relay.server_address[1]}/{path}", emu
    relay.shutdown()
    relay.server_close()
    emu.stop()


def test_https_project_with_a_private_ca(https_project, private_ca, tmp_path):
    url, emu = https_project
    ca = private_ca[0]
    work = tmp_path / "in put"  # a space in the local path, too
    work.mkdir()
    (work / "a.txt").write_text("over tls\n")
    out = tmp_path / "out"
    out.mkdir()
    with GahpClient([*GAHP, "--ca-bundle", str(ca), "--timeout", "10"]) as c:
        assert c.command("BOINC_SELECT_PROJECT", url, emu.authenticator) == ["S"]
        assert c.call("BOINC_PING") == ["NULL"]
        submit = ["t", "uppercase", "1", "t#0", "0", "1", str(work / "a.txt"), "in"]
        assert c.call("BOINC_SUBMIT", *submit, *["NULL"] * 6) == ["NULL"]
        assert emu.stats.get("upload_files") == 1
        deadline = time.monotonic() + 30
        while (res := c.call("BOINC_QUERY_BATCHES", "0", "1", "t"))[3:] != ["t#0", "DONE"]:
            assert res[0] == "NULL" and time.monotonic() < deadline, res
            time.sleep(0.1)
        res = c.call("BOINC_FETCH_OUTPUT", "t#0", str(out), "err", "ALL", "0")
        assert res[0] == "NULL", res
    assert (out / "out").read_text() == "OVER TLS\n"
    assert "<stderr_txt>" in (out / "err").read_text()


def test_without_the_ca_bundle_the_certificate_is_refused(https_project):
    url, emu = https_project
    with GahpClient([*GAHP, "--retries", "3", "--timeout", "5"]) as c:
        assert c.command("BOINC_SELECT_PROJECT", url, emu.authenticator) == ["S"]
        start = time.monotonic()
        res = c.call("BOINC_PING")
        assert len(res) == 1 and "certificate verify failed" in res[0], res
        assert emu.authenticator not in res[0]
        assert time.monotonic() - start < 3  # not retried


def test_boinc_client_with_a_ca_bundle(https_project, private_ca, tmp_path):
    from gahp_boinc import Job, RpcError, SyncBoincClient

    url, emu = https_project
    (tmp_path / "a.txt").write_text("client over tls\n")
    with SyncBoincClient(url, emu.authenticator, verify=str(private_ca[0]), timeout=10) as c:
        c.ping()
        c.submit("tc", "uppercase", [Job("tc-0", (), [tmp_path / "a.txt"])])
        assert c.wait("tc", interval=0.1, timeout=30) == {"tc-0": "DONE"}
        c.fetch_output("tc-0", tmp_path)
    assert (tmp_path / "out").read_text() == "CLIENT OVER TLS\n"
    emu.reset_stats()
    with SyncBoincClient(url, emu.authenticator, retries=3, timeout=5) as c:
        start = time.monotonic()
        with pytest.raises(RpcError, match="certificate verify failed"):
            c.ping()
        assert time.monotonic() - start < 3  # not retried
    assert emu.stats.get("ping", 0) == 0
