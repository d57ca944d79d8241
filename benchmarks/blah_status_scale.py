"""blahpd at site scale: one HTCondor-style status poll round over N jobs, per job vs registry.

On the live Slurm (and Grid Engine, OpenPBS and LSF when up), N jobs are submitted held (they
stay queued and use no CPU) through the job driver blahpd uses, into the state directory of
the "after" blahpd (so they are tracked, as jobs blahpd submitted are).  Then one poll round, as the
gridmanager does it: a BLAH_JOB_STATUS for every job over pipes, 50 in flight, for

* NATIVE: a shell loop of the batch system's own status command for one job (``scontrol show
  job``, ``qstat -j``, ``qstat -x -f``, ``bjobs -l``) over the N jobs: the anchor;
* BEFORE: ``status_registry = false`` (the per-job path: one status command per job);
* AFTER: the status registry (``status_interval`` 5 s): a round that refreshes it (one bulk
  query), a second round at once (answered from it), a third after the interval.

Each round reports its wall time, the batch-system commands run (counted by shims in a
``bin_dir`` that log each call, then exec the real command) and, for Slurm, the controller
RPCs counted by ``sdiag`` (by message type, before/after difference; other users of the
controller add noise).  Then submit throughput, Slurm: blahpd (50 submits in flight) against
a shell loop of ``sbatch`` for the same job.  Everything submitted is cancelled at the end.

Usage: python benchmarks/blah_status_scale.py [--small] [--n N] [--systems slurm,sge,pbs,lsf]
(N = 2000 on Slurm and Grid Engine, 300 on PBS and LSF; 200 with --small; needs
`bash .ci/slurm-up.sh`, `bash .ci/sge-up.sh`, `bash .ci/pbs-up.sh`, `bash .ci/lsf-up.sh`)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gahp_blah.jobids import make_job_id
from gahp_core import GahpClient
from gahp_lrms import JobSpec, get_driver

BLAHPD = [sys.executable, "-m", "gahp_blah"]
COMMANDS = {
    "slurm": ["sbatch", "squeue", "scontrol", "sacct", "scancel"],
    "sge": ["qsub", "qstat", "qacct", "qdel", "qhold", "qrls", "qmod"],
    "pbs": ["qsub", "qstat", "qdel", "qhold", "qrls"],
    "lsf": ["bsub", "bjobs", "bhist", "bkill", "bstop", "bresume", "bqueues"],
}
NATIVE = {  # the batch system's own status command for one job
    "slurm": ["scontrol", "show", "job"],
    "sge": ["qstat", "-j"],
    "pbs": ["qstat", "-x", "-f"],
    "lsf": ["bjobs", "-l"],
}
INTERVAL = 5.0


# ---------------------------------------------------------------------- environment
def slurm_env() -> dict[str, str] | None:
    env = dict(os.environ)
    conf = Path(os.environ.get("GAHP_SLURM_DIR", "/tmp/gahp-slurm")) / "slurm.conf"
    if "SLURM_CONF" not in env and conf.exists():
        env["SLURM_CONF"] = str(conf)
    if shutil.which("sinfo") is None:
        return None
    proc = subprocess.run(["sinfo", "-h"], env=env, capture_output=True, timeout=15)
    return env if proc.returncode == 0 else None


def sge_env() -> dict[str, str] | None:
    env = dict(os.environ)
    path = Path(os.environ.get("GAHP_SGE_DIR", "/tmp/gahp-sge")) / "env"
    if "SGE_ROOT" not in env and path.exists():
        for line in path.read_text().splitlines():
            name, sep, value = line.removeprefix("export ").partition("=")
            if sep and name.startswith("SGE_"):
                env[name] = value.strip("'\"")
    if "SGE_ROOT" not in env:
        return None
    qstat = sorted(Path(env["SGE_ROOT"], "bin").glob("*/qstat"))
    if not qstat:
        return None
    proc = subprocess.run([str(qstat[0]), "-g", "c"], env=env, capture_output=True, timeout=15)
    return env if proc.returncode == 0 else None


def _settings(path: Path) -> dict[str, str]:
    """``export NAME=value`` lines of a file the .ci/*-up.sh scripts write."""
    if not path.exists():
        return {}
    pairs = (line.removeprefix("export ").partition("=") for line in path.read_text().splitlines())
    return {name: value.strip("'\"") for name, sep, value in pairs if sep}


def pbs_env() -> dict[str, str] | None:
    settings = _settings(Path(os.environ.get("GAHP_PBS_DIR", "/tmp/gahp-pbs")) / "env")
    if "GAHP_PBS_BIN_DIR" not in settings:
        return None
    env = {**os.environ, **settings}
    qstat = Path(settings["GAHP_PBS_BIN_DIR"]) / "qstat"
    proc = subprocess.run([str(qstat), "-B"], env=env, capture_output=True, timeout=15)
    return env if proc.returncode == 0 else None


LSF_USER = os.environ.get("GAHP_LSF_USER", "gahplsf")
"""As root, the LSF commands run as this user (LSF refuses root's jobs); made if missing."""


def lsf_as_user(bindir: str, where: Path) -> str:
    """``bindir`` itself, or, as root, a directory of wrappers running its commands as
    :data:`LSF_USER`."""
    if os.geteuid() != 0:
        return bindir
    if subprocess.run(["id", LSF_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", LSF_USER], check=True)
    wrappers = where / "lsf-as-user"
    wrappers.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS["lsf"]:
        path = wrappers / name
        path.write_text(f'#!/bin/sh\nexec runuser -u {LSF_USER} -- {bindir}/{name} "$@"\n')
        path.chmod(0o755)
    return str(wrappers)


def lsf_env(work: Path) -> dict[str, str] | None:
    envdir = os.environ.get("LSF_ENVDIR") or _settings(
        Path(os.environ.get("GAHP_LSF_DIR", "/tmp/gahp-lsf")) / "env"
    ).get("LSF_ENVDIR")
    bindir = _settings(Path(envdir) / "lsf.conf").get("LSF_BINDIR") if envdir else None
    if not envdir or not bindir:
        return None
    bindir = lsf_as_user(bindir, work)
    env = {**os.environ, "LSF_ENVDIR": envdir, "GAHP_LSF_BIN_DIR": bindir}
    proc = subprocess.run([f"{bindir}/bqueues"], env=env, capture_output=True, timeout=15)
    return env if proc.returncode == 0 else None


def real_bin(system: str, env: dict[str, str]) -> Path:
    if system == "slurm":
        return Path(shutil.which("squeue", path=env.get("PATH")) or "/usr/bin/squeue").parent
    if system == "pbs":
        return Path(env["GAHP_PBS_BIN_DIR"])
    if system == "lsf":
        return Path(env["GAHP_LSF_BIN_DIR"])
    return sorted(Path(env["SGE_ROOT"], "bin").glob("*/qstat"))[0].parent


def make_shims(system: str, real: Path, where: Path) -> Path:
    """A bin_dir whose commands append their name to ``where/calls`` and exec the real one."""
    shims = where / "bin"
    shims.mkdir(parents=True)
    calls = where / "calls"
    calls.touch()
    for name in COMMANDS[system]:
        shim = shims / name
        shim.write_text(f'#!/bin/sh\necho {name} >> "{calls}"\nexec "{real / name}" "$@"\n')
        shim.chmod(0o755)
    return calls


def driver_config(system: str, env: dict[str, str]) -> dict[str, str]:
    if system == "slurm":
        return {"slurm_conf": env["SLURM_CONF"]}
    if system == "pbs":
        return {"bin_dir": env["GAHP_PBS_BIN_DIR"]}
    if system == "lsf":
        return {"lsf_envdir": env["LSF_ENVDIR"], "bin_dir": env["GAHP_LSF_BIN_DIR"]}
    config = {"sge_root": env["SGE_ROOT"]}
    for key, var in (("sge_cell", "SGE_CELL"), ("sge_qmaster_port", "SGE_QMASTER_PORT")):
        if env.get(var):
            config[key] = env[var]
    return config


def write_config(path: Path, system: str, state: Path, options: dict[str, object]) -> Path:
    lines = [f"state_dir = {json.dumps(str(state))}", f"[driver.{system}]"]
    for key, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else json.dumps(value)
        lines.append(f"{key} = {text}")
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------------- measurements
def sdiag_counts(env: dict[str, str]) -> collections.Counter[str]:
    """Controller RPCs by message type (sdiag's own excluded)."""
    proc = subprocess.run(["sdiag"], env=env, capture_output=True, text=True, timeout=30)
    counts: collections.Counter[str] = collections.Counter()
    section = False
    for line in proc.stdout.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            section = True
            continue
        if section and line.startswith("Remote Procedure Call statistics by user"):
            break
        m = re.match(r"\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)", line)
        if section and m and m.group(1) != "REQUEST_STATS_INFO":
            counts[m.group(1)] = int(m.group(2))
    return counts


def read_calls(calls: Path) -> collections.Counter[str]:
    return collections.Counter(calls.read_text().split())


def pipelined(
    c: GahpClient, command: str, args: list[str], inflight: int
) -> tuple[float, dict[str, list[str]]]:
    """Send one ``command`` per argument, at most ``inflight`` unanswered, as the gridmanager
    does; return the wall time and the results by request id."""
    t0 = time.perf_counter()
    results: dict[str, list[str]] = {}
    pending: set[str] = set()
    todo = list(args)
    while todo or pending:
        batch = []
        while todo and len(pending) + len(batch) < inflight:
            rid = c.reqid()
            batch.append(rid)
            c.send(command, rid, todo.pop(0))
        for rid in batch:
            if c.read_line(timeout=120) != "S":
                raise SystemExit(f"{command} not accepted")
            pending.add(rid)
        got = c.results(timeout=120)
        for fields in got:
            results[fields[0]] = fields[1:]
            pending.discard(fields[0])
        if not got:
            time.sleep(0.002)
    return time.perf_counter() - t0, results


class Round:
    def __init__(self, label: str, n: int, wall: float, calls, rpcs, errors: int) -> None:
        self.label, self.n, self.wall, self.calls, self.rpcs = label, n, wall, calls, rpcs
        self.errors = errors

    def line(self) -> str:
        calls = ", ".join(f"{k} {v}" for k, v in sorted(self.calls.items())) or "none"
        text = (
            f"  {self.label:<34} {self.n} statuses in {self.wall:6.2f} s "
            f"({self.n / self.wall:7.0f}/s), {self.errors} errors; commands: {calls}"
        )
        if self.rpcs is not None:
            rpcs = ", ".join(f"{k} {v}" for k, v in sorted(self.rpcs.items()) if v) or "none"
            text += f"; controller RPCs {sum(self.rpcs.values())} ({rpcs})"
        return text


def poll_round(
    label: str,
    c: GahpClient,
    jobids: list[str],
    calls: Path,
    env: dict[str, str],
    system: str,
    inflight: int,
) -> Round:
    calls_before = read_calls(calls)
    rpcs_before = sdiag_counts(env) if system == "slurm" else None
    wall, got = pipelined(c, "BLAH_JOB_STATUS", jobids, inflight)
    rpcs = None
    if rpcs_before is not None:
        rpcs = sdiag_counts(env)
        rpcs.subtract(rpcs_before)
    commands = read_calls(calls)
    commands.subtract(calls_before)
    errors = sum(1 for v in got.values() if v[0] != "0" or v[2] != "5")
    return Round(label, len(jobids), wall, +commands, rpcs, errors)


# ---------------------------------------------------------------------- one system
def submit_held(system: str, env: dict[str, str], state: Path, n: int) -> list[str]:
    """N held jobs through the driver blahpd uses, tracked in ``state`` (blahpd's)."""
    spec = JobSpec("/bin/sleep", ("3600",), start_held=True, name="status-scale")

    async def submit_all() -> list[str]:
        drv = get_driver(system, driver_config(system, env), state / system)
        slots = asyncio.Semaphore(8)  # 8 in flight

        async def one() -> str:
            async with slots:
                return await drv.submit(spec)

        try:
            return list(await asyncio.gather(*(one() for _ in range(n))))
        finally:
            await drv.aclose()

    return asyncio.run(submit_all())


def cancel(system: str, env: dict[str, str], natives: list[str]) -> None:
    if not natives:
        return
    if system == "slurm":
        cmd = ["scancel"]
    else:
        cmd = [str(real_bin(system, env) / ("bkill" if system == "lsf" else "qdel"))]
    for i in range(0, len(natives), 500):
        subprocess.run([*cmd, *natives[i : i + 500]], env=env, capture_output=True, timeout=300)


def status_scale(system: str, env: dict[str, str], n: int, inflight: int, work: Path) -> None:
    print(f"{system}: {n} held jobs, one poll round = {n} BLAH_JOB_STATUS, {inflight} in flight")
    real = real_bin(system, env)
    natives: list[str] = []
    try:
        t0 = time.perf_counter()
        natives = submit_held(system, env, work / "after-state", n)
        print(f"  ({n} held jobs submitted in {time.perf_counter() - t0:.1f} s)")
        jobids = [str(make_job_id(system, j)) for j in natives]
        rounds = [native_round(system, env, real, natives)]
        for mode in ("before", "after"):
            calls = make_shims(system, real, work / f"{system}-{mode}")
            options: dict[str, object] = {"bin_dir": str(calls.parent / "bin")}
            options["status_registry"] = mode == "after"
            options["status_interval"] = INTERVAL
            state = work / f"{mode}-state"
            config = write_config(work / f"{mode}.toml", system, state, options)
            with GahpClient([*BLAHPD, "--config", str(config)], env=env) as c:
                if mode == "before":
                    rounds.append(
                        poll_round("BEFORE (per job)", c, jobids, calls, env, system, inflight)
                    )
                else:
                    rounds.append(
                        poll_round("AFTER, refreshing", c, jobids, calls, env, system, inflight)
                    )
                    rounds.append(
                        poll_round(
                            "AFTER, within the interval", c, jobids, calls, env, system, inflight
                        )
                    )
                    time.sleep(INTERVAL)
                    rounds.append(
                        poll_round(
                            f"AFTER, {INTERVAL:g} s later (refresh)",
                            c,
                            jobids,
                            calls,
                            env,
                            system,
                            inflight,
                        )
                    )
                c.quit()
        for r in rounds:
            print(r.line())
        native, before, after = rounds[0], rounds[1], rounds[-1]
        print(
            f"  => blahpd's round (registry) {native.wall / after.wall:.1f}x faster than the"
            f" native loop; commands {sum(native.calls.values())} -> "
            f"{sum(after.calls.values())}"
        )
        print(
            f"  => {before.wall / after.wall:.0f}x faster; commands per round "
            f"{sum(before.calls.values())} -> {sum(after.calls.values())}"
            + (
                f"; controller RPCs per round {sum(before.rpcs.values())} -> "
                f"{sum(after.rpcs.values())}"
                if before.rpcs is not None and after.rpcs is not None
                else ""
            )
        )
        refreshes = [r for r in rounds[2:] if r.calls]
        per_refresh = max((sum(r.calls.values()) for r in refreshes), default=0)
        worst = max(r.wall for r in rounds[2:])
        print(
            f"  targets: round of {n} under 2 s: {'yes' if worst < 2 else 'NO'} "
            f"({worst:.2f} s at most); commands per refresh <= 3: "
            f"{'yes' if per_refresh <= 3 else 'NO'} ({per_refresh}); errors: "
            f"{sum(r.errors for r in rounds[1:])}"
        )
    finally:
        cancel(system, env, natives)


def native_round(system: str, env: dict[str, str], real: Path, natives: list[str]) -> Round:
    """A shell loop of the native one-job status command over every job."""
    name, *args = NATIVE[system]
    loop = f'for id in "$@"; do "{real / name}" {" ".join(args)} "$id" >/dev/null || exit 1; done'
    t0 = time.perf_counter()
    proc = subprocess.run(["sh", "-c", loop, "loop", *natives], env=env, timeout=1800)
    wall = time.perf_counter() - t0
    calls = collections.Counter({name: len(natives)})
    return Round(
        "NATIVE (shell loop of " + " ".join(NATIVE[system]) + ")",
        len(natives),
        wall,
        calls,
        None,
        int(proc.returncode != 0),
    )


def submit_throughput(env: dict[str, str], m: int, inflight: int, work: Path) -> None:
    """blahpd against a shell loop of sbatch, the same job (/bin/true, no output)."""
    work.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    try:
        out = work / "loop-ids"
        loop = (
            f"for i in $(seq {m}); do sbatch --parsable -J loop -o /dev/null -e /dev/null"
            f' --wrap /bin/true >> "{out}" || exit 1; done'
        )
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", loop], env=env, check=True, timeout=600)
        t_loop = time.perf_counter() - t0
        ids += out.read_text().split()
        config = write_config(work / "submit.toml", "slurm", work / "submit-state", {})
        ad = (
            f'[ Cmd = "/bin/true"; Iwd = "{work}"; Out = "/dev/null"; Err = "/dev/null";'
            ' gridtype = "slurm" ]'
        )
        with GahpClient([*BLAHPD, "--config", str(config)], env=env) as c:
            t_blah, got = pipelined(c, "BLAH_JOB_SUBMIT", [ad] * m, inflight)
            c.quit()
        bad = [v for v in got.values() if v[0] != "0"]
        ids += [v[2].rsplit("/", 1)[1] for v in got.values() if v[0] == "0"]
        print(
            f"slurm submit, {m} jobs: shell loop of sbatch {m / t_loop:.1f} jobs/s "
            f"({t_loop:.1f} s); blahpd ({inflight} in flight) {m / t_blah:.1f} jobs/s "
            f"({t_blah:.1f} s), {len(bad)} errors => {t_loop / t_blah:.2f}x the loop"
        )
    finally:
        cancel("slurm", env, ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="N = 200 (CI)")
    ap.add_argument("--n", type=int, help="jobs per system (default 2000; 300 on pbs, lsf)")
    ap.add_argument("--systems", default="slurm,sge,pbs,lsf")
    ap.add_argument("--inflight", type=int, default=50)
    ap.add_argument("--submit-jobs", type=int, help="jobs of the submit comparison")
    a = ap.parse_args()
    m = a.submit_jobs or (50 if a.small else 200)
    work = Path(tempfile.mkdtemp(prefix="blah-scale-"))
    envs = {"slurm": slurm_env, "sge": sge_env, "pbs": pbs_env, "lsf": lambda: lsf_env(work)}
    ran = False
    for system in a.systems.split(","):
        env = envs[system]()
        if env is None:
            print(f"{system}: not reachable, skipped")
            continue
        ran = True
        n = a.n or (200 if a.small else 300 if system in ("pbs", "lsf") else 2000)
        status_scale(system, env, n, a.inflight, work / system)
        if system == "slurm":
            submit_throughput(env, m, a.inflight, work / "submit")
    shutil.rmtree(work, ignore_errors=True)
    if not ran:
        raise SystemExit("no batch system reachable (bash .ci/slurm-up.sh)")


if __name__ == "__main__":
    main()
