"""The real Ninf-G 5.0.0 client, built from IDL, driving this project's invoke servers.

The bundle (``${GAHP_SHARED:-<repo>/../shared}/ninfg/``, unpacked by ``.ci/ninfg-up.sh``)
provides the client library, ``ng_gen``/``ng_cc``, the test kit's ``ng_test_client`` and the
``ng-is-tap`` byte recorder.  A run writes its own ``client.conf``, puts the tap between the
client and ``ng_invoke_server.<TYPE>`` (a wrapper running this worktree's code), and points
the function at a *recorder*: a small program that notes its argv, environment and pid (byte
for byte), writes a marker to stdout and stderr, then execs the real Ninf-G Executable.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUNDLE_NAME = "ninfg-5.0.0-debian12-x86_64.tar.xz"
CLIENT_TIMEOUT = 150.0
"""Seconds one client run may take before it is killed (a hung call must not hang the suite)."""

SERVERS = {
    "Fork": "fork_main",
    "Slurm": "slurm_main",
    "SGE": "sge_main",
    "PBS": "pbs_main",
    "LSF": "lsf_main",
    "Condor": "condor_main",
}

RECORDER = r"""
import json, os, sys, time
rec = {
    "pid": os.getpid(),
    "argv": [os.fsencode(a).decode("latin-1") for a in sys.argv[1:]],
    "env": {k.decode("latin-1"): v.decode("latin-1") for k, v in os.environb.items()},
    "cwd": os.getcwd(),
}
if os.environ.get("_CONDOR_JOB_AD"):  # an HTCondor job: its job ad and cluster.proc
    ad = {}
    with open(os.environ["_CONDOR_JOB_AD"]) as fh:
        for line in fh:
            name, _, value = line.partition("=")
            ad[name.strip()] = value.strip()
    rec["condor_ad"] = ad
    rec["condor_id"] = "%s.%s" % (ad.get("ClusterId"), ad.get("ProcId"))
path = os.path.join(RECORD_DIR, "%d.json" % os.getpid())
with open(path + ".tmp", "w") as fh:
    json.dump(rec, fh)
os.replace(path + ".tmp", path)
print("NGT-STDOUT %d" % os.getpid(), flush=True)
print("NGT-STDERR %d" % os.getpid(), file=sys.stderr, flush=True)
time.sleep(float(os.environ.get("NG_T_DELAY", "0")))
os.execv(REAL, [REAL] + sys.argv[1:])
"""


# ---------------------------------------------------------------------- the bundle
def shared_dir() -> Path:
    return Path(os.environ.get("GAHP_SHARED") or REPO.parent / "shared")


def find_ng_dir(unpack_into: Path) -> tuple[Path | None, str]:
    """NG_DIR: ``$NG_DIR``, else where ``.ci/ninfg-up.sh`` unpacks it, else the bundle
    unpacked into ``unpack_into``; or None and the reason."""
    env_dir = os.environ.get("NG_DIR")
    if env_dir and (Path(env_dir) / "bin/ng_gen").exists():
        return Path(env_dir), ""
    unpacked = Path(os.environ.get("GAHP_NINFG_DIR", "/tmp/gahp-ninfg")) / "ninfg-5.0.0"
    if (unpacked / "test-kit/ng-is-tap").exists():
        return unpacked, ""
    tarball = shared_dir() / "ninfg" / BUNDLE_NAME
    if not tarball.exists():
        return None, f"no Ninf-G bundle at {tarball} (run `bash .ci/ninfg-up.sh`)"
    ng_dir = unpack_into / "ninfg-5.0.0"
    with locked(unpack_into / ".lock"):
        if not (ng_dir / "test-kit/ng-is-tap").exists():
            with tarfile.open(tarball) as tar:
                tar.extractall(unpack_into, filter="tar")
    return ng_dir, ""


class locked:
    """An exclusive file lock (the xdist workers build the sample once between them)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def build_sample(ng_dir: Path, where: Path) -> Path:
    """Build the pi sample (ng_gen, the Executable, ng_cc, the client) with the kit's
    ``run-sample.sh -c``; return the sample directory."""
    sample = where / "sample"
    with locked(where.parent / f".{where.name}.lock"):
        if not (sample / "ng_test_client").exists():
            proc = subprocess.run(
                [
                    "bash",
                    str(ng_dir / "test-kit/run-sample.sh"),
                    "-c",
                    "-w",
                    str(where),
                    sys.executable,
                ],
                env={**os.environ, "NG_DIR": str(ng_dir)},
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"building the Ninf-G sample failed: {proc.stderr[-3000:]}")
    return sample


def write_invoke_servers(where: Path, python: str = sys.executable) -> Path:
    """``ng_invoke_server.<TYPE>`` scripts that run this worktree's servers with ``python``."""
    where.mkdir(parents=True, exist_ok=True)
    for kind, main in SERVERS.items():
        path = where / f"ng_invoke_server.{kind}"
        code = f"from gahp_ninfg.cli import {main}; {main}()"
        path.write_text(f"#!/bin/sh\nPYTHONPATH='{REPO}' exec '{python}' -c '{code}' \"$@\"\n")
        path.chmod(0o755)
    return where


def write_recorder(path: Path, record_dir: Path, real: Path, python: str = sys.executable) -> Path:
    """The recorder program at ``path`` (see the module documentation), run by ``python``."""
    record_dir.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = f"#!{python}\nRECORD_DIR = {str(record_dir)!r}\nREAL = {str(real)!r}\n"
    path.write_text(head + RECORDER)
    path.chmod(0o755)
    return path


# ---------------------------------------------------------------------- one client run
STEP = re.compile(r"^\[\s*([\d.]+)\] (.+?) -> (.+)$")


@dataclass
class Step:
    t: float
    what: str
    result: str


@dataclass
class TapRecord:
    t: float
    tag: str
    data: bytes | str | int | list[str]


@dataclass
class Result:
    """What one run of ``ng_test_client`` left: its outcome as the client reported it."""

    rundir: Path
    rc: int
    stdout: str
    stderr: str
    steps: list[Step] = field(default_factory=list)

    def step(self, prefix: str) -> Step:
        for s in self.steps:
            if s.what.startswith(prefix):
                return s
        raise AssertionError(f"no step {prefix!r} in:\n{self.stdout}\n{self.stderr}")

    def ok(self, prefix: str) -> bool:
        return self.step(prefix).result == "OK"

    @property
    def client_log(self) -> str:
        path = self.rundir / "client.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def server_logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.rundir.glob("is.*")))

    def tap(self) -> list[TapRecord]:
        """Every tap record, of every invoke-server process, in order."""
        out: list[TapRecord] = []
        for path in sorted(self.rundir.glob("tap.*.log")):
            for line in path.read_text().splitlines():
                stamp, tag, rest = line.split(" ", 2)
                if rest.startswith(("EOF", "'EOF'")) or tag not in ("C>", "O<", "E<", "PID"):
                    if tag in ("C>", "O<", "E<"):
                        tag += " EOF"
                    else:
                        continue
                h, m, s = stamp.split(":")
                try:
                    data = ast.literal_eval(rest)
                except (ValueError, SyntaxError):
                    continue
                out.append(TapRecord(int(h) * 3600 + int(m) * 60 + float(s), tag, data))
        return sorted(out, key=lambda r: r.t)

    def lines(self, tag: str) -> list[tuple[float, bytes]]:
        """The CRLF-terminated lines one direction carried (tag C>, O< or E<), each with
        the time of the chunk that completed it."""
        out: list[tuple[float, bytes]] = []
        buf = b""
        for rec in self.tap():
            if rec.tag != tag or not isinstance(rec.data, bytes):
                continue
            buf += rec.data
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                out.append((rec.t, line))
        return out

    def server_pids(self) -> list[int]:
        return [int(r.data) for r in self.tap() if r.tag == "PID" and isinstance(r.data, int)]

    def records(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted((self.rundir / "rec").glob("*.json"))]


@dataclass
class NgClient:
    """Writes ``client.conf`` for one backend and runs ``ng_test_client`` with it."""

    ng_dir: Path
    sample: Path
    servers: Path
    kind: str
    rundir: Path
    env: Mapping[str, str]
    server_lines: list[str] = field(default_factory=list)
    invoke_lines: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    executable: Path | None = None
    proc: subprocess.Popen[str] | None = None
    run_as: str | None = None
    """Run the client as this user (through ``runuser``; the run directory becomes its)."""
    python: str = sys.executable
    """The interpreter of the recorder (one ``run_as`` may run)."""

    def __post_init__(self) -> None:
        self.rundir.mkdir(parents=True, exist_ok=True)
        (self.rundir / "tmp").mkdir(exist_ok=True)
        self.recorder = write_recorder(
            self.rundir / "bin" / "recorder",
            self.rundir / "rec",
            self.sample / "_stub_pi_trial",
            self.python,
        )
        self.executable = self.recorder

    @property
    def tmpdir(self) -> Path:
        """The TMPDIR of the client and so of the invoke server."""
        return self.rundir / "tmp"

    def _tap(self) -> Path:
        tap = self.rundir / "tap"
        real = tap / "real"
        real.mkdir(parents=True, exist_ok=True)
        name = f"ng_invoke_server.{self.kind}"
        for link, target in (
            (tap / name, self.ng_dir / "test-kit/ng-is-tap"),
            (real / name, self.servers / name),
        ):
            if not link.exists():
                link.symlink_to(target)
        return tap / name

    def config(self) -> Path:
        is_path = self._tap()
        text = [
            "<CLIENT>",
            "    loglevel 4",
            f"    log_filePath {self.rundir}/client.log",
            "    log_overwriteDirectory true",
            "</CLIENT>",
            "<INVOKE_SERVER>",
            f"    type {self.kind}",
            f"    path {is_path}",
            f"    log_filePath {self.rundir}/is.{self.kind}.log",
            *(f"    {line}" for line in self.invoke_lines),
            "</INVOKE_SERVER>",
            "<INFORMATION_SOURCE>",
            "    type NRF",
            "    tag nrf",
            f"    source {self.sample}/pi.localhost-client.nrf",
            "</INFORMATION_SOURCE>",
            "<FUNCTION_INFO>",
            "    hostname localhost",
            "    funcname pi/pi_trial",
            f"    path {self.executable}",
            "</FUNCTION_INFO>",
            "<SERVER>",
            "    hostname localhost",
            f"    invoke_server {self.kind}",
            *(f"    {line}" for line in self.server_lines),
            "</SERVER>",
        ]
        path = self.rundir / "client.conf"
        path.write_text("\n".join(text) + "\n")
        return path

    def _environment(self) -> dict[str, str]:
        env = {**os.environ, **self.env, **self.extra_env}
        env.update(
            NG_DIR=str(self.ng_dir),
            TMPDIR=str(self.tmpdir),
            NG_IS_TAP_REAL_DIR=str(self.rundir / "tap" / "real"),
            NG_IS_TAP_DIR=str(self.rundir),
        )
        return env

    def start(self, mode: str, n: int = 1, times: int = 100000, sleep_s: int = 2) -> None:
        argv = [
            str(self.sample / "ng_test_client"),
            str(self.config()),
            mode,
            "localhost",
            str(n),
            str(times),
            str(sleep_s),
        ]
        env = self._environment()
        user: dict[str, Any] = {}
        if self.run_as is not None:  # the client itself (its pid) runs as that user
            give_tree(self.rundir, self.run_as)
            entry = pwd.getpwnam(self.run_as)
            user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            env.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name)
        with open(self.rundir / "out.txt", "w") as out, open(self.rundir / "err.txt", "w") as err:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.rundir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                text=True,
                start_new_session=True,
                **user,
            )

    def wait(self, timeout: float = CLIENT_TIMEOUT) -> Result:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            rc = self.proc.wait(10)
            raise AssertionError(
                f"ng_test_client did not finish in {timeout} s:\n{self._read('out.txt')}"
            ) from None
        return self.result(rc)

    def run(
        self,
        mode: str,
        n: int = 1,
        times: int = 100000,
        sleep_s: int = 2,
        timeout: float = CLIENT_TIMEOUT,
    ) -> Result:
        self.start(mode, n, times, sleep_s)
        return self.wait(timeout)

    def result(self, rc: int) -> Result:
        out = self._read("out.txt")
        steps = [Step(float(m[1]), m[2], m[3]) for m in map(STEP.match, out.splitlines()) if m]
        return Result(self.rundir, rc, out, self._read("err.txt"), steps)

    def _read(self, name: str) -> str:
        path = self.rundir / name
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for_output(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self._read("out.txt"):
            if time.monotonic() > deadline or (self.proc and self.proc.poll() is not None):
                raise AssertionError(f"{text!r} never printed:\n{self._read('out.txt')}")
            time.sleep(0.05)

    def kill_group(self) -> None:
        """SIGKILL the client and whatever it started that is still in its session."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)


# ---------------------------------------------------------------------- helpers
def attributes(lines: Sequence[tuple[float, bytes]]) -> Iterator[list[tuple[bytes, bytes]]]:
    """The attribute lines of each JOB_CREATE in client-to-server lines."""
    current: list[tuple[bytes, bytes]] | None = None
    for _t, line in lines:
        if line.startswith(b"JOB_CREATE "):
            current = []
        elif line == b"JOB_CREATE_END" and current is not None:
            yield current
            current = None
        elif current is not None:
            name, _, value = line.partition(b" ")
            current.append((name, value))


def give_tree(root: Path, user: str) -> None:
    """Make ``user`` the owner of ``root`` and of everything below it."""
    entry = pwd.getpwnam(user)
    os.chown(root, entry.pw_uid, entry.pw_gid)
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(top, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
