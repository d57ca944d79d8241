"""blahpd side by side with HTCondor's C blahpd (25.0.13), back to back in one run.

The C blahpd is unpacked from ``blahp-25.0.13-debian12-x86_64.tar.xz`` (found in
``$GAHP_SHARED/blahp``, else ``<checkout>/../shared/blahp``) into a temporary directory and
configured through ``BLAHPD_LOCATION``/``BLAHPD_CONFIG_LOCATION`` and an appended
``blah.config``; ours is ``python -m gahp_blah``.  Both are driven over pipes as the gridmanager
drives them (banner, ASYNC_MODE_ON, request ids, RESULTS, at most 50 requests in flight).

1. STATUS: on Slurm, OpenPBS, LSF, Grid Engine and an HTCondor pool (``.ci/htcondor-pool-up.sh``;
   each when reachable), each blahpd submits N jobs held at submission (a
   ``<lrms>_local_submit_attributes.sh`` site hook, the same file for both, prints the batch
   system's hold directive; for HTCondor the submit command ``hold = true``), pipelined:
   the SUBMIT BURST's wall time; then one round of N BLAH_JOB_STATUS (the note counts the
   JobStatus values answered, 5 = HELD):
   wall time, batch-system commands run (shims in the ``*_binpath``/``bin_dir`` count calls;
   our condor driver runs none: it asks the schedd through HTCondor's Python bindings)
   and, for Slurm, controller RPCs (``sdiag`` difference; other users of the controller add
   noise), for HTCondor the job and history queries the schedd answered (its own
   ``DCCommand_*`` statistics; other users of the pool add noise).  The C side's status
   caches (``/var/tmp/<x>_cache_<user>``, for condor ``$GAHP_TEMP/cache.*``) are emptied
   before its round, so its round refreshes them once (its cheapest cold case).  All jobs
   are cancelled.
2. FUZZ: the same seeded stream of malformed and edge request lines (the generator of
   ``tests/reliability/fuzzkit.py``, which ``benchmarks/gahp_fuzz.py`` uses) to each, one
   line at a time: deaths (exit or signal; restarted, the stream goes on), hangs (no return
   line within a bound; killed, restarted), per seed.  Batch commands point at a directory
   without them, so nothing reaches a batch system.
3. BURST (when HTCondor 25.0.13 and Slurm or the HTCondor pool are there; not with
   ``--small`` unless ``--burst``, as its wall time is at the mercy of the shared queues): a
   private personal HTCondor 25.0.13 (its own directory, loopback, ephemeral ports, run as a
   user of its own so ``sdiag``'s per-user RPC count is this run's alone), BATCH_GAHP the C
   blahpd, then ours: J short jobs (``grid_resource = batch slurm``; the site hook gives every
   Slurm job a 10-minute limit, so a queue blocked by others' unlimited jobs still backfills
   them; then ``batch condor`` into the pool, whose configuration both blahpds are given):
   submit-to-last-termination wall time,
   GAHP process-tree CPU (``/proc``, sampled: the blahpd, its reaped children and live
   descendants), RSS (blahpd alone and with its descendants), slurmctld RPCs per job.  The
   HTCondor is stopped at the end.
4. RSS: each blahpd idle (after a BLAH_PING); a soak of ours (``--soak N``, fork jobs of
   ``/bin/true`` with a proxy, submitted and polled to completion, 50 in flight): RSS after
   the first 1,000 jobs and at the end; it must end within 1.5x of the first figure, with
   no job directory or proxy record left (each goes once its final status is answered).

Without the C blahp tarball only our side runs; a batch system that is not reachable is
skipped with a line saying so, unless GAHP_REQUIRE_<SYSTEM>=1 (SLURM, PBS, LSF, SGE;
GAHP_REQUIRE_HTCONDOR_POOL for condor), which makes it an error (as GAHP_REQUIRE_HTCONDOR=1
does for the burst).

Usage: python benchmarks/blah_vs_c_blahp.py [--small] [--n N] [--systems slurm,pbs,lsf,sge,condor]
           [--seeds 3] [--cases 1000] [--burst-jobs J] [--[no-]burst] [--soak N]
           [--parts status,fuzz,burst,idle,soak]
Exit status 1 when our blahpd died or hung in the fuzz, or the soak's RSS grew past 1.5x or
it left job directories behind.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "reliability"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import blah_status_scale as scale  # noqa: E402
from fuzzkit import BLAH_COMMANDS, BLAH_HEADERS, RawGahp, generate, special_cases  # noqa: E402

from gahp_core import GahpClient, split  # noqa: E402
from gahp_core.testing import proc_status  # noqa: E402

C = "C blahpd"
OURS = "ours"
TARBALL = "blahp-25.0.13-debian12-x86_64.tar.xz"
HTCONDOR = "25.0.13"
SYSTEMS = ("slurm", "pbs", "lsf", "sge", "condor")
COMMANDS = {  # what each side may run (the C scripts also use lsid, tracejob, qacct)
    "slurm": ["sbatch", "squeue", "scontrol", "sacct", "scancel"],
    "pbs": ["qsub", "qstat", "qdel", "qhold", "qrls", "tracejob"],
    "lsf": ["bsub", "bjobs", "bhist", "bkill", "bstop", "bresume", "bqueues", "lsid"],
    "sge": ["qsub", "qstat", "qacct", "qdel", "qhold", "qrls", "qmod"],
    "condor": [
        "condor_submit",
        "condor_q",
        "condor_history",
        "condor_config_val",
        "condor_rm",
        "condor_hold",
        "condor_release",
    ],
}
C_NOTES = {
    "sge": " sge_helper runs $SGE_ROOT/bin/<arch>/qstat itself: not counted",
    "lsf": " + a grep of lsb.events per job (not a command)",
}
HOLD = {
    "slurm": "#SBATCH -H",
    "pbs": "#PBS -h",
    "lsf": "#BSUB -H",
    "sge": "#$ -h",
    "condor": "hold = true",
}
CACHES = {"slurm": "slurm_cache", "pbs": "qstat_cache", "lsf": "bjobs_cache"}
BURST_USER = os.environ.get("GAHP_BENCH_USER", "gahpbench")
"""The private HTCondor's job owner: sdiag counts its RPCs apart from everyone else's."""
LINE_TIMEOUT = 10.0


def log(text: str) -> None:
    print(text, flush=True)


def ratio(theirs: float, ours: float) -> str:
    if ours > 0:
        return f"{theirs / ours:.1f}x"
    return f"{theirs:g} vs 0" if theirs else "-"


def table(title: str, head: list[str], rows: list[list[str]]) -> None:
    """Print rows under a header, columns padded."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    log(f"\n{title}")
    for r in [head, ["-" * w for w in widths], *rows]:
        log("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


REQUIRE = {"condor": "GAHP_REQUIRE_HTCONDOR_POOL"}
"""The variable that makes a system's absence an error, when not GAHP_REQUIRE_<SYSTEM>."""


def required(system: str) -> bool:
    return os.environ.get(REQUIRE.get(system, f"GAHP_REQUIRE_{system.upper()}")) == "1"


# ---------------------------------------------------------------------- the two servers
@dataclass
class Side:
    """How to start one blahpd; ``env`` is added to the caller's."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def client(self, extra: dict[str, str] | None = None) -> GahpClient:
        c = GahpClient(self.argv, env={**self.env, **(extra or {})}, stderr=subprocess.DEVNULL)
        if c.command("ASYNC_MODE_ON")[0] != "S":
            raise SystemExit(f"{self.name}: ASYNC_MODE_ON refused")
        return c


def shared_dir() -> Path:
    return Path(os.environ.get("GAHP_SHARED") or ROOT.parent / "shared")


def unpack_c_blahp(work: Path) -> Path | None:
    """The C blahp tree (BLAHPD_LOCATION) unpacked under ``work``, or None without the tarball."""
    tar = shared_dir() / "blahp" / TARBALL
    if not tar.exists():
        return None
    with tarfile.open(tar) as t:
        t.extractall(work, filter="tar")
    location = work / "blahp-25.0.13"
    for path in [work, *location.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o055 if path.is_dir() else path.stat().st_mode | 0o044)
    return location


def c_config(location: Path, name: str, settings: dict[str, str]) -> Path:
    """A blah.config: the shipped one plus ``settings`` (the scripts source it: last wins)."""
    path = location / "etc" / f"blah-{name}.config"
    extra = "".join(f"{k}={v}\n" for k, v in settings.items())
    path.write_text((location / "etc" / "blah.config").read_text() + "\n# benchmark\n" + extra)
    path.chmod(0o644)
    return path


def c_side(location: Path, config: Path) -> Side:
    return Side(
        C,
        [str(location / "bin" / "blahpd")],
        {"BLAHPD_LOCATION": str(location), "BLAHPD_CONFIG_LOCATION": str(config)},
    )


def our_side(work: Path, name: str, text: str) -> Side:
    path = work / f"ours-{name}.toml"
    path.write_text(f'state_dir = "{work / ("ours-state-" + name)}"\n{text}')
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return Side(
        OURS, [sys.executable, "-m", "gahp_blah", "--config", str(path)], {"PYTHONPATH": pythonpath}
    )


def write_site_hooks(where: Path, flag: Path) -> None:
    """``<lrms>_local_submit_attributes.sh`` printing the hold directive while ``flag`` exists
    and, for Slurm, a 10-minute time limit (other users' jobs without one must not keep the
    benchmark's out of the backfill scheduler)."""
    for system, directive in HOLD.items():
        hook = where / f"{system}_local_submit_attributes.sh"
        limit = "echo '#SBATCH --time=10'\n" if system == "slurm" else ""
        hook.write_text(f"{limit}if [ -e '{flag}' ]; then echo '{directive}'; fi\n")
        hook.chmod(0o755)


# ---------------------------------------------------------------------- pipelining
class Died(Exception):
    """The server exited; ``partial`` holds the results that came before."""

    def __init__(self, why: str, partial: list[list[str] | None]) -> None:
        super().__init__(why)
        self.partial = partial


def pipelined(
    c: GahpClient, command: str, args: list[str], inflight: int = 50, timeout: float = 600
) -> tuple[float, list[list[str] | None], int]:
    """Send ``command arg`` for each argument, at most ``inflight`` unanswered (an ``F``
    refusal, the C blahpd's "Threads limit reached", is sent again later); return the wall
    time, each argument's result fields (None when none came in ``timeout``) and the number
    of refusals."""
    t0 = time.perf_counter()
    out: list[list[str] | None] = [None] * len(args)
    pending: dict[str, int] = {}
    todo = collections.deque(range(len(args)))
    refused = 0
    deadline = time.monotonic() + timeout
    try:
        while (todo or pending) and time.monotonic() < deadline:
            while todo and len(pending) < inflight:
                i = todo.popleft()
                rid = c.reqid()
                c.send(command, rid, args[i])
                ret = c.read_fields(timeout=60)
                if ret[0] == "S":
                    pending[rid] = i
                else:
                    refused += 1
                    todo.appendleft(i)
                    break
            got = c.results(timeout=60)
            for fields in got:
                if fields[0] in pending:
                    out[pending.pop(fields[0])] = fields[1:]
            if not got:
                time.sleep(0.01)
    except (EOFError, OSError) as e:
        raise Died(str(e) or type(e).__name__, out) from None
    return time.perf_counter() - t0, out, refused


# ---------------------------------------------------------------------- part 1: status round
@dataclass
class StatusRow:
    system: str
    side: str
    n: int
    submit_s: float = 0.0
    submitted: int = 0
    wall: float = 0.0
    answered: int = 0
    commands: collections.Counter[str] = field(default_factory=collections.Counter)
    rpcs: int | None = None
    note: str = ""


def make_shims(system: str, real: Path, where: Path) -> tuple[Path, Path]:
    """A bin dir of counting shims for ``system``'s commands found in ``real``; (dir, calls)."""
    shims = where / "bin"
    shims.mkdir(parents=True, exist_ok=True)
    calls = where / "calls"
    calls.touch()
    for name in COMMANDS[system]:
        if not (real / name).exists():
            continue
        shim = shims / name
        shim.write_text(f'#!/bin/sh\necho {name} >> "{calls}"\nexec "{real / name}" "$@"\n')
        shim.chmod(0o755)
    return shims, calls


def submit_ad(system: str, iwd: Path) -> str:
    # With pbs_pro=yes and no SMPGranularity the C pbs_submit.sh writes
    # "#PBS -l select=1:ncpus=", which qsub refuses: every submission fails.
    smp = "; SMPGranularity = 1" if system == "pbs" else ""
    return (
        f'[ Cmd = "/bin/sleep"; Args = "3600"; Iwd = "{iwd}"; Out = "/dev/null"; '
        f'Err = "/dev/null"; gridtype = "{system}"{smp} ]'
    )


def clear_c_caches(system: str, env: dict[str, str]) -> None:
    """Empty the C status script's per-user cache, so its round starts cold."""
    if system == "condor" and env.get("GAHP_TEMP"):
        for path in Path(env["GAHP_TEMP"]).glob("cache.*"):
            path.unlink(missing_ok=True)
    if system in CACHES:
        user = pwd.getpwuid(os.geteuid()).pw_name
        for path in Path("/var/tmp", f"{CACHES[system]}_{user}").glob("blahp_results_cache*"):
            path.unlink(missing_ok=True)


def submitted(results: list[list[str] | None]) -> list[str]:
    """The job ids of the successful BLAH_JOB_SUBMIT results."""
    return [r[2] for r in results if r and r[0] == "0" and len(r) > 2]


def native(jobid: str) -> str:
    """The batch system's id in a BLAH job id: its last part, or for the C blahp's condor
    ids (``condor/<cluster>/<schedd>/<pool>``) the second."""
    parts = jobid.split("/")
    return parts[1] if parts[0] == "condor" and len(parts) == 4 else parts[-1]


def status_side(
    system: str, env: dict[str, str], side: Side, calls: Path, n: int, inflight: int, iwd: Path
) -> tuple[StatusRow, list[str]]:
    row = StatusRow(system, side.name, n)
    natives: list[str] = []
    c = side.client(env)
    try:
        try:
            row.submit_s, got, _ = pipelined(
                c, "BLAH_JOB_SUBMIT", [submit_ad(system, iwd)] * n, inflight
            )
        except Died as e:  # what was submitted before is cancelled all the same
            natives = [native(j) for j in submitted(e.partial)]
            raise
        jobids = submitted(got)
        natives = [native(j) for j in jobids]
        row.submitted = len(jobids)
        if len(jobids) < n:
            bad = next((r for r in got if not (r and r[0] == "0")), None)
            row.note = f"{n - len(jobids)} submits failed ({(bad or ['no result'])[:2]})"
        if not jobids:
            return row, natives
        if side.name == C:
            clear_c_caches(system, env)
            row.note += C_NOTES.get(system, "")
        before = scale.read_calls(calls)
        rpcs_before = scale.sdiag_counts(env) if system == "slurm" else None
        queries_before = schedd_queries(env) if system == "condor" else None
        row.wall, statuses, _ = pipelined(c, "BLAH_JOB_STATUS", jobids, inflight)
        if rpcs_before is not None:
            after = scale.sdiag_counts(env)
            after.subtract(rpcs_before)
            row.rpcs = sum(after.values())
        if queries_before is not None and (queries_after := schedd_queries(env)) is not None:
            row.rpcs = queries_after - queries_before
        row.commands = scale.read_calls(calls)
        row.commands.subtract(before)
        row.commands = +row.commands
        row.answered = sum(1 for r in statuses if r and r[0] == "0")
        states = collections.Counter(r[2] for r in statuses if r and r[0] == "0" and len(r) > 2)
        row.note += " JobStatus " + " ".join(f"{k}:{v}" for k, v in sorted(states.items()))
        with contextlib.suppress(Exception):
            c.quit(timeout=10)
    except Died as e:
        row.note += f" died: {e} (status {c.proc.poll()})"
    finally:
        c.close()
    return row, natives


def batch_envs(work: Path, systems: list[str]) -> dict[str, dict[str, str]]:
    """The reachable systems' environments; an unreachable required one is an error."""
    finders: dict[str, Callable[[], dict[str, str] | None]] = {
        "slurm": scale.slurm_env,
        "sge": scale.sge_env,
        "pbs": scale.pbs_env,
        "lsf": lambda: lsf_env(work),
        "condor": lambda: condor_env(work),
    }
    out = {}
    for system in systems:
        try:
            env = finders[system]()
        except (OSError, subprocess.SubprocessError):
            env = None
        if env is None:
            if required(system):
                var = REQUIRE.get(system, f"GAHP_REQUIRE_{system.upper()}")
                raise SystemExit(f"{system}: not reachable and {var}=1")
            log(f"{system}: not reachable, skipped")
            continue
        out[system] = env
    return out


def condor_env(work: Path) -> dict[str, str] | None:
    """The HTCondor pool of ``.ci/htcondor-pool-up.sh`` (its ``env`` file), when its schedd
    answers; ``GAHP_TEMP`` (where the C condor_status.sh caches condor_q) under ``work``."""
    pool = Path(os.environ.get("GAHP_HTCONDOR_POOL_DIR", "/tmp/gahp-htcondor-pool"))
    try:
        lines = (pool / "env").read_text().splitlines()
    except OSError:
        return None
    env = dict(os.environ)
    for line in lines:
        key, eq, value = line.partition("=")
        if eq and key.isidentifier():
            env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    q = Path(env.get("GAHP_HTCONDOR_POOL_BIN", "")) / "condor_q"
    proc = subprocess.run([str(q), "-totals"], env=env, capture_output=True, timeout=30)
    if proc.returncode != 0:
        return None
    temp = work / "gahp-temp"
    temp.mkdir(exist_ok=True)
    env["GAHP_TEMP"] = str(temp)
    return env


SCHEDD_COUNTS = """
import json, htcondor2
coll = htcondor2.Collector()
name = coll.locate(htcondor2.DaemonType.Schedd)["Name"]
ad = coll.directQuery(htcondor2.DaemonType.Schedd, name, statistics="All:2")
print(json.dumps({k: int(ad.get("DCCommand_" + k, 0))
                  for k in ("QUERY_JOB_ADS", "QUERY_JOB_ADS_WITH_AUTH", "QUERY_SCHEDD_HISTORY")}))
"""


def schedd_queries(env: dict[str, str]) -> int | None:
    """The job and history queries the pool's schedd has answered (its own DCCommand_*
    statistics, asked of it directly; None without the bindings here)."""
    proc = subprocess.run(
        [sys.executable, "-c", SCHEDD_COUNTS], env=env, capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        return None
    return sum(json.loads(proc.stdout).values())


def condor_bin(env: dict[str, str]) -> Path:
    return Path(env["GAHP_HTCONDOR_POOL_BIN"])


def real_bin(system: str, env: dict[str, str]) -> Path:
    return condor_bin(env) if system == "condor" else scale.real_bin(system, env)


def cancel(system: str, env: dict[str, str], natives: list[str]) -> None:
    if system != "condor":
        scale.cancel(system, env, natives)
        return
    for i in range(0, len(natives), 500):
        subprocess.run(
            [str(condor_bin(env) / "condor_rm"), *natives[i : i + 500]],
            env=env,
            capture_output=True,
            timeout=300,
        )


def lsf_env(work: Path) -> dict[str, str] | None:
    """LSF's environment; as root its commands (lsid too) run as the LSF user via wrappers."""
    env = scale.lsf_env(work)
    if env is None or os.geteuid() != 0:
        return env
    real = scale._settings(Path(env["LSF_ENVDIR"]) / "lsf.conf").get("LSF_BINDIR", "")
    wrappers = Path(env["GAHP_LSF_BIN_DIR"])
    for name in COMMANDS["lsf"]:
        path = wrappers / name
        if not path.exists() and Path(real, name).exists():
            path.write_text(f'#!/bin/sh\nexec runuser -u {scale.LSF_USER} -- {real}/{name} "$@"\n')
            path.chmod(0o755)
    return env


def c_batch_settings(system: str, env: dict[str, str], shims: Path) -> dict[str, str]:
    if system == "condor":
        return {"condor_binpath": str(shims), "export CONDOR_CONFIG": env["CONDOR_CONFIG"]}
    if system == "slurm":
        return {"slurm_binpath": str(shims), "export SLURM_CONF": env["SLURM_CONF"]}
    if system == "pbs":
        # OpenPBS is PBS Pro to the scripts (qstat -f -x; "-1" is refused).
        return {
            "pbs_binpath": str(shims),
            "pbs_pro": "yes",
            "export PBS_CONF_FILE": env.get("PBS_CONF_FILE", "/etc/pbs.conf"),
        }
    if system == "lsf":
        return {
            "lsf_binpath": str(shims),
            "lsf_confpath": env["LSF_ENVDIR"],
            "export LSF_ENVDIR": env["LSF_ENVDIR"],
        }
    return {
        "sge_binpath": str(shims),
        "sge_rootpath": env["SGE_ROOT"],
        "sge_cellname": env.get("SGE_CELL", "default"),
        "export SGE_ROOT": env["SGE_ROOT"],
        "export SGE_CELL": env.get("SGE_CELL", "default"),
        "export SGE_QMASTER_PORT": env.get("SGE_QMASTER_PORT", "6444"),
    }


def status_part(
    work: Path,
    location: Path | None,
    envs: dict[str, dict[str, str]],
    sizes: dict[str, int],
    inflight: int,
) -> list[StatusRow]:
    rows: list[StatusRow] = []
    flag, hooks = work / "hold-on-submit", work / "ours-hooks"
    iwd = work / "iwd"
    iwd.mkdir(mode=0o777)
    iwd.chmod(0o777)
    flag.touch()
    try:
        for system, env in envs.items():
            n = sizes[system]
            log(
                f"status: {system}, {n} held jobs per side, one round of {n} BLAH_JOB_STATUS,"
                f" {inflight} in flight"
            )
            real = real_bin(system, env)
            sides: list[tuple[Side, Path]] = []
            if location is not None:
                shims, calls = make_shims(system, real, work / "shims" / "c" / system)
                config = c_config(
                    location, f"status-{system}", c_batch_settings(system, env, shims)
                )
                sides.append((c_side(location, config), calls))
            shims, calls = make_shims(system, real, work / "shims" / "ours" / system)
            if system == "condor":  # the pool of CONDOR_CONFIG, through the bindings
                options: dict[str, str] = {}
            else:
                options = scale.driver_config(system, env)
                options["bin_dir"] = str(shims)
            text = (
                f'[site]\nlocal_submit_attributes_dir = "{hooks}"\n[driver.{system}]\n'
                + "".join(f'{k} = "{v}"\n' for k, v in options.items())
            )
            sides.append((our_side(work, f"status-{system}", text), calls))
            for side, calls in sides:
                natives: list[str] = []
                try:
                    row, natives = status_side(system, env, side, calls, n, inflight, iwd)
                finally:
                    cancel(system, env, natives)
                rows.append(row)
                log(
                    f"  {side.name}: {row.submitted}/{n} submitted in {row.submit_s:.1f} s, "
                    f"round {row.wall:.2f} s, {row.answered} answered, commands "
                    f"{dict(row.commands)}, RPCs {row.rpcs} {row.note}"
                )
    finally:
        flag.unlink(missing_ok=True)
    return rows


def status_table(rows: list[StatusRow]) -> None:
    out = []
    for system in dict.fromkeys(r.system for r in rows):
        pair = {r.side: r for r in rows if r.system == system}
        for r in pair.values():
            cmds = sum(r.commands.values())
            per_job = cmds / r.submitted if r.submitted else 0.0
            out.append(
                [
                    system,
                    r.side,
                    str(r.submitted),
                    f"{r.submit_s:.2f}",
                    f"{r.wall:.2f}",
                    f"{r.answered}/{r.submitted}",
                    f"{cmds} ({per_job:.3g}/job)",
                    "-" if r.rpcs is None else str(r.rpcs),
                    r.note.strip(),
                ]
            )
        if C in pair and OURS in pair and pair[C].wall and pair[OURS].wall:
            c, o = pair[C], pair[OURS]
            oc, cc = sum(o.commands.values()), sum(c.commands.values())
            rpcs = "-" if c.rpcs is None or o.rpcs is None else ratio(c.rpcs, o.rpcs)
            out.append(
                [
                    system,
                    "C / ours",
                    "",
                    ratio(c.submit_s, o.submit_s),
                    ratio(c.wall, o.wall),
                    "",
                    ratio(cc, oc) if system != "sge" else "-",
                    rpcs,
                    "",
                ]
            )
    table(
        "SUBMIT BURST and STATUS ROUND of N held jobs (wall times, batch commands; RPCs:"
        " slurmctld's, for condor the schedd's job and history queries)",
        [
            "system",
            "blahpd",
            "N",
            "submit s",
            "round s",
            "answered",
            "batch commands",
            "RPCs",
            "note",
        ],
        out,
    )


# ---------------------------------------------------------------------- part 2: fuzz
@dataclass
class FuzzRow:
    side: str
    seed: int
    lines: int = 0
    deaths: collections.Counter[str] = field(default_factory=collections.Counter)
    hangs: int = 0
    unexpected: int = 0  # lines answered by no return line or by more than one
    returns: collections.Counter[str] = field(default_factory=collections.Counter)
    seconds: float = 0.0


def fuzz_plan(seed: int, cases: int) -> list[bytes]:
    """The request lines of one seed, as fuzzkit.run_fuzz orders them (specials smaller)."""
    rng = random.Random(seed)
    counter = [0]
    plan = special_cases(BLAH_COMMANDS, counter, 256 * 1024) + [
        generate(rng, BLAH_COMMANDS, BLAH_HEADERS, counter) for _ in range(cases)
    ]
    rng.shuffle(plan)
    return [case.data for case in plan]


def exit_reason(status: int | None) -> str:
    if status is None:
        return "running"
    if status < 0:
        return signal.Signals(-status).name
    return f"exit {status}"


def replies(gahp: RawGahp, data: bytes) -> list[str]:
    """Send one line and then VERSION; the return lines before VERSION's (``R`` skipped)."""
    gahp.send(data + b"VERSION\r\n")
    got = []
    while not (line := gahp.line(LINE_TIMEOUT)).startswith("S $GahpVersion"):
        if line.rstrip() != "R":
            got.append(line)
    return got


def fuzz_side(side: Side, seed: int, lines: list[bytes]) -> FuzzRow:
    row = FuzzRow(side.name, seed)
    t0 = time.monotonic()
    env = {**os.environ, **side.env}

    def start() -> RawGahp:
        gahp = RawGahp(side.argv, env)
        gahp.request(b"ASYNC_MODE_ON\r\n")
        return gahp

    def close(gahp: RawGahp) -> None:
        gahp.proc.kill()
        with contextlib.suppress(OSError):
            gahp.close()

    gahp = start()
    try:
        for data in lines:
            row.lines += 1
            try:
                got = replies(gahp, data)
                row.returns[split(got[0])[0] if got else "(none)"] += 1
                row.unexpected += len(got) != 1
                continue
            except (AssertionError, OSError):  # exited, or no line in time
                pass
            try:
                status = gahp.proc.wait(1)
            except subprocess.TimeoutExpired:
                status = None
            if status is None:
                row.hangs += 1
            else:
                row.deaths[exit_reason(status)] += 1
            close(gahp)
            gahp = start()
    finally:
        close(gahp)
    row.seconds = time.monotonic() - t0
    return row


def fuzz_part(work: Path, location: Path | None, seeds: list[int], cases: int) -> list[FuzzRow]:
    nothing = work / "no-batch-commands"
    nothing.mkdir()
    sides = []
    if location is not None:
        settings = {f"{s}_binpath": str(nothing) for s in ("slurm", "pbs", "lsf", "sge")}
        sides.append(c_side(location, c_config(location, "fuzz", settings)))
    sides.append(our_side(work, "fuzz", 'drivers = ["fork"]\n'))
    rows = []
    for seed in seeds:
        lines = fuzz_plan(seed, cases)
        for side in sides:
            row = fuzz_side(side, seed, lines)
            rows.append(row)
            log(
                f"fuzz seed {seed}: {side.name}: {row.lines} lines in {row.seconds:.1f} s, "
                f"deaths {dict(row.deaths)}, hangs {row.hangs}, not one reply {row.unexpected}, "
                f"returns {dict(row.returns)}"
            )
    pwned = Path("/tmp/gahp-fuzz-pwned")
    if pwned.exists():
        log(f"NOTE: {pwned} exists: a fuzzed argument was run by a shell")
    return rows


def fuzz_table(rows: list[FuzzRow]) -> None:
    def deaths(r: FuzzRow) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in r.deaths.items())
        return f"{sum(r.deaths.values())}" + (f" ({kinds})" if kinds else "")

    out = [
        [
            str(r.seed),
            r.side,
            str(r.lines),
            deaths(r),
            str(r.hangs),
            str(r.unexpected),
            f"{r.seconds:.1f}",
        ]
        for r in rows
    ]
    table(
        "MALFORMED INPUT (same seeded lines to both; deaths and hangs restart the server)",
        ["seed", "blahpd", "lines", "deaths", "hangs (10 s)", "not one return line", "s"],
        out,
    )


# ---------------------------------------------------------------------- /proc sampling
def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = collections.defaultdict(list)
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := _stat(int(d))):
            kids[int(st[1])].append(int(d))
    return kids


def _rss_kib(pid: int) -> int:
    try:
        return proc_status(pid, "VmRSS")
    except (OSError, ValueError, KeyError):
        return 0


@dataclass
class TreeSample:
    cpu_s: float = 0.0  # the process, its reaped children, its live descendants
    rss_kib: int = 0  # the process alone
    tree_rss_kib: int = 0  # with its live descendants
    peak_tree_rss_kib: int = 0


def sample_tree(pid: int, prev: TreeSample) -> TreeSample | None:
    st = _stat(pid)
    if st is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    cpu = sum(int(x) for x in st[11:15])  # utime stime cutime cstime
    kids = _children()
    todo, tree_rss = list(kids.get(pid, [])), _rss_kib(pid)
    rss = tree_rss
    while todo:
        p = todo.pop()
        if s := _stat(p):
            cpu += int(s[11]) + int(s[12]) + int(s[13]) + int(s[14])
            tree_rss += _rss_kib(p)
            todo += kids.get(p, [])
    return TreeSample(
        max(prev.cpu_s, cpu / tick), rss, tree_rss, max(prev.peak_tree_rss_kib, tree_rss)
    )


def idle_rss(side: Side, env: dict[str, str], lrms: str) -> tuple[int, int]:
    """RSS (KiB) of a blahpd after its banner and one BLAH_PING: itself, with descendants."""
    c = side.client(env)
    try:
        with contextlib.suppress(Exception):
            c.call("BLAH_PING", lrms, timeout=30)
        time.sleep(1.0)
        s = sample_tree(c.proc.pid, TreeSample()) or TreeSample()
        with contextlib.suppress(Exception):
            c.quit(timeout=10)
        return s.rss_kib, s.tree_rss_kib
    finally:
        c.close()


# ---------------------------------------------------------------------- part 3: burst
def htcondor_release(work: Path) -> Path | None:
    env_file = (
        Path(os.environ.get("GAHP_HTCONDOR_PREFIX", "/tmp/gahp-htcondor-") + HTCONDOR) / "env"
    )
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("GAHP_HTCONDOR_DIR="):
                rel = Path(line.split("=", 1)[1]) / "release"
                if (rel / "sbin" / "condor_master").exists():
                    return rel
    tar = shared_dir() / "htcondor" / f"htcondor-{HTCONDOR}-debian12-x86_64.tar.xz"
    if not tar.exists():
        return None
    with tarfile.open(tar) as t:
        t.extractall(work, filter="tar")
    return work / f"htcondor-{HTCONDOR}"


def gahp_python() -> str | None:
    """A python the burst user can run with our dependencies (the HTCondor venv's)."""
    venv = os.environ.get("GAHP_HTCONDOR_VENV", "/opt/gahp-venv")
    for python in (f"{venv}/bin/python", sys.executable):
        probe = subprocess.run(
            [
                "runuser",
                "-u",
                BURST_USER,
                "--",
                "env",
                f"PYTHONPATH={ROOT}",
                python,
                "-c",
                "import gahp_blah, classad2",
            ],
            capture_output=True,
        )
        if probe.returncode == 0:
            return python
    return None


def ensure_user(name: str) -> pwd.struct_passwd:
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True)
    return pwd.getpwnam(name)


def sdiag_by_user(env: dict[str, str], user: str) -> int:
    proc = subprocess.run(["sdiag"], env=env, capture_output=True, text=True, timeout=30)
    m = re.search(rf"^\s+{re.escape(user)}\s+\(\s*\d+\)\s+count:(\d+)", proc.stdout, re.M)
    return int(m.group(1)) if m else 0


@dataclass
class BurstRow:
    side: str
    jobs: int
    system: str = "slurm"
    wall: float = 0.0
    done: int = 0
    cpu_s: float = 0.0
    rpcs: int | None = None
    rss_end_kib: int = 0
    tree_rss_end_kib: int = 0
    peak_tree_rss_kib: int = 0
    note: str = ""


class PrivateCondor:
    """A personal HTCondor in ``home``, run as :data:`BURST_USER`, BATCH_GAHP = ``gahp``."""

    def __init__(self, home: Path, release: Path, gahp_wrapper: str, extra: str = "") -> None:
        self.home, self.release = home, release
        self.user = ensure_user(BURST_USER)
        for d in ("log", "spool", "execute", "lock", "run"):
            (home / "local" / d).mkdir(parents=True, exist_ok=True)
        (home / "jobs").mkdir(exist_ok=True)
        wrapper = home / "batch_gahp"
        wrapper.write_text(gahp_wrapper)
        wrapper.chmod(0o755)
        self.config = home / "condor_config"
        self.config.write_text(f"""RELEASE_DIR = {release}
LOCAL_DIR = {home}/local
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
COLLECTOR_HOST = 127.0.0.1:1
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
BATCH_GAHP = {wrapper}
GRIDMANAGER_JOB_PROBE_INTERVAL = 2
GRIDMANAGER_JOB_PROBE_RATE = 50
GRIDMANAGER_RESOURCE_PROBE_INTERVAL = 10
GRIDMANAGER_CONTACT_SCHEDD_DELAY = 1
GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE = 1000
SCHEDD_INTERVAL = 5
SCHEDD_MIN_INTERVAL = 1
JOB_IS_FINISHED_INTERVAL = 0
{extra}
""")
        for path in [home, *home.rglob("*")]:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self.pidfile = home / "local" / "run" / "master.pid"

    def as_user(
        self, *cmd: str, timeout: float = 60, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runuser", "-u", BURST_USER, "--", "env", f"CONDOR_CONFIG={self.config}", *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )

    def start(self) -> None:
        self.as_user(str(self.release / "sbin" / "condor_master"), "-pidfile", str(self.pidfile))
        deadline = time.monotonic() + 60
        while (
            self.as_user(str(self.release / "bin" / "condor_q"), "-totals", timeout=20).returncode
            != 0
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the private HTCondor's schedd did not answer in 60 s")
            time.sleep(1)

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pidfile.read_text().strip())
            if "condor_master" in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(pid, signal.SIGTERM)
                for _ in range(150):
                    if not Path(f"/proc/{pid}").exists():
                        return
                    time.sleep(0.2)
                os.kill(pid, signal.SIGKILL)


def find_gahp(marker: str) -> int | None:
    """The pid of the process whose command line holds ``marker`` and whose parent's does not."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            if marker.encode() not in cmd:
                continue
            st = _stat(int(d))
            parent = Path(f"/proc/{st[1]}/cmdline").read_bytes() if st else b""
        except OSError:
            continue
        if marker.encode() not in parent:
            return int(d)
    return None


def burst_side(
    name: str,
    home: Path,
    release: Path,
    wrapper: str,
    marker: str,
    jobs: int,
    system: str,
    env: dict[str, str],
    extra: str = "",
) -> BurstRow:
    row = BurstRow(name, jobs, system)
    condor = PrivateCondor(home, release, wrapper, extra)
    jobdir = home / "jobs"
    (jobdir / "burst.sub").write_text(
        f"universe = grid\ngrid_resource = batch {system}\nexecutable = /bin/sleep\n"
        "arguments = 1\n"
        "transfer_executable = false\nshould_transfer_files = NO\noutput = /dev/null\n"
        f"error = /dev/null\nlog = {jobdir}/burst.log\nqueue {jobs}\n"
    )
    os.chown(jobdir / "burst.sub", condor.user.pw_uid, condor.user.pw_gid)
    condor.start()
    try:
        rpc0 = sdiag_by_user(env, BURST_USER) if system == "slurm" else 0
        t0 = time.monotonic()
        sub = condor.as_user(str(release / "bin" / "condor_submit"), "burst.sub", cwd=jobdir)
        if sub.returncode != 0:
            row.note = f"condor_submit failed: {sub.stderr.strip()[:100]}"
            return row
        sample, pid = TreeSample(), None
        deadline = t0 + max(300, jobs * 3)
        logfile = jobdir / "burst.log"
        while time.monotonic() < deadline:
            pid = pid or find_gahp(marker)
            if pid is not None:
                s = sample_tree(pid, sample)
                if s is None:
                    pid = None
                else:
                    sample = s
            text = logfile.read_text() if logfile.exists() else ""
            row.done = len(re.findall(r"^005 ", text, re.M))
            if row.done >= jobs or "\n012 " in text:
                break
            time.sleep(0.5)
        row.wall = time.monotonic() - t0
        if row.done < jobs:
            row.note = f"only {row.done}/{jobs} terminated (held? see {jobdir})"
        if pid is not None and (s := sample_tree(pid, sample)):
            sample = s
        if system == "slurm":
            row.rpcs = sdiag_by_user(env, BURST_USER) - rpc0
        row.cpu_s = sample.cpu_s
        row.rss_end_kib, row.tree_rss_end_kib = sample.rss_kib, sample.tree_rss_kib
        row.peak_tree_rss_kib = sample.peak_tree_rss_kib
    finally:
        condor.stop()
        if system == "slurm":
            subprocess.run(["scancel", "-u", BURST_USER], env=env, capture_output=True, timeout=60)
        else:  # the pool's jobs of the burst user
            subprocess.run(
                [str(condor_bin(env) / "condor_rm"), "-constraint", f'Owner == "{BURST_USER}"'],
                env=env,
                capture_output=True,
                timeout=60,
            )
    return row


def burst_part(
    work: Path, location: Path | None, envs: dict[str, dict[str, str]], jobs: int
) -> list[BurstRow]:
    """The burst on each of Slurm and the HTCondor pool that is reachable."""
    systems = [s for s in ("slurm", "condor") if s in envs]
    if not systems:
        log("burst: neither Slurm nor the HTCondor pool, skipped")
        return []
    release = htcondor_release(work)
    if release is not None:
        ensure_user(BURST_USER)
    python = gahp_python() if release else None
    if release is None or python is None:
        why = "no HTCondor 25.0.13" if release is None else f"no python {BURST_USER} can use"
        if os.environ.get("GAHP_REQUIRE_HTCONDOR") == "1":
            raise SystemExit(f"burst: {why} and GAHP_REQUIRE_HTCONDOR=1")
        log(f"burst: {why}, skipped")
        return []
    rows = []
    for system in systems:
        env = envs[system]
        log(f"burst: {jobs} x sleep 1 under HTCondor {HTCONDOR}'s gridmanager (batch {system})")
        if location is not None:
            settings = (
                {"slurm_binpath": "/usr/bin", "export SLURM_CONF": env["SLURM_CONF"]}
                if system == "slurm"
                else {
                    "condor_binpath": str(condor_bin(env)),
                    "export CONDOR_CONFIG": env["CONDOR_CONFIG"],
                }
            )
            config = c_config(location, f"burst-{system}", settings)
            marker = str(location / "bin" / "blahpd")
            wrapper = (
                f"#!/bin/sh\nexport BLAHPD_LOCATION={location}\n"
                f"export BLAHPD_CONFIG_LOCATION={config}\nexec {marker}\n"
            )
            rows.append(
                burst_side(
                    C,
                    work / f"condor-c-{system}",
                    release,
                    wrapper,
                    marker,
                    jobs,
                    system,
                    env,
                    f"BLAHPD_LOCATION = {location}",
                )
            )
            log(f"  {C}: {rows[-1]}")
        home = work / f"condor-ours-{system}"
        home.mkdir()
        toml = home / "blahpd.toml"
        driver = (
            f'slurm_conf = "{env["SLURM_CONF"]}"\n'
            if system == "slurm"
            else f'condor_config = "{env["CONDOR_CONFIG"]}"\n'
        )
        toml.write_text(
            f'state_dir = "{home}/blah-state"\n[site]\n'
            f'local_submit_attributes_dir = "{work / "ours-hooks"}"\n'
            f"[driver.{system}]\n{driver}"
        )
        wrapper = (
            f"#!/bin/sh\nexport PYTHONPATH={ROOT}\nexec {python} -m gahp_blah --config {toml}\n"
        )
        rows.append(burst_side(OURS, home, release, wrapper, str(toml), jobs, system, env))
        log(f"  {OURS}: {rows[-1]}")
    return rows


def burst_table(rows: list[BurstRow]) -> None:
    def rpcs(r: BurstRow) -> str:
        return "-" if r.rpcs is None else f"{r.rpcs} ({r.rpcs / max(r.done, 1):.1f})"

    out = []
    for system in dict.fromkeys(r.system for r in rows):
        its = [r for r in rows if r.system == system]
        out += [
            [
                system,
                r.side,
                f"{r.done}/{r.jobs}",
                f"{r.wall:.1f}",
                f"{r.cpu_s:.2f}",
                rpcs(r),
                f"{r.rss_end_kib / 1024:.1f}",
                f"{r.tree_rss_end_kib / 1024:.1f}",
                f"{r.peak_tree_rss_kib / 1024:.1f}",
                r.note,
            ]
            for r in its
        ]
        pair = {r.side: r for r in its}
        if C in pair and OURS in pair and all(r.done == r.jobs for r in its):
            c, o = pair[C], pair[OURS]
            out.append(
                [
                    system,
                    "C / ours",
                    "",
                    ratio(c.wall, o.wall),
                    ratio(c.cpu_s, o.cpu_s),
                    "-" if c.rpcs is None or o.rpcs is None else ratio(c.rpcs, o.rpcs),
                    ratio(c.rss_end_kib, o.rss_end_kib),
                    ratio(c.tree_rss_end_kib, o.tree_rss_end_kib),
                    ratio(c.peak_tree_rss_kib, o.peak_tree_rss_kib),
                    "",
                ]
            )
    table(
        "BURST under HTCondor 25.0.13's gridmanager (batch slurm / batch condor, sleep 1 jobs)",
        [
            "system",
            "blahpd",
            "done",
            "submit->last end s",
            "GAHP tree CPU s",
            "slurmctld RPCs (/job)",
            "RSS end MiB",
            "tree RSS end MiB",
            "tree RSS peak MiB",
            "note",
        ],
        out,
    )


# ---------------------------------------------------------------------- part 4: RSS, soak
def soak(work: Path, total: int, inflight: int) -> tuple[int, int, int, float, int]:
    """Our blahpd handles ``total`` fork jobs of /bin/true, each with a proxy (submitted,
    polled until COMPLETED); the checkpoint (1,000 jobs, a fifth of a soak under 2,000), the
    RSS (KiB) there and at the end, the seconds taken, and the job directories and proxy
    records left in the state directory at the end (must be none: each goes once its
    final status is answered)."""
    checkpoint = 1000 if total >= 2000 else max(total // 5, 1)
    batch = min(500, checkpoint)
    side = our_side(work, "soak", 'drivers = ["fork"]\n')
    iwd = work / "soak-iwd"
    iwd.mkdir()
    proxy = iwd / "x509up"
    proxy.write_text("soak proxy\n")
    proxy.chmod(0o600)
    ad = (
        f'[ Cmd = "/bin/true"; Iwd = "{iwd}"; Out = "/dev/null"; Err = "/dev/null"; '
        f'gridtype = "fork"; x509UserProxy = "{proxy}" ]'
    )
    first = rss_first = 0
    t0 = time.monotonic()
    with side.client() as c:
        done = 0
        while done < total:
            m = min(batch, total - done)
            _, got, _ = pipelined(c, "BLAH_JOB_SUBMIT", [ad] * m, inflight)
            ids = [r[2] for r in got if r and r[0] == "0"]
            if len(ids) != m:
                raise SystemExit(f"soak: {m - len(ids)} submissions failed")
            while ids:
                _, st, _ = pipelined(c, "BLAH_JOB_STATUS", ids, inflight)
                ids = [
                    j
                    for j, r in zip(ids, st, strict=True)
                    if not (r and r[0] == "0" and len(r) > 2 and r[2] == "4")
                ]
                if ids:
                    time.sleep(0.2)
            done += m
            if not first and done >= checkpoint:
                first, rss_first = done, proc_status(c.proc.pid, "VmRSS")
        rss_end = proc_status(c.proc.pid, "VmRSS")
        c.quit(timeout=30)
    state = work / "ours-state-soak"
    left = [
        p for d in (state / "fork" / "fork", state / "proxies") if d.is_dir() for p in d.iterdir()
    ]
    log(
        f"soak: {total} fork jobs in {time.monotonic() - t0:.1f} s; RSS after {first}: "
        f"{rss_first / 1024:.1f} MiB, at the end: {rss_end / 1024:.1f} MiB; "
        f"{len(left)} job directories or proxy records left, "
        f"{_count(state / 'fork' / 'final')} final-status records (kept keep_finished_s)"
    )
    return first, rss_first, rss_end, time.monotonic() - t0, len(left)


def _count(d: Path) -> int:
    return sum(1 for _ in d.iterdir()) if d.is_dir() else 0


# ---------------------------------------------------------------------- main
@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="blah-vs-c-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--small",
        action="store_true",
        help="CI size: N 50, 1 seed x 300 lines, no burst (20 jobs with --burst), 100-job soak",
    )
    ap.add_argument("--n", type=int, help="held jobs per system and side (default 300)")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--inflight", type=int, default=50)
    ap.add_argument("--seeds", type=int, help="fuzz seeds (default 3)")
    ap.add_argument("--seed", type=int, default=20261122, help="the first fuzz seed")
    ap.add_argument("--cases", type=int, help="fuzz lines per seed (default 1000)")
    ap.add_argument("--burst-jobs", type=int, help="jobs of the burst (default 200)")
    ap.add_argument(
        "--burst",
        action=argparse.BooleanOptionalAction,
        help="run the HTCondor burst (default: yes, but not with --small)",
    )
    ap.add_argument(
        "--parts", default="status,fuzz,burst,idle,soak", help="which parts run (comma-separated)"
    )
    ap.add_argument("--soak", type=int, help="jobs of the RSS soak (default 10,000; 0: none)")
    a = ap.parse_args(argv)
    n = a.n or (50 if a.small else 300)
    seeds = [a.seed + i for i in range(a.seeds or 1 if a.small else a.seeds or 3)]
    cases = a.cases or (300 if a.small else 1000)
    burst_jobs = a.burst_jobs or (20 if a.small else 200)
    soak_jobs = a.soak if a.soak is not None else (100 if a.small else 10_000)
    failed = False
    t_start = time.monotonic()
    with workdir() as work:
        location = unpack_c_blahp(work / "c")
        (work / "ours-hooks").mkdir()
        write_site_hooks(work / "ours-hooks", work / "hold-on-submit")
        if location is not None:
            write_site_hooks(location / "libexec", work / "hold-on-submit")
        if location is None:
            log(
                f"C blahpd: no {shared_dir() / 'blahp' / TARBALL} (set GAHP_SHARED): "
                "only our side runs"
            )
        parts = set(a.parts.split(","))
        systems = [s for s in a.systems.split(",") if s] if parts & {"status", "burst"} else []
        envs = batch_envs(work, systems)
        status_rows = (
            status_part(work, location, envs, dict.fromkeys(envs, n), a.inflight)
            if "status" in parts
            else []
        )
        fuzz_rows = fuzz_part(work, location, seeds, cases) if "fuzz" in parts else []
        burst_rows: list[BurstRow] = []
        if "burst" in parts and (a.burst if a.burst is not None else not a.small):
            burst_rows = burst_part(work, location, envs, burst_jobs)
        idle: list[tuple[str, int, int]] = []
        lrms = "slurm" if "slurm" in envs else "fork"
        env = envs.get("slurm", {})
        if "idle" in parts:
            if location is not None:
                config = c_config(
                    location, "idle", {"export SLURM_CONF": env.get("SLURM_CONF", "")}
                )
                idle.append((C, *idle_rss(c_side(location, config), env, lrms)))
            idle.append((OURS, *idle_rss(our_side(work, "idle", ""), env, lrms)))
        soak_result = soak(work, soak_jobs, a.inflight) if soak_jobs and "soak" in parts else None

    if status_rows:
        status_table(status_rows)
    if fuzz_rows:
        fuzz_table(fuzz_rows)
    if burst_rows:
        burst_table(burst_rows)
    if idle:
        rows = [[name, f"{rss / 1024:.1f}", f"{tree / 1024:.1f}"] for name, rss, tree in idle]
        table(
            f"IDLE RSS (after the banner and one BLAH_PING {lrms})",
            ["blahpd", "RSS MiB", "with children MiB"],
            rows,
        )
    if soak_result:
        checkpoint, first, end, secs, left = soak_result
        ok = end <= 1.5 * first
        failed |= not ok or left > 0
        log(
            f"\nSOAK (ours, {soak_jobs} fork jobs, {secs:.0f} s): RSS after the first "
            f"{checkpoint} {first / 1024:.1f} MiB, at the end {end / 1024:.1f} MiB "
            f"({end / first:.2f}x; requirement <= 1.5x: {'yes' if ok else 'NO'}); "
            f"job directories and proxy records left: {left} (requirement: none)"
        )
    ours_bad = [r for r in fuzz_rows if r.side == OURS and (r.deaths or r.hangs)]
    failed |= bool(ours_bad)
    log(f"\ntotal {time.monotonic() - t_start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
