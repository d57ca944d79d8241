"""Fixtures: a running emulator on a free loopback port and a small HTTP client for it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gahp_boinc.emulator import EmulatorServer

FIXTURES = Path(__file__).parent / "fixtures"


def expected(name: str) -> tuple[int, bytes]:
    """(status, body) of a reply captured from a real BOINC 8.3 server."""
    [path] = FIXTURES.glob(f"{name}.*.body")
    return int(path.name.split(".")[1]), path.read_bytes()


def phys_name(data: bytes, ext: str = ".txt") -> str:
    return hashlib.md5(data).hexdigest() + ext


class Boinc:
    """Talks to the emulator the way BOINC's C++ RPC client does (multipart forms)."""

    def __init__(self, srv: EmulatorServer) -> None:
        self.srv = srv
        self.url = srv.url
        self.auth = srv.authenticator
        self.http = httpx.Client(timeout=30)

    def close(self) -> None:
        self.http.close()

    def rpc(
        self,
        body: str,
        endpoint: str = "submit_rpc_handler.php",
        files: dict[str, tuple[str, bytes]] | None = None,
    ) -> httpx.Response:
        parts: dict[str, tuple[str | None, bytes | str]] = {"request": (None, body)}
        parts.update(files or {})
        return self.http.post(self.url + endpoint, files=parts)

    def call(
        self,
        cmd: str,
        inner: str = "",
        auth: str | None = None,
        endpoint: str = "submit_rpc_handler.php",
        files: dict[str, tuple[str, bytes]] | None = None,
    ) -> httpx.Response:
        a = self.auth if auth is None else auth
        return self.rpc(
            f"<{cmd}>\n<authenticator>{a}</authenticator>\n{inner}</{cmd}>\n", endpoint, files
        )

    def create_batch(self, name: str, app: str = "worker", expire: str = "0") -> int:
        r = self.call(
            "create_batch",
            f"<batch_name>{name}</batch_name>\n<app_name>{app}"
            f"</app_name>\n<expire_time>{expire}</expire_time>\n",
        )
        assert b"<batch_id>" in r.content, r.content
        return int(r.text.split("<batch_id>")[1].split("<")[0])

    def query_files(self, names: list[str], batch_id: int | None = None) -> httpx.Response:
        inner = f"<batch_id>{batch_id}</batch_id>\n" if batch_id else ""
        inner += "".join(f"   <phys_name>{n}</phys_name>\n" for n in names)
        return self.call("query_files", inner, endpoint="job_file.php")

    def upload(
        self, files: list[tuple[str, bytes]], batch_id: int | None = None, auth: str | None = None
    ) -> httpx.Response:
        inner = f"<batch_id>{batch_id}</batch_id>\n" if batch_id else ""
        inner += "".join(f"<phys_name>{n}</phys_name>\n" for n, _ in files)
        parts = {f"file_{i}": (f"/tmp/in{i}.txt", data) for i, (_, data) in enumerate(files)}
        return self.call("upload_files", inner, auth=auth, endpoint="job_file.php", files=parts)

    def stage(self, *contents: bytes) -> list[str]:
        """Upload contents (no batch association); return their physical names."""
        names = [phys_name(c) for c in contents]
        todo = {n: c for n, c in zip(names, contents, strict=True)}
        r = self.upload(list(todo.items()))
        assert b"<success/>" in r.content, r.content
        return names

    def submit(
        self, batch_id: int, app: str, jobs: list[tuple[str, str, list[str]]]
    ) -> httpx.Response:
        body = "".join(
            f"<job>\n  <name>{name}</name>\n<command_line>{cmd}</command_line>\n"
            + "".join(
                f"<input_file>\n<mode>local_staged</mode>\n<source>{s}</source>\n</input_file>\n"
                for s in srcs
            )
            + "</job>\n"
            for name, cmd, srcs in jobs
        )
        return self.call(
            "submit_batch",
            f"<batch>\n   <batch_id>{batch_id}</batch_id>\n"
            f"   <app_name>{app}</app_name>\n{body}</batch>\n",
        )

    def run_batch(self, name: str, app: str, jobs: list[tuple[str, str, list[bytes]]]) -> int:
        """create_batch + staging + submit_batch; returns the batch id."""
        bid = self.create_batch(name, app)
        contents = {c for _, _, cs in jobs for c in cs}
        self.stage(*contents)
        r = self.submit(bid, app, [(n, c, [phys_name(x) for x in cs]) for n, c, cs in jobs])
        assert b"<batch_id>" in r.content, r.content
        return bid

    def statuses(self, *batches: str, min_mod_time: str = "0") -> dict[str, str]:
        r = self.call(
            "query_batch2",
            f"<min_mod_time>{min_mod_time}</min_mod_time>\n"
            + "".join(f"<batch_name>{b}</batch_name>\n" for b in batches),
        )
        names = r.text.split("<job_name>")[1:]
        return {n.split("<")[0]: n.split("<status>")[1].split("<")[0] for n in names}

    def output(self, job: str, file_num: int = 0, auth: str | None = None) -> httpx.Response:
        return self.http.get(
            self.url + "get_output.php",
            params={
                "cmd": "workunit_file",
                "auth_str": self.auth if auth is None else auth,
                "wu_name": job,
                "file_num": file_num,
            },
        )


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator:
    """Factory: start emulators (stopped at teardown)."""
    started: list[EmulatorServer] = []

    def make(**kw: object) -> EmulatorServer:
        kw.setdefault("state_dir", tmp_path / "state")
        kw.setdefault("job_delay", 0.05)
        srv = EmulatorServer(**kw).start()  # type: ignore[arg-type]
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()
        assert not s.errors, s.errors


@pytest.fixture
def server(make_server) -> EmulatorServer:
    return make_server()


@pytest.fixture
def boinc(server: EmulatorServer) -> Iterator[Boinc]:
    b = Boinc(server)
    yield b
    b.close()
