"""CPU per job of boinc-gahp beside BOINC's C GAHP, both driven by the real HTCondor 9.12
gridmanager, against the emulator.

A private personal HTCondor 9.12 (its own directory and loopback ports, run as the job owner
of ``.ci/htcondor-up.sh``; the release that script unpacked when there, else the bundle in
``../shared/htcondor`` unpacked here) runs one J-job ``grid_resource = boinc`` cluster with
our boinc-gahp as ``BOINC_GAHP``, then the same with BOINC's C GAHP, against one emulator
(``--job-delay`` s a job, inline apps). Every job has a directory of its own (``initialdir``)
and reads one small input file the cluster shares (the C GAHP uploads every distinct file of
a batch in one request, and the server takes 20 a request); its upper-cased output ``out``
comes back into its directory and is checked.

For each GAHP: jobs completed (and held); wall time from condor_submit to the last job
leaving the queue (the wait also ends when no job has completed for ``--stall`` s: the C
GAHP loses some jobs' state changes); the CPU of the GAHP process tree (utime + stime of the
GAHP and of its children, reaped or not, from /proc, sampled every 50 ms until it exits:
the gridmanager is stopped at the end, which stops its GAHP; startup included) per job of
the cluster and per completed job; the emulator's HTTP requests per job (and by RPC). Our
GAHP runs from the venv of ``.ci/htcondor-up.sh`` (``/opt/gahp-venv``) with this checkout
first on PYTHONPATH, byte-compiled first as an install would be, logging to a file as that
script's wrapper does. ``--baseline DIR`` adds the boinc-gahp of another checkout (e.g. the
main branch's) to the same run; ``--profile DIR`` runs ours under cProfile (CPU per thread).

Without HTCondor 9.12 (or not as root: jobs run as an unprivileged owner) nothing runs and
it says why; without the C GAHP (``GAHP_BOINC_C_GAHP`` from ``/tmp/gahp-boinc-server/env``,
as ``boinc_vs_c_gahp.py`` finds it) the C GAHP line is skipped, and it says so.

Usage: python benchmarks/boinc_cpu_per_job.py [--jobs 500] [--small] [--ours-only]
                                              [--baseline CHECKOUT] [--profile DIR]
Exit status 1 if one of our jobs did not complete.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent
sys.path[:0] = [str(HERE), str(CHECKOUT / "tests" / "htcondor")]

from boinc_vs_c_gahp import Emulator, read_env  # noqa: E402
from htcondor_kit import DONE, HELD, HTCondor, stop_gridmanagers  # noqa: E402

VERSION = "9.12.0"
C_NAME = "C GAHP"
OWNER = os.environ.get("GAHP_HTCONDOR_USER", "gahpjob")
VENV = Path(os.environ.get("GAHP_VENV", "/opt/gahp-venv"))
SHARED = Path(os.environ.get("GAHP_SHARED", CHECKOUT.parent / "shared"))
TICKS = os.sysconf("SC_CLK_TCK")
PROFILED = """\
import cProfile, os, sys, time
prof = cProfile.Profile(time.thread_time)
real_exit = os._exit
def dump_and_exit(code):
    prof.disable()
    prof.dump_stats(os.path.join(sys.argv[1], f"boinc-gahp-{os.getpid()}.prof"))
    real_exit(code)
os._exit = dump_and_exit
prof.enable()
from gahp_boinc.cli import main
main(sys.argv[2:])
"""
"""boinc-gahp under cProfile (imports included; it ends with ``os._exit``):
``python -c PROFILED DIR ARGS...``."""


# ---- CPU of a process tree -------------------------------------------------------------------


def _stat_times(pid: int) -> tuple[int, int] | None:
    """(utime + stime + cutime + cstime in clock ticks, parent pid) of a process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2 :].split()
    return int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]), int(f[1])


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out += [int(c) for c in (task / "children").read_text().split()]
    return out


def tree_ticks(root: int) -> int | None:
    """CPU ticks of a process and its live descendants (reaped ones are in their parent's
    cutime/cstime); None once the root is gone."""
    first = _stat_times(root)
    if first is None:
        return None
    total, todo = first[0], _children(root)
    while todo:
        pid = todo.pop()
        t = _stat_times(pid)
        if t is not None:
            total += t[0]
            todo += _children(pid)
    return total


class TreeSampler:
    """Samples the CPU of every GAHP process tree whose pid the wrapper appends to a file,
    every ``interval`` s, in a thread; each tree's figure is its largest sample."""

    def __init__(self, pid_file: Path, interval: float = 0.05) -> None:
        self.pid_file, self.interval = pid_file, interval
        self.best: dict[int, int] = {}
        self.gone: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in self.pid_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def sample(self) -> None:
        for pid in self._pids():
            if pid in self.gone:
                continue
            t = tree_ticks(pid)
            if t is None:
                self.gone.add(pid)
            else:
                self.best[pid] = max(t, self.best.get(pid, 0))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def all_gone(self) -> bool:
        return bool(self.best) and all(p in self.gone for p in self._pids())

    def stop(self) -> float:
        """Stop sampling; the CPU seconds of every tree seen."""
        self._stop.set()
        self._thread.join()
        return sum(self.best.values()) / TICKS


# ---- a private personal HTCondor -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_release(scratch: Path) -> tuple[Path | None, str]:
    """An HTCondor 9.12 release directory: CI's, or the shared bundle unpacked into
    ``scratch``; else None and why."""
    ci = (
        Path(os.environ.get("GAHP_HTCONDOR_PREFIX", "/tmp/gahp-htcondor-").rstrip("/") + VERSION)
        / "release"
    )
    if (ci / "sbin" / "condor_master").is_file():
        return ci, ""
    bundle = SHARED / "htcondor" / f"htcondor-{VERSION}-debian12-x86_64.tar.xz"
    if not bundle.is_file():
        return None, f"no HTCondor {VERSION}: neither {ci} nor {bundle}"
    with tarfile.open(bundle) as tar:
        tar.extractall(scratch, filter="tar")
    rel = scratch / f"htcondor-{VERSION}"
    return (
        (rel, "")
        if (rel / "sbin" / "condor_master").is_file()
        else (None, f"{bundle} holds no sbin/condor_master")
    )


class PrivateCondor:
    """condor_master + schedd in ``home`` (loopback only, run as ``owner``), its
    ``BOINC_GAHP`` a wrapper that runs whatever ``set_gahp`` last named."""

    def __init__(self, home: Path, release: Path, owner: str) -> None:
        self.home, self.release, self.owner = home, release, owner
        pw = pwd.getpwnam(owner)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        local = home / "local"
        for d in ("log", "spool", "execute", "lock", "run"):
            (local / d).mkdir(parents=True)
        (home / "bin").mkdir()
        self.wrapper = home / "bin" / "boinc-gahp"
        self.pid_file = home / "gahp.pids"
        self.config = home / "condor_config"
        self.config.write_text(f"""\
RELEASE_DIR = {release}
LOCAL_DIR = {local}
BIN = $(RELEASE_DIR)/bin
SBIN = $(RELEASE_DIR)/sbin
LIB = $(RELEASE_DIR)/lib
LIBEXEC = $(RELEASE_DIR)/libexec
LOG = $(LOCAL_DIR)/log
SPOOL = $(LOCAL_DIR)/spool
EXECUTE = $(LOCAL_DIR)/execute
LOCK = $(LOCAL_DIR)/lock
RUN = $(LOCAL_DIR)/run
CONDOR_HOST = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:{free_port()}
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
USE_SHARED_PORT = False
DAEMON_LIST = MASTER, SCHEDD
START = False
UID_DOMAIN = localhost
FILESYSTEM_DOMAIN = localhost
SEC_DEFAULT_AUTHENTICATION_METHODS = FS
SEC_CLIENT_AUTHENTICATION_METHODS = FS
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_ADMINISTRATOR = *
ALLOW_DAEMON = *
ALLOW_OWNER = *
ALLOW_CONFIG = *
ALLOW_NEGOTIATOR = *
MAIL = /bin/true
GRIDMANAGER = $(SBIN)/condor_gridmanager
BOINC_GAHP = {self.wrapper}
GRIDMANAGER_DEBUG = D_FULLDEBUG
GRIDMANAGER_JOB_PROBE_INTERVAL = 2
GRIDMANAGER_JOB_PROBE_RATE = 50
GRIDMANAGER_RESOURCE_PROBE_INTERVAL = 10
GRIDMANAGER_CONTACT_SCHEDD_DELAY = 1
GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE = 1000
SCHEDD_INTERVAL = 5
SCHEDD_MIN_INTERVAL = 1
JOB_IS_FINISHED_INTERVAL = 0
SCHEDD_DEBUG = D_ALWAYS
""")
        self.set_gahp(["/bin/false"])
        os.chown(local, self.uid, self.gid)
        for p in local.rglob("*"):
            os.chown(p, self.uid, self.gid)
        self.condor = HTCondor(
            {
                "GAHP_HTCONDOR_VERSION": VERSION,
                "CONDOR_CONFIG": str(self.config),
                "GAHP_HTCONDOR_BIN": str(release / "bin"),
                "GAHP_HTCONDOR_USER": owner,
                "GAHP_HTCONDOR_DIR": str(home),
                "GAHP_HTCONDOR_LOG": str(local / "log"),
            }
        )

    def set_gahp(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        """The next GAHP the gridmanager starts runs ``argv`` (its pid appended to pid_file)."""
        self.pid_file.write_text("")
        os.chown(self.pid_file, self.uid, self.gid)
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
        self.wrapper.write_text(
            f"#!/bin/sh\n{exports}echo $$ >> '{self.pid_file}'\nexec {shlex.join(argv)} \"$@\"\n"
        )
        self.wrapper.chmod(0o755)

    def start(self, wait_s: float = 60) -> None:
        subprocess.run(
            [
                "runuser",
                "-u",
                self.owner,
                "--",
                "env",
                f"CONDOR_CONFIG={self.config}",
                str(self.release / "sbin" / "condor_master"),
                "-pidfile",
                str(self.home / "local" / "run" / "master.pid"),
            ],
            check=True,
            timeout=30,
        )
        end = time.monotonic() + wait_s
        while not self.condor.answers():
            if time.monotonic() > end:
                raise SystemExit(f"the private HTCondor in {self.home} did not answer")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM condor_master (it stops the schedd and gridmanagers) and wait for it."""
        try:
            pid = int((self.home / "local" / "run" / "master.pid").read_text())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            return
        end = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
            time.sleep(0.2)
        if Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGQUIT)


def owner_reads(path: Path) -> bool:
    """Whether the job owner (who runs the GAHPs) can read ``path``."""
    test = subprocess.run(["runuser", "-u", OWNER, "--", "test", "-r", str(path)], check=False)
    return test.returncode == 0


def compile_checkout(python: Path, checkout: Path) -> None:
    """Byte-compile a checkout's packages (``__pycache__``), as installing them does: the
    GAHP's user may not write there, and startup is part of the figure."""
    subprocess.run(
        [
            str(python),
            "-m",
            "compileall",
            "-q",
            *(str(checkout / d) for d in ("gahp_core", "gahp_boinc")),
        ],
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
    )


# ---- one run ---------------------------------------------------------------------------------


@attrs.frozen
class Result:
    """One GAHP's run."""

    name: str
    jobs: int
    done: int
    held: int
    wall_s: float
    cpu_s: float
    requests: int
    by_rpc: dict[str, int]

    @property
    def cpu_ms_per_job(self) -> float:
        return 1000 * self.cpu_s / self.jobs

    @property
    def cpu_ms_per_done_job(self) -> float | None:
        return 1000 * self.cpu_s / self.done if self.done else None

    @property
    def requests_per_job(self) -> float:
        return self.requests / self.jobs


def run_one(
    pc: PrivateCondor,
    emu: Emulator,
    name: str,
    argv: list[str],
    env: dict[str, str],
    jobs: int,
    work: Path,
    deadline_s: float,
    stall_s: float,
    first_s: float = 30.0,
) -> Result:
    """One J-job grid-boinc cluster through the GAHP ``argv``; its figures. The wait ends
    when every job has completed or is held, after ``deadline_s``, or when no job has
    completed for ``stall_s`` (``first_s`` more before the first one); wall time ends
    with the last completion then."""
    condor = pc.condor
    pc.set_gahp(argv, env)
    jobdir = work / re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
    jobdir.mkdir(parents=True)
    (jobdir / "auth").write_text(emu.auth + "\n")
    (jobdir / "in").write_text(f"input of {name}\n")
    for i in range(jobs):
        (jobdir / f"j{i}").mkdir()
    for p in [jobdir, *jobdir.rglob("*")]:
        os.chown(p, pc.uid, pc.gid)
    emu.ask("reset")
    sampler = TreeSampler(pc.pid_file)
    t0 = time.monotonic()
    cluster = condor.submit(
        jobdir,
        (
            f"universe = grid\ngrid_resource = boinc {emu.url}\n"
            f"boinc_authenticator_file = {jobdir / 'auth'}\n"
            "executable = worker\ninitialdir = j$(Process)\n"
            f"transfer_input_files = {jobdir / 'in'}\n"
            "output = job.out\nerror = job.err\nlog = ../jobs.log\n"
            f"queue {jobs}\n"
        ),
    )
    done = held = 0
    end = t0 + deadline_s
    changed = t0 + first_s
    while time.monotonic() < min(end, changed + stall_s):
        held = sum(1 for a in condor.ads([cluster]).values() if a.get("JobStatus") == HELD)
        now_done = sum(
            1 for a in condor.in_history([cluster]).values() if a.get("JobStatus") == DONE
        )
        if now_done != done:
            done, changed = now_done, time.monotonic()
        if done + held >= jobs:
            break
        time.sleep(1)
    wall = (time.monotonic() if done + held >= jobs else changed) - t0
    stop_gridmanagers(condor)
    end = time.monotonic() + 10
    while not sampler.all_gone() and time.monotonic() < end:
        time.sleep(0.05)
    cpu = sampler.stop()
    stats = emu.ask("stats")
    ok = sum(
        1
        for i in range(jobs)
        if (jobdir / f"j{i}" / "out").is_file()
        and (jobdir / f"j{i}" / "out").read_text() == f"INPUT OF {name.upper()}\n"
    )
    condor.tool("condor_rm", str(cluster))
    condor.tool("condor_rm", "-forcex", str(cluster))
    stop_gridmanagers(condor)
    requests = int(stats.pop("requests", 0))
    stats.pop("bytes_uploaded", None)
    return Result(
        name,
        jobs,
        min(done, ok),
        held,
        wall,
        cpu,
        requests,
        {k: int(v) for k, v in sorted(stats.items())},
    )


def print_table(results: list[Result]) -> None:
    head = (
        "GAHP",
        "jobs done",
        "held",
        "wall",
        "GAHP CPU",
        "CPU per job",
        "CPU per job done",
        "HTTP requests per job",
    )
    rows = [head] + [
        (
            r.name,
            f"{r.done}/{r.jobs}",
            str(r.held),
            f"{r.wall_s:.1f} s",
            f"{r.cpu_s:.2f} s",
            f"{r.cpu_ms_per_job:.2f} ms",
            "-" if r.cpu_ms_per_done_job is None else f"{r.cpu_ms_per_done_job:.2f} ms",
            f"{r.requests_per_job:.2f}",
        )
        for r in results
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for i, r in enumerate(rows):
        print("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in results:
        print(f"{r.name} requests by RPC: " + ", ".join(f"{k} {v}" for k, v in r.by_rpc.items()))
    c = next((r for r in results if r.name == C_NAME and r.cpu_s > 0), None)
    for r in results:
        if c is not None and r is not c:
            print(f"CPU per job, {r.name} / C GAHP: {r.cpu_ms_per_job / c.cpu_ms_per_job:.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument(
        "--job-delay",
        type=float,
        default=0.02,
        help="seconds the emulator's volunteers take per job",
    )
    p.add_argument("--deadline", type=float, default=300, help="seconds to wait per cluster")
    p.add_argument(
        "--stall",
        type=float,
        default=30,
        help="stop waiting after this many seconds without a job completing",
    )
    p.add_argument("--small", action="store_true", help="CI size: 100 jobs")
    p.add_argument("--ours-only", action="store_true", help="leave out the C GAHP")
    p.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        type=Path,
        help="also run the boinc-gahp of another checkout (e.g. the main branch's), first",
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="run boinc-gahp under cProfile, its stats into DIR (CPU figures grow)",
    )
    a = p.parse_args(argv)
    if a.small:
        a.jobs, a.deadline, a.stall = 100, 60, 10
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        print("skipped: jobs run as an unprivileged owner (as in .ci/htcondor-up.sh): run as root")
        return 0
    try:
        pwd.getpwnam(OWNER)
    except KeyError:
        print(f"skipped: no user {OWNER} (made by .ci/htcondor-up.sh)")
        return 0
    python = VENV / "bin" / "python"
    if not os.access(python, os.X_OK):
        print(f"skipped: no venv {VENV} (made by .ci/htcondor-up.sh)")
        return 0
    c_gahp = read_env().get("GAHP_BOINC_C_GAHP", "")
    if a.ours_only:
        c_gahp = ""
    elif not c_gahp or not os.access(c_gahp, os.X_OK):
        print(
            f"C GAHP line skipped: no C GAHP binary ({c_gahp or 'GAHP_BOINC_C_GAHP unset'}; "
            "bash .ci/boinc-server-up.sh builds it from ../shared/boinc-server)"
        )
        c_gahp = ""
    work = Path(tempfile.mkdtemp(prefix="boinc-cpu-"))
    work.chmod(0o755)
    release, why = find_release(work)
    if release is None:
        print(f"skipped: {why}")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    print(
        f"HTCondor {VERSION} from {release}; {a.jobs} jobs a GAHP; load before: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    pc = PrivateCondor(work / "condor", release, OWNER)
    emu = Emulator(work / "emu-state", a.job_delay)
    emu.ask("resume")
    results: list[Result] = []
    try:
        pc.start()
        ours = [str(python), "-m", "gahp_boinc"]
        if a.profile:
            a.profile.mkdir(parents=True, exist_ok=True)
            os.chown(a.profile, pc.uid, pc.gid)
            ours = [str(python), "-c", PROFILED, str(a.profile.resolve())]
        log = pc.home / "local" / "log" / "boinc-gahp.log"
        for checkout in [CHECKOUT, *([a.baseline] if a.baseline else [])]:
            compile_checkout(python, checkout)
        env = {"PYTHONPATH": str(CHECKOUT)}
        if not owner_reads(CHECKOUT / "gahp_boinc" / "__init__.py"):
            print(f"{OWNER} cannot read {CHECKOUT}: boinc-gahp as installed in {VENV}")
            env = {}
        gahps = [("boinc-gahp", [*ours, "--log", str(log)], env)]
        if a.baseline:
            gahps.insert(
                0,
                (
                    f"boinc-gahp ({a.baseline})",
                    [*ours, "--log", str(log)],
                    {"PYTHONPATH": str(a.baseline.resolve())},
                ),
            )
        if c_gahp:
            gahps.append((C_NAME, [c_gahp], {}))
        for name, cmd, env in gahps:
            results.append(
                run_one(pc, emu, name, cmd, env, a.jobs, work / "jobs", a.deadline, a.stall)
            )
    finally:
        pc.stop()
        emu.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_table(results)
    ours = next(r for r in results if r.name == "boinc-gahp")
    if ours.done != ours.jobs:
        print(f"FAILED: {ours.jobs - ours.done} of boinc-gahp's jobs did not complete")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
