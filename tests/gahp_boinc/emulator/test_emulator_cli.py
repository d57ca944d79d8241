"""``boinc-emulator`` / ``python -m gahp_boinc.emulator`` as a subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from emu_helpers import expected

CMD = [sys.executable, "-m", "gahp_boinc.emulator"]


def start(*args: str) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [*CMD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    url_line = proc.stdout.readline().split()
    auth_line = proc.stdout.readline().split()
    assert url_line[0] == "URL" and auth_line[0] == "AUTHENTICATOR", (url_line, auth_line)
    return proc, url_line[1], auth_line[1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_and_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    proc, url, auth = start(
        "--state-dir",
        str(tmp_path),
        "--port",
        "0",
        "--job-delay",
        "0",
        "--fault",
        "http503,rpc=ping",
        "--add-user",
        "guest:nosubmit",
    )
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/boinctest/")
        assert len(auth) == 32
        assert proc.stdout is not None
        user = proc.stdout.readline().split()
        assert user[:2] == ["USER", "guest"]
        r = httpx.post(url + "submit_rpc_handler.php", files={"request": (None, "<ping/>")})
        assert r.status_code == 503  # the --fault
        r = httpx.post(url + "submit_rpc_handler.php", files={"request": (None, "<ping/>")})
        assert r.content == expected("ping")[1]
        r = httpx.post(
            url + "submit_rpc_handler.php",
            data={
                "request": (
                    f"<query_batches><authenticator>{user[2]}</authenticator></query_batches>"
                )
            },
        )
        assert "no file access" in r.text  # what BOINC 8.3 says to a non-submitter
    finally:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert auth not in err  # never logged
    # a restart on the same directory keeps the authenticator
    proc2, _, auth2 = start("--state-dir", str(tmp_path))
    proc2.terminate()
    proc2.communicate(timeout=10)
    assert auth2 == auth


def test_cli_refuses_remote_bind() -> None:
    r = subprocess.run([*CMD, "--host", "0.0.0.0"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2
    assert "--allow-remote" in r.stderr
    assert r.stdout == ""


def test_apps_module_runs_a_job(tmp_path: Path) -> None:
    (tmp_path / "in").write_bytes(b"abc")
    r = subprocess.run(
        [sys.executable, "-m", "gahp_boinc.emulator.apps", "uppercase"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 0
    assert (tmp_path / "out").read_bytes() == b"ABC"
    r = subprocess.run(
        [sys.executable, "-m", "gahp_boinc.emulator.apps", "fail", "--exit-code", "5"],
        cwd=tmp_path,
        capture_output=True,
        timeout=20,
    )
    assert r.returncode == 5
