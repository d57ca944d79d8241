"""Helpers for driving personal HTCondors started by
`.ci/htcondor-up.sh VERSION`, found through their env files (/tmp/gahp-htcondor-VERSION/env).

Jobs are submitted with ``condor_submit`` as the job owner (runuser), from job directories the
owner can write, and their outcome is read from ``condor_q``, ``condor_history`` and the user
log, as a user would.  Without an HTCondor the tests skip with the reason; with
GAHP_REQUIRE_HTCONDOR=1 (CI) they fail instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gahp_core import testing

VERSIONS = ("9.12.0", "25.0.13")
DONE, HELD, REMOVED, RUNNING, IDLE = 4, 5, 3, 2, 1
JOBS_ROOT = Path(os.environ.get("GAHP_HTCONDOR_JOBS", "/tmp/gahp-htcondor-jobs"))


def env_file(version: str) -> Path:
    """Where `.ci/htcondor-up.sh VERSION` writes its env file."""
    base = os.environ.get("GAHP_HTCONDOR_PREFIX", "/tmp/gahp-htcondor-")
    return Path(f"{base}{version}") / "env"


def read_env(path: Path) -> dict[str, str]:
    """NAME=VALUE lines of an env file (no expansion except a trailing ``:$PATH``)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name and not name.startswith("#"):
            out[name.strip()] = value.strip()
    return out


class HTCondor:
    """One personal HTCondor, used as its job owner."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.version = settings["GAHP_HTCONDOR_VERSION"]
        self.config = settings["CONDOR_CONFIG"]
        self.bin = Path(settings["GAHP_HTCONDOR_BIN"])
        self.owner = settings["GAHP_HTCONDOR_USER"]
        self.dir = Path(settings["GAHP_HTCONDOR_DIR"])
        self.log_dir = Path(settings["GAHP_HTCONDOR_LOG"])
        pw = pwd.getpwnam(self.owner)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def __repr__(self) -> str:
        return f"HTCondor({self.version})"

    # ------------------------------------------------------------------ tools
    def tool(self, name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run an HTCondor tool as the job owner."""
        cmd = [
            "runuser",
            "-u",
            self.owner,
            "--",
            "env",
            f"CONDOR_CONFIG={self.config}",
            str(self.bin / name),
            *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def answers(self) -> bool:
        try:
            return self.tool("condor_q", "-totals", timeout=20).returncode == 0
        except (subprocess.TimeoutExpired, OSError):
            return False

    def submit(self, jobdir: Path, text: str, name: str = "job.sub") -> int:
        """condor_submit a description from ``jobdir``; the cluster id."""
        sub = jobdir / name
        sub.write_text(text)
        os.chown(sub, self.uid, self.gid)
        cmd = [
            "runuser",
            "-u",
            self.owner,
            "--",
            "env",
            f"CONDOR_CONFIG={self.config}",
            str(self.bin / "condor_submit"),
            sub.name,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=jobdir)
        m = re.search(r"submitted to cluster (\d+)", proc.stdout)
        assert proc.returncode == 0 and m, f"condor_submit failed: {proc.stdout}{proc.stderr}"
        return int(m.group(1))

    def _json(self, tool: str, constraint: str) -> list[dict[str, Any]]:
        proc = self.tool(tool, "-json", "-constraint", constraint)
        assert proc.returncode == 0, f"{tool}: {proc.stderr}"
        text = proc.stdout.strip()
        return json.loads(text) if text else []

    def ads(self, clusters: Iterable[int]) -> dict[tuple[int, int], dict[str, Any]]:
        """The job ads of these clusters, (cluster, proc) -> ad; the queue wins over history.

        The queue is read first: the schedd writes a job's history record before the job
        leaves the queue, so a job that leaves between the two reads is in the second one
        (read the other way round, it could be in neither)."""
        ids = sorted(set(clusters))
        if not ids:
            return {}
        constraint = " || ".join(f"ClusterId == {c}" for c in ids)
        queued = {(a["ClusterId"], a["ProcId"]): a for a in self._json("condor_q", constraint)}
        out = {(a["ClusterId"], a["ProcId"]): a for a in self._json("condor_history", constraint)}
        out.update(queued)
        return out

    def remove(self, clusters: Iterable[int], deadline_s: float = 30) -> None:
        """condor_rm these clusters and wait until they leave the queue; what is still there
        at the deadline (e.g. a job whose remote side cannot be reached any more) is removed
        locally with ``-forcex``."""
        ids = [str(c) for c in sorted(set(clusters))]
        if not ids:
            return
        constraint = " || ".join(f"ClusterId == {c}" for c in ids)
        self.tool("condor_rm", *ids)
        end = time.monotonic() + deadline_s
        while self._json("condor_q", constraint):
            if time.monotonic() > end:
                self.tool("condor_rm", *ids)  # a job held again meanwhile
                self.tool("condor_rm", "-forcex", *ids)
                return
            time.sleep(1)

    def in_history(self, clusters: Iterable[int]) -> dict[tuple[int, int], dict[str, Any]]:
        ids = sorted(set(clusters))
        constraint = " || ".join(f"ClusterId == {c}" for c in ids)
        return {(a["ClusterId"], a["ProcId"]): a for a in self._json("condor_history", constraint)}

    # ------------------------------------------------------------------ logs
    @property
    def gridmanager_log(self) -> Path:
        return self.log_dir / f"GridmanagerLog.{self.owner}"

    def gahp_lines(self, *needles: str) -> list[str]:
        """The GridmanagerLog's GAHP protocol lines (``GAHP[pid] <-``/``->``) containing every
        needle, from all rotated files."""
        lines: list[str] = []
        for path in sorted(self.log_dir.glob(f"GridmanagerLog.{self.owner}*"), reverse=True):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                if "GAHP[" in line and all(n in line for n in needles):
                    lines.append(line)
        return lines


def wait_for(check: Callable[[], Any], deadline_s: float, what: str, interval: float = 1.0) -> Any:
    """:func:`gahp_core.testing.wait_for`, once a second: each check asks HTCondor."""
    return testing.wait_for(check, deadline_s, what, interval)


def user_log_events(path: Path) -> list[int]:
    """Event codes of a job's user log (``005 (...)`` -> 5)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [int(m.group(1)) for m in re.finditer(r"^(\d{3}) \(\d+\.\d+\.\d+\)", text, re.M)]


def owned(condor: HTCondor, path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, owned by the job owner."""
    path.write_text(text)
    os.chown(path, condor.uid, condor.gid)
    return path


@dataclass
class Emulator:
    """A boinc-emulator process on loopback."""

    proc: subprocess.Popen
    url: str
    authenticator: str
    state: Path | None = None

    def workunits(self) -> int:
        """How many jobs (workunits) the project holds, from its database."""
        assert self.state is not None
        db = sqlite3.connect(f"file:{self.state / 'project.sqlite'}?mode=ro", uri=True)
        try:
            return int(db.execute("SELECT count(*) FROM workunit").fetchone()[0])
        finally:
            db.close()


# ---------------------------------------------------------------------- processes
def _children(ppid: int, comm: str) -> list[int]:
    """Pids of the live processes whose parent is ``ppid`` and whose name starts with ``comm``."""
    out: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[1]) == ppid and fields[0] != "Z" and name.startswith(comm[:15]):
            out.append(int(stat.parent.name))
    return out


def gridmanagers(condor: HTCondor, master_pidfile: Path | None = None) -> list[int]:
    """The gridmanager processes of this HTCondor (children of its master's schedd; the
    master's pid file is ``local/run/master.pid`` unless given)."""
    pidfile = master_pidfile or condor.dir / "local" / "run" / "master.pid"
    try:
        master = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return []
    schedds = _children(master, "condor_schedd")
    return [g for s in schedds for g in _children(s, "condor_gridmanager")]


def gahp_pid(condor: HTCondor, *needles: str) -> int | None:
    """The pid of the GAHP process that the last GridmanagerLog line with these needles names."""
    lines = condor.gahp_lines(*needles)
    if not lines:
        return None
    return int(lines[-1].split("GAHP[", 1)[1].split("]", 1)[0])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2 :].split()[0] != "Z"


def stop_gridmanagers(condor: HTCondor, deadline_s: float = 30) -> None:
    """SIGTERM this HTCondor's gridmanagers (they stop their GAHPs) and wait for them."""
    pids = gridmanagers(condor)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + deadline_s
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.2)


@contextlib.contextmanager
def running_emulator(state: Path, *extra: str) -> Iterator[Emulator]:
    """Run a boinc-emulator (state in ``state``, more options in ``extra``) on a free
    127.0.0.1 port; stop it after."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gahp_boinc.emulator",
            "--state-dir",
            str(state),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--job-delay",
            "0.3",
            "--volunteers",
            "4",
            "--inline-apps",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        fields: dict[str, str] = {}
        assert proc.stdout is not None
        while len(fields) < 2:
            line = proc.stdout.readline()
            assert line, "boinc-emulator exited before printing its URL"
            key, _, value = line.strip().partition(" ")
            fields[key] = value
        yield Emulator(proc, fields["URL"], fields["AUTHENTICATOR"], state)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
