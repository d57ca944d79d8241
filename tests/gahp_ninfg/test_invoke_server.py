"""ng_invoke_server.Fork / .Slurm / .SGE driven as the Ninf-G 5.0 C client drives them.

The client reads replies on stdout and notifications on stderr and recognises only CRLF
line ends: the reader here refuses any other terminator.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

PROGRAM = r"""
import json, os, sys, time
pidfile = os.environ.get("NG_T_PIDS")
if pidfile:
    with open(pidfile, "a") as fh:
        fh.write(f"{os.getpid()}\n")
auth = [open(a.split("=", 1)[1]).read() for a in sys.argv if a.startswith("--authNumberFile=")]
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "auth": auth,
                  "env": {k: v for k, v in os.environ.items() if k.startswith("NG_T_")}}))
print("stderr line", file=sys.stderr)
sys.stdout.flush()
time.sleep(float(os.environ.get("NG_T_SLEEP", "0")))
sys.exit(int(os.environ.get("NG_T_EXIT", "0")))
"""


class CrlfReader:
    """Lines of a stream, each required to end in CRLF (as the C client needs)."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.bad: list[bytes] = []
        threading.Thread(target=self._run, args=(stream,), daemon=True).start()

    def _run(self, stream) -> None:
        buf = b""
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(1):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.endswith(b"\r"):
                    self.bad.append(line)
                self.lines.put(line.rstrip(b"\r").decode())
        if buf:
            self.bad.append(buf)
        self.lines.put(None)

    def get(self, timeout: float = 30) -> str | None:
        return self.lines.get(timeout=timeout)


class NinfgClient:
    def __init__(self, exe: str, env: dict | None, log: Path) -> None:
        full = dict(os.environ)
        full.update(env or {})
        self.proc = subprocess.Popen(
            [exe, "-l", str(log)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full,
        )
        self.out = CrlfReader(self.proc.stdout)
        self.err = CrlfReader(self.proc.stderr)
        self.reqid = 0

    def send(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(line + "\r\n" for line in lines).encode())
        self.proc.stdin.flush()

    def request(self, line: str) -> str:
        self.send(line)
        reply = self.out.get()
        assert reply is not None, "server closed stdout"
        return reply

    def create(self, attrs: list[tuple[str, str]]) -> tuple[str, str]:
        """JOB_CREATE; returns the reply and the CREATE_NOTIFY line."""
        self.reqid += 1
        self.send(f"JOB_CREATE {self.reqid}", *(f"{k} {v}" for k, v in attrs), "JOB_CREATE_END")
        reply = self.out.get()
        note = self.notification()
        assert note.startswith(f"CREATE_NOTIFY {self.reqid} "), note
        return reply, note

    def notification(self, timeout: float = 60) -> str:
        line = self.err.get(timeout)
        assert line is not None, "server closed stderr"
        return line

    def statuses(self, jobid: str, until: str = "DONE", timeout: float = 90) -> list[str]:
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.notification(deadline - time.monotonic())
            parts = line.split(" ", 3)
            assert parts[0] == "STATUS_NOTIFY" and parts[1] == jobid, line
            seen.append(parts[2])
            if parts[2] in ("DONE", "FAILED"):
                return seen
        pytest.fail(f"no terminal status for {jobid}: {seen}")

    def close(self) -> int:
        if self.proc.poll() is None:
            self.proc.stdin.close()
        return self.proc.wait(60)


@pytest.fixture(params=["Fork", "Slurm", "SGE"])
def server(request, batch_env, slurm_env, sge_env, tmp_path):
    batch_env(request.param)
    exe = str(Path(sys.executable).parent / f"ng_invoke_server.{request.param}")
    if not Path(exe).exists():
        exe = f"ng_invoke_server.{request.param}"
    env = {"Slurm": slurm_env, "SGE": {**(sge_env or {}), "NG_INVOKE_SGE_PE": "smp"}}
    client = NinfgClient(exe, env.get(request.param), tmp_path / "invoke.log")
    client.kind = request.param
    yield client
    client.close()
    assert not client.out.bad and not client.err.bad, (client.out.bad, client.err.bad)


@pytest.fixture
def program(tmp_path) -> Path:
    path = tmp_path / "ng_exe.py"
    path.write_text(f"#!{sys.executable}\n{PROGRAM}")
    path.chmod(0o755)
    return path


def base_attrs(program: Path, **extra: str) -> list[tuple[str, str]]:
    values = {
        "hostname": "localhost",
        "port": "0",
        "client_name": "localhost",
        "executable_path": str(program),
        "backend": "NORMAL",
        "count": "1",
        "staging": "false",
        **extra,
        "status_polling": "1",
    }
    return list(values.items())


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


def read_pids(path: Path, n: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= n:
                return pids
        time.sleep(0.1)
    pytest.fail(f"the job's {n} process(es) never started")


def test_query_features(server):
    server.send("QUERY_FEATURES")
    lines = []
    while (line := server.out.get()) != "REPLY_END":
        lines.append(line)
    assert lines[0] == "SM"
    assert lines.count("protocol_version 2.0") == 1
    assert "feature STAGING_AUTH_NUMBER" in lines
    assert {
        "request JOB_CREATE",
        "request JOB_STATUS",
        "request JOB_DESTROY",
        "request EXIT",
    } <= set(lines)
    assert all(x.split()[0] in ("SM", "protocol_version", "feature", "request") for x in lines)


def test_job_with_arguments_environment_workdir_and_redirects(server, program, tmp_path):
    work = tmp_path / "work dir"
    work.mkdir()
    out, err = tmp_path / "client.out", tmp_path / "client.err"
    attrs = base_attrs(
        program,
        count="2",
        work_directory=str(work),
        redirect_enable="true",
        stdout_file=str(out),
        stderr_file=str(err),
    )
    attrs[6:6] = [
        ("argument", "--client=host:1234"),
        ("argument", "two words here"),
        ("argument", 'it\'s "quoted" $HOME'),
    ]
    attrs += [
        ("environment", "NG_T_A=x y z"),
        ("environment", "NG_T_SLEEP=1"),
        ("environment", "NG_T_EMPTY"),
    ]
    reply, note = server.create(attrs)
    assert reply == "S"
    _, _, ok, jobid = note.split(" ", 3)
    assert ok == "S" and jobid and " " not in jobid
    assert server.request(f"JOB_STATUS {jobid}") in ("S PENDING", "S ACTIVE", "S DONE")
    seen = server.statuses(jobid)
    assert seen[-1] == "DONE" and seen.count("DONE") == 1
    assert server.request(f"JOB_STATUS {jobid}") == "S DONE"
    reports = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(reports) == 2  # count 2: both processes' outputs, concatenated
    for r in reports:
        assert r["argv"] == ["--client=host:1234", "two words here", 'it\'s "quoted" $HOME']
        assert r["cwd"] == str(work)
        assert r["env"]["NG_T_A"] == "x y z" and r["env"]["NG_T_EMPTY"] == ""
    assert err.read_text() == "stderr line\nstderr line\n"
    assert server.request(f"JOB_DESTROY {jobid}") == "S"  # after DONE: no second notification
    server.send("EXIT")
    assert server.out.get() == "S"
    assert server.proc.wait(60) == 0
    assert server.err.get() is None  # nothing more on stderr


def test_work_directory_defaults_to_the_executables(server, program, tmp_path):
    out = tmp_path / "o"
    _, note = server.create(base_attrs(program, redirect_enable="true", stdout_file=str(out)))
    jobid = note.split()[3]
    server.statuses(jobid)
    assert json.loads(out.read_text())["cwd"] == str(program.parent)


def test_destroy_running_job(server, program, tmp_path):
    pids_file = tmp_path / "pids"
    attrs = base_attrs(program, count="2")
    attrs += [("environment", "NG_T_SLEEP=120"), ("environment", f"NG_T_PIDS={pids_file}")]
    _, note = server.create(attrs)
    jobid = note.split()[3]
    pids = read_pids(pids_file, 2)
    assert server.request(f"JOB_DESTROY {jobid}") == "S"
    seen = server.statuses(jobid)
    assert seen[-1] == "DONE"
    assert seen.count("DONE") + seen.count("FAILED") == 1
    deadline = time.monotonic() + 30
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pids)
    with pytest.raises(queue.Empty):
        server.err.get(timeout=2)  # exactly one terminal notification


@pytest.mark.parametrize("how", ["EXIT", "EOF"])
def test_exit_and_eof_cancel_running_jobs(server, program, tmp_path, how):
    pids_file = tmp_path / "pids"
    attrs = base_attrs(program) + [
        ("environment", "NG_T_SLEEP=120"),
        ("environment", f"NG_T_PIDS={pids_file}"),
    ]
    _, note = server.create(attrs)
    pids = read_pids(pids_file, 1)
    if how == "EXIT":
        assert server.request("EXIT") == "S"
    else:
        server.proc.stdin.close()
    assert server.proc.wait(60) == 0
    deadline = time.monotonic() + 30
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pids)
    rest = []
    while (line := server.err.get()) is not None:
        rest.append(line)
    assert not any(line.startswith("STATUS_NOTIFY") and " DONE" in line for line in rest), rest


def test_bad_requests(server, program, tmp_path):
    assert server.request("NO_SUCH_REQUEST").startswith("F ")
    assert server.request("JOB_STATUS nosuchjob").startswith("F ")
    assert server.request("JOB_DESTROY nosuchjob").startswith("F ")
    assert server.request("JOB_STATUS").startswith("F ")
    reply, note = server.create([("hostname", "localhost"), ("count", "1")])
    assert reply == "S" and note.split()[2] == "F" and "executable_path" in note
    reply, note = server.create(base_attrs(program, count="zero"))
    assert reply == "S" and note.split()[2] == "F" and "count" in note
    reply, note = server.create(base_attrs(program, backend="MPI"))
    assert note.split()[2] == "F" and "MPI" in note
    reply, note = server.create(base_attrs(tmp_path / "missing"))
    assert note.split()[2] == "F" and "missing" in note
    server.send("")  # blank line
    assert server.out.get().startswith("F ")
    server.send("JOB_STATUS x\rJOB_STATUS y\nJOB_STATUS z")  # CR, LF and CRLF all end lines
    assert [server.out.get() for _ in range(3)] == ["F no job x", "F no job y", "F no job z"]


def test_staging_and_auth_number(server, program, tmp_path):
    out = tmp_path / "o"
    attrs = base_attrs(
        program, staging="true", auth_number="12345", redirect_enable="true", stdout_file=str(out)
    )
    _, note = server.create(attrs)
    jobid = note.split()[3]
    assert server.statuses(jobid)[-1] == "DONE"
    report = json.loads(out.read_text())
    auth_arg = report["argv"][-1]
    assert auth_arg.startswith("--authNumberFile=")
    assert report["auth"] == ["12345\n"]
    assert report["cwd"] != str(program.parent)  # a private scratch directory
