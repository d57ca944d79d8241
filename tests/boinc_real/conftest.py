"""The real BOINC 8.3 project server brought up by `.ci/boinc-server-up.sh`, for the tests here.

The script writes ``$GAHP_BOINC_DIR/env`` (default /tmp/gahp-boinc-server/env); the fixture
``real_boinc`` reads it and checks that the project answers a ping RPC. When it does not,
the tests are skipped with the reason, or fail when ``GAHP_REQUIRE_BOINC_SERVER=1`` (CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_services import env_file as read_settings_file
from live_services import unavailable

START = "bash .ci/boinc-server-up.sh"
JOB_DEADLINE = float(os.environ.get("GAHP_BOINC_JOB_DEADLINE", "300"))
"""Seconds the tests wait for jobs to end: 30-60 s each on an idle volunteer (one CPU)."""
REQUIRE = "GAHP_REQUIRE_BOINC_SERVER"


def env_file() -> Path:
    """Where `.ci/boinc-server-up.sh` writes the server's settings."""
    return Path(os.environ.get("GAHP_BOINC_DIR", "/tmp/gahp-boinc-server")) / "env"


def read_env(path: Path) -> dict[str, str]:
    """The ``GAHP_BOINC_*`` settings of the env file (empty when it is missing)."""
    return {k: v for k, v in read_settings_file(path).items() if k.startswith("GAHP_BOINC_")}


def ping(url: str, timeout: float = 10.0) -> str | None:
    """None when the project answers the ping RPC, else why not."""
    data = urllib.parse.urlencode({"request": "<ping> </ping>"}).encode()
    try:
        with urllib.request.urlopen(url + "submit_rpc_handler.php", data, timeout) as resp:
            body = resp.read()
    except OSError as exc:
        return f"project {url} does not answer ({exc})"
    if b"<success>1</success>" not in body:
        return f"project {url} answers ping with {body[:200]!r}"
    return None


@dataclass(frozen=True)
class RealBoinc:
    """The live project: URL, accounts, database and the files around it."""

    url: str
    auth: str
    nosubmit_auth: str
    app: str
    db_host: str
    db_name: str
    db_user: str
    db_password: str
    project_dir: Path
    c_gahp: Path
    access_log: Path
    bundle: Path | None = None
    job_deadline: float = JOB_DEADLINE
    collect_app: str = ""  # an app with BOINC's batch-collect assimilator
    gzip_app: str = ""  # an app whose output the volunteer gzips

    def blahpd_config(self, where: Path) -> Path:
        """A blahpd.toml in ``where`` for the boinc driver on this project (state in
        ``where/state``; the authenticator in a 0600 file beside it)."""
        auth = where / "authenticator"
        auth.write_text(self.auth + "\n")
        auth.chmod(0o600)
        conf = where / "blah.toml"
        conf.write_text(
            f'state_dir = "{where / "state"}"\n'
            f'[driver.boinc]\nproject_url = "{self.url}"\nauthenticator_file = "{auth}"\n'
        )
        return conf

    def sql(self, query: str, timeout: float = 30.0) -> list[dict[str, str]]:
        """Rows of a query on the project's own database (mysql client, tab-separated;
        newlines and tabs in values come escaped as ``\\n`` and ``\\t``)."""
        client = shutil.which("mariadb") or shutil.which("mysql") or "mysql"
        proc = subprocess.run(
            [
                client,
                "--batch",
                "-h",
                self.db_host,
                "-u",
                self.db_user,
                f"-p{self.db_password}",
                self.db_name,
                "-e",
                query,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise AssertionError(f"SQL {query!r} failed: {proc.stderr.strip()}")
        lines = proc.stdout.splitlines()
        if not lines:
            return []
        head = lines[0].split("\t")
        return [dict(zip(head, line.split("\t"), strict=True)) for line in lines[1:]]

    def one(self, query: str) -> dict[str, str]:
        """The single row of a query."""
        rows = self.sql(query)
        assert len(rows) == 1, (query, rows)
        return rows[0]

    def volunteer_backlog(self, mine: set[str]) -> str:
        """The other jobs the project has sent and not got back (they share the one volunteer
        CPU with ours): a line for a timeout message."""
        rows = self.sql(
            "SELECT w.name FROM result r JOIN workunit w ON r.workunitid=w.id"
            " WHERE r.server_state=4 ORDER BY r.id"  # RESULT_SERVER_STATE_IN_PROGRESS
        )
        others = [r["name"] for r in rows if r["name"] not in mine]
        return f"{len(others)} other jobs in progress on the volunteer: {others[:10]}"

    def access_log_size(self) -> int:
        """Apache's access log size now (read what is appended after with ``access_since``)."""
        try:
            return self.access_log.stat().st_size
        except OSError:
            return 0

    def access_since(self, offset: int) -> list[str]:
        """Access log lines appended since ``offset``."""
        try:
            with self.access_log.open("rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []


def load_real_boinc() -> tuple[RealBoinc | None, str]:
    """The live server, or None and the reason it is not usable."""
    path = env_file()
    s = read_env(path)
    if not s.get("GAHP_BOINC_PROJECT_URL"):
        return None, f"no real BOINC server ({path} missing; start it with `{START}`)"
    why = ping(s["GAHP_BOINC_PROJECT_URL"])
    if why:
        return None, f"{why}; start it with `{START}`"
    return RealBoinc(
        url=s["GAHP_BOINC_PROJECT_URL"],
        auth=s["GAHP_BOINC_AUTH"],
        nosubmit_auth=s["GAHP_BOINC_NOSUBMIT_AUTH"],
        app=s.get("GAHP_BOINC_APP", "worker"),
        db_host=s.get("GAHP_BOINC_DB_HOST", "127.0.0.1"),
        db_name=s.get("GAHP_BOINC_DB_NAME", "boinctest"),
        db_user=s.get("GAHP_BOINC_DB_USER", "boincadm"),
        db_password=s.get("GAHP_BOINC_DB_PASSWORD", ""),
        project_dir=Path(s.get("GAHP_BOINC_PROJECT_DIR", "/tmp/boinc-projects/boinctest")),
        c_gahp=Path(s.get("GAHP_BOINC_C_GAHP", "")),
        access_log=Path(s.get("GAHP_BOINC_ACCESS_LOG", "/var/log/apache2/access.log")),
        bundle=Path(s["GAHP_BOINC_BUNDLE"]) if s.get("GAHP_BOINC_BUNDLE") else None,
        collect_app=s.get("GAHP_BOINC_COLLECT_APP", ""),
        gzip_app=s.get("GAHP_BOINC_GZIP_APP", ""),
    ), ""


@pytest.fixture(scope="session")
def real_boinc() -> RealBoinc:
    """The live BOINC project; skips when it is down, fails when GAHP_REQUIRE_BOINC_SERVER=1."""
    server, reason = load_real_boinc()
    if server is None:
        unavailable(REQUIRE, reason)
    return server


def poll(check: Callable[[], object], timeout: float, what: str, every: float = 1.0) -> object:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(every)


@pytest.fixture(scope="session")
def poll_until() -> Callable[..., object]:
    """``poll_until(check, timeout, what)``: the deadline-bounded polling loop of these tests."""
    return poll


class RecordingProxy:
    """A loopback HTTP proxy in front of the project that keeps every request body it forwards
    (to see what a client really sent). Use as a context manager; ``url`` is the project URL
    through the proxy."""

    def __init__(self, project_url: str) -> None:
        import http.server
        import threading

        target = urllib.parse.urlsplit(project_url)
        self.bodies: list[tuple[str, bytes]] = []
        self.answers: list[tuple[str, bytes, int]] = []  # (path, body, HTTP status; 0: none)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                proxy.bodies.append((self.path, body or b""))
                req = urllib.request.Request(
                    f"{target.scheme}://{target.netloc}{self.path}",
                    data=body,
                    method=self.command,
                    headers={
                        k: v
                        for k, v in self.headers.items()
                        if k.lower() in ("content-type", "user-agent", "cookie")
                    },
                )
                try:
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        status, headers, data = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as exc:
                    status, headers, data = exc.code, exc.headers, exc.read()
                except OSError:  # the project is down: so is the proxy, for this request
                    proxy.answers.append((self.path, body or b"", 0))
                    self.close_connection = True
                    return
                proxy.answers.append((self.path, body or b"", status))
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in (
                        "content-length",
                        "transfer-encoding",
                        "connection",
                        "date",
                        "server",
                    ):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{target.path}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def recording_proxy() -> type[RecordingProxy]:
    """The :class:`RecordingProxy` class (``with recording_proxy(url) as proxy: ...``)."""
    return RecordingProxy
