"""Fixtures of the real-client tests: the Ninf-G bundle, the sample built once per session,
the invoke-server wrappers, and one :class:`Backend` per batch system.

Without the bundle the tests skip (fail under ``GAHP_REQUIRE_NINFG=1``).  A batch system
that is down skips its cases (fail under its ``GAHP_REQUIRE_*``).  LSF refuses root's jobs:
run as root, the LSF cases run the client as the LSF test user (``live_services.LSF_USER``),
in a directory of its own, with an interpreter it may run (the GAHPs' venv).  So do the
Condor cases as the owner of the HTCondor pool (``.ci/htcondor-pool-up.sh``): a pool that
does not run as root runs every job as that user, who must reach the scratch directories.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from live_services import lsf_bin_dir, lsf_job_user, unavailable
from ngkit import (
    REPO,
    NgClient,
    Result,
    alive,
    build_sample,
    find_ng_dir,
    give_tree,
    write_invoke_servers,
)

MAX_HANDLES = 20


@pytest.fixture(scope="session")
def ng_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NG_DIR of the bundle (unpacked by ``.ci/ninfg-up.sh`` or here)."""
    if not shutil.which("gcc") or not shutil.which("make"):
        unavailable("GAHP_REQUIRE_NINFG", "gcc/make missing (run `bash .ci/ninfg-up.sh`)")
    found, reason = find_ng_dir(tmp_path_factory.getbasetemp().parent / "ninfg-bundle")
    if found is None:
        unavailable("GAHP_REQUIRE_NINFG", reason)
    return found


@pytest.fixture(scope="session")
def ng_sample(ng_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built pi sample: the Executable, its NRF file and ``ng_test_client``."""
    return build_sample(ng_dir, tmp_path_factory.getbasetemp().parent / "ninfg-build")


@pytest.fixture(scope="session")
def ng_servers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_invoke_servers(tmp_path_factory.mktemp("ng-servers"))


# ---------------------------------------------------------------------- batch systems
def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20,
                              check=False)
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
    return Backend("Slurm", env, int(cpus[-1]) if cpus[-1].isdigit() else 4, "SLURM_JOB_ID",
                   state, lambda job: _run(["scancel", job], env) and None)


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
    return Backend("SGE", {**env, "NG_INVOKE_SGE_PE": os.environ.get("GAHP_SGE_PE", "smp")},
                   total, "JOB_ID", state, lambda job: _run([f"{qbin}/qdel", job], env) and None)


def pbs_backend(env: dict[str, str]) -> Backend:
    pbs_bin = Path(env["GAHP_PBS_BIN_DIR"])
    env = {**env, "NG_INVOKE_BIN_DIR": str(pbs_bin)}

    def state(job: str) -> str:
        proc = _run([str(pbs_bin / "qstat"), "-f", job], env)
        return "live" if proc.returncode == 0 and "job_state = F" not in proc.stdout else "gone"

    nodes = json.loads(_run([str(pbs_bin / "pbsnodes"), "-a", "-F", "json"], env).stdout)
    cpus = sum(int(n["resources_available"]["ncpus"]) for n in nodes["nodes"].values())
    return Backend("PBS", env, cpus, "PBS_JOBID", state,
                   lambda job: _run([str(pbs_bin / "qdel"), job], env) and None)


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

    return Backend("LSF", env, 4, "LSB_JOBID", state,
                   lambda job: _run([*as_user, str(bin_dir / "bkill"), job], env) and None,
                   run_as=run_as, python=python, start_timeout=20)  # LSF dispatches slowly


POOL_REQUIRE = "GAHP_REQUIRE_HTCONDOR_POOL"


def condor_backend(env: dict[str, str]) -> Backend:
    """As root, the client runs as the pool's owner (every job runs as that user)."""
    owner = env.get("GAHP_HTCONDOR_POOL_USER", "gahpjob")
    run_as = owner if os.geteuid() == 0 else None
    python = (shared_python(run_as, POOL_REQUIRE, "the HTCondor pool runs jobs as its owner")
              if run_as else sys.executable)
    bin_dir = Path(env["GAHP_HTCONDOR_POOL_BIN"])
    full = {**os.environ, **env}

    def state(job: str) -> str:
        proc = _run([str(bin_dir / "condor_q"), job, "-af", "JobStatus"], full)
        text = proc.stdout.strip()
        if proc.returncode != 0:
            return "unknown"
        return "gone" if text in ("", "3", "4") else text  # removed/completed: leaving

    cpus = _run([str(bin_dir / "condor_status"), "-af", "TotalSlotCpus"], full).stdout.split()
    return Backend("Condor", env, int(cpus[0]) if cpus and cpus[0].isdigit() else 4,
                   "", state, lambda job: _run([str(bin_dir / "condor_rm"), job], full) and None,
                   run_as=run_as, python=python, start_timeout=30, job_key="condor_id")


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


@pytest.fixture
def make_client(
    ng_dir: Path, ng_sample: Path, ng_servers: Path, tmp_path: Path
) -> Iterator[Callable[[Backend], NgClient]]:
    """``make_client(backend)``: an :class:`NgClient`; afterwards every client is killed
    and every job its executables recorded is removed from the batch system."""
    made: list[tuple[NgClient, Backend]] = []
    areas: list[Path] = []

    def make(backend: Backend, name: str = "run") -> NgClient:
        if backend.run_as is None:
            client = NgClient(ng_dir, ng_sample, ng_servers, backend.kind, tmp_path / name,
                              backend.env)
        else:
            area = user_area(ng_dir, ng_sample, backend)
            areas.append(area)
            client = NgClient(ng_dir, area / "sample", area / "servers", backend.kind,
                              area / name, backend.env, run_as=backend.run_as,
                              python=backend.python)
        made.append((client, backend))
        return client

    yield make
    for client, backend in made:
        client.kill_group()
        for record in Result(client.rundir, 0, "", "").records():
            if not backend.job_gone(record):
                backend.remove(backend.job_of(record))
    for area in areas:
        shutil.rmtree(area, ignore_errors=True)


def user_area(ng_dir: Path, sample: Path, backend: Backend) -> Path:
    """A directory of ``backend.run_as``'s own, outside root's private temporary tree, with
    a copy of the built sample and the invoke-server wrappers: where its client runs."""
    assert backend.run_as is not None
    probe = _run(["runuser", "-u", backend.run_as, "--", "test", "-x",
                  str(ng_dir / "test-kit" / "ng-is-tap")])
    if probe.returncode != 0:
        unavailable("GAHP_REQUIRE_NINFG", f"{backend.run_as} cannot reach the Ninf-G bundle at"
                    f" {ng_dir} (unpack it with `bash .ci/ninfg-up.sh`)")
    area = Path(tempfile.mkdtemp(prefix=f"gahp-ng-{backend.run_as}-"))
    area.chmod(0o755)
    shutil.copytree(sample, area / "sample", symlinks=True)
    write_invoke_servers(area / "servers", backend.python)
    give_tree(area, backend.run_as)
    return area
