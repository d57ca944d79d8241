"""The batch systems the real Ninf-G client's cases run on: one :class:`Backend` per
invoke server (how to find its jobs, whether one is gone, how to remove it), and who runs the
client for it. A module of its own (not conftest.py) so that test modules import it by a
name no other test directory has."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from live_services import lsf_bin_dir, lsf_job_user, unavailable
from ngkit import REPO, alive

MAX_HANDLES = 20


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


@dataclass
class Backend:
    """One batch system as the tests see it: the client's environment, how many jobs can
    run at once, and how to find (and clean up) a job from its executable's environment."""

    kind: str
    env: dict[str, str] = field(default_factory=dict)
    slots: int = MAX_HANDLES
    job_var: str = ""
    state: Callable[[str], str] = lambda _job: ""
    remove: Callable[[str], None] = lambda _job: None
    run_as: str | None = None
    """The user the client runs as (None: this process's)."""
    start_timeout: int = 3
    """A ``job_startTimeout`` the job starts within, though its executable never connects."""
    python: str = sys.executable
    """The interpreter of the invoke servers and the recorder (one ``run_as`` may run)."""
    job_key: str = ""
    """The key of a record that names its job (else ``job_var`` in its environment)."""

    @property
    def handles(self) -> int:
        """Handles one test may hold at once: a job ends only when its handle is
        destructed, so more jobs than slots would deadlock."""
        return max(1, min(MAX_HANDLES, self.slots))

    def job_of(self, record: dict) -> str:
        if self.job_key:
            return record[self.job_key]
        return record["env"][self.job_var] if self.job_var else str(record["pid"])

    def job_gone(self, record: dict) -> bool:
        """Whether the batch system (or this host) no longer runs the recorded job."""
        if not (self.job_var or self.job_key):
            return not alive(record["pid"])
        return self.state(self.job_of(record)) in ("", "gone")


def _kill(pid: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid), signal.SIGKILL)


def slurm_backend(env: dict[str, str]) -> Backend:
    def state(job: str) -> str:
        proc = _run(["squeue", "-h", "-j", job, "-o", "%T"], env)
        text = proc.stdout.strip()
        live = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}
        return text if text in live else "gone"

    cpus = _run(["sinfo", "-h", "-o", "%C"], env).stdout.strip().split("/")
    return Backend(
        "Slurm",
        env,
        int(cpus[-1]) if cpus[-1].isdigit() else 4,
        "SLURM_JOB_ID",
        state,
        lambda job: _run(["scancel", job], env) and None,
    )


def sge_backend(env: dict[str, str]) -> Backend:
    qbin = str(next(Path(env["SGE_ROOT"], "bin").glob("*/qstat")).parent)

    def state(job: str) -> str:
        proc = _run([f"{qbin}/qstat", "-j", job], env)
        return "live" if proc.returncode == 0 else "gone"

    total = 4
    for line in _run([f"{qbin}/qstat", "-g", "c"], env).stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "all.q" and parts[-3].isdigit():
            total = int(parts[-3])
    return Backend(
        "SGE",
        {**env, "NG_INVOKE_SGE_PE": os.environ.get("GAHP_SGE_PE", "smp")},
        total,
        "JOB_ID",
        state,
        lambda job: _run([f"{qbin}/qdel", job], env) and None,
    )


def pbs_backend(env: dict[str, str]) -> Backend:
    pbs_bin = Path(env["GAHP_PBS_BIN_DIR"])
    env = {**env, "NG_INVOKE_BIN_DIR": str(pbs_bin)}

    def state(job: str) -> str:
        proc = _run([str(pbs_bin / "qstat"), "-f", job], env)
        return "live" if proc.returncode == 0 and "job_state = F" not in proc.stdout else "gone"

    nodes = json.loads(_run([str(pbs_bin / "pbsnodes"), "-a", "-F", "json"], env).stdout)
    cpus = sum(int(n["resources_available"]["ncpus"]) for n in nodes["nodes"].values())
    return Backend(
        "PBS",
        env,
        cpus,
        "PBS_JOBID",
        state,
        lambda job: _run([str(pbs_bin / "qdel"), job], env) and None,
    )


def shared_python(
    user: str, require: str = "GAHP_REQUIRE_LSF", why: str = "LSF refuses root's jobs"
) -> str:
    """An interpreter ``user`` may run that imports gahp's dependencies: the venv
    ``.ci/htcondor-up.sh`` makes for the GAHPs (``$GAHP_VENV``, default /opt/gahp-venv; root's
    own interpreter may be out of other users' reach)."""
    python = str(Path(os.environ.get("GAHP_VENV", "/opt/gahp-venv")) / "bin" / "python")
    probe = _run(
        ["runuser", "-u", user, "--", python, "-c", "import gahp_ninfg.cli"],
        {**os.environ, "PYTHONPATH": str(REPO)},
    )
    if probe.returncode != 0:
        unavailable(
            require,
            f"{why}, so its Ninf-G client runs as {user}, and {user} cannot"
            f" run gahp with {python} (make it with `bash .ci/htcondor-up.sh`, or set"
            f" GAHP_VENV): {probe.stderr.strip()[-300:]}",
        )
    return python


def lsf_backend(env: dict[str, str]) -> Backend:
    """As root, the client (and so the invoke server) runs as :data:`LSF_USER`, with the
    LSF commands: LSF refuses root's jobs, and a Ninf-G client is a user's program."""
    run_as = lsf_job_user().pw_name if os.geteuid() == 0 else None
    python = shared_python(run_as) if run_as else sys.executable
    bin_dir = Path(lsf_bin_dir(env["LSF_ENVDIR"]) or "")
    env = {**env, "NG_INVOKE_BIN_DIR": str(bin_dir)}
    as_user = ["runuser", "-u", run_as, "--"] if run_as else []

    def state(job: str) -> str:
        bjobs = [*as_user, str(bin_dir / "bjobs"), "-a", "-w", job]
        lines = _run(bjobs, env).stdout.splitlines()
        out = lines[1].split() if len(lines) > 1 else []
        return out[2] if len(out) > 2 and out[2] not in ("DONE", "EXIT") else "gone"

    return Backend(
        "LSF",
        env,
        4,
        "LSB_JOBID",
        state,
        lambda job: _run([*as_user, str(bin_dir / "bkill"), job], env) and None,
        run_as=run_as,
        python=python,
        start_timeout=20,
    )  # LSF dispatches slowly


POOL_REQUIRE = "GAHP_REQUIRE_HTCONDOR_POOL"


def condor_backend(env: dict[str, str]) -> Backend:
    """As root, the client runs as the pool's owner (every job runs as that user)."""
    owner = env.get("GAHP_HTCONDOR_POOL_USER", "gahpjob")
    run_as = owner if os.geteuid() == 0 else None
    python = (
        shared_python(run_as, POOL_REQUIRE, "the HTCondor pool runs jobs as its owner")
        if run_as
        else sys.executable
    )
    bin_dir = Path(env["GAHP_HTCONDOR_POOL_BIN"])
    full = {**os.environ, **env}

    def state(job: str) -> str:
        proc = _run([str(bin_dir / "condor_q"), job, "-af", "JobStatus"], full)
        text = proc.stdout.strip()
        if proc.returncode != 0:
            return "unknown"
        return "gone" if text in ("", "3", "4") else text  # removed/completed: leaving

    cpus = _run([str(bin_dir / "condor_status"), "-af", "TotalSlotCpus"], full).stdout.split()
    return Backend(
        "Condor",
        env,
        int(cpus[0]) if cpus and cpus[0].isdigit() else 4,
        "",
        state,
        lambda job: _run([str(bin_dir / "condor_rm"), job], full) and None,
        run_as=run_as,
        python=python,
        start_timeout=30,
        job_key="condor_id",
    )


def backend_for(kind: str, batch_env: Callable[[str], dict[str, str] | None]) -> Backend:
    """The :class:`Backend` ``kind``; skips (or fails) when it is not available."""
    if kind == "Fork":
        return Backend("Fork", remove=_kill)
    if kind == "Condor":
        return condor_backend(dict(batch_env("condor") or {}))
    if kind == "Slurm":
        return slurm_backend(dict(batch_env("slurm") or {}))
    if kind == "SGE":
        return sge_backend(dict(batch_env("sge") or {}))
    if kind == "PBS":
        return pbs_backend(dict(batch_env("pbs") or {}))
    return lsf_backend(dict(batch_env("lsf") or {}))
