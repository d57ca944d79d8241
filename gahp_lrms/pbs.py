"""The ``pbs`` driver: qsub/qstat/qdel/qhold/qrls (PBS/Torque syntax).

Written against Debian's ``slurm-wlm-torque`` wrappers (PBS commands over Slurm), and kept to
the plain PBS options.  Those wrappers run ``sbatch`` through a shell, so no user string is
ever put on the qsub command line: queue and project must match ``[A-Za-z0-9_.@-]+`` (else
DriverError), the job name is sanitised, and arguments, environment, working directory and
stream paths are shell-quoted inside the script (see :mod:`gahp_lrms.script`).  The script
file is written to ``state_dir/pbs`` (a path checked to be shell-safe) and deleted after
submission.  ``count`` > 1 runs the instances from a shell loop on the first node.

``qstat`` has no exit status and shows a held job as ``Q``, so when Slurm's ``scontrol``
is available (``slurm_status``, default true) the driver asks it for held-ness and exit codes
(see :class:`gahp_lrms.slurm.SlurmDriver.lookup`).  The status registry (see
:mod:`gahp_lrms.registry`) is then kept current by Slurm's bulk query (one ``squeue``, one
``sacct``); without Slurm, by one ``qstat -f`` for all jobs (jobs that left it are asked
one by one).  ``qhold`` of a running job is refused with
a DriverError (PBS cannot hold a running job without checkpointing).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from gahp_lrms.base import CommandDriver, command_failure
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.script import render_script
from gahp_lrms.slurm import (
    SlurmDriver,
    job_info_from_fields,
    parse_duration,
    slurm_job_name,
)

__all__ = [
    "PbsDriver",
    "format_walltime",
    "parse_qstat_full",
    "parse_qstat_full_all",
    "qsub_options",
]

_SAFE_WORD = re.compile(r"[A-Za-z0-9_.@-]+\Z")
_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+\Z")
_JOB_ID = re.compile(r"[A-Za-z0-9_.\[\]-]+\Z")
_UNKNOWN_JOB_RC = 153  # PBSE_UNKJOBID (15001) & 0xff


# ---------------------------------------------------------------------- pure parsing
def parse_qstat_full(text: str) -> dict[str, str]:
    """Attributes of ``qstat -f`` output (``Job Id`` included; continuation lines joined)."""
    fields: dict[str, str] = {}
    last = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Job Id:"):
            fields["Job Id"] = line.partition(":")[2].strip()
            last = None
        elif " = " in line:
            key, _, value = line.partition(" = ")
            last = key.strip()
            fields[last] = value.strip()
        elif last is not None and raw[:1] == "\t":  # continuation of a long value
            fields[last] += line
    return fields


def parse_qstat_full_all(text: str) -> dict[str, dict[str, str]]:
    """Every job of ``qstat -f`` output (several ``Job Id:`` records), by id."""
    jobs: dict[str, dict[str, str]] = {}
    chunk: list[str] = []
    for line in [*text.splitlines(), "Job Id:"]:
        if line.startswith("Job Id:") and chunk:
            fields = parse_qstat_full("\n".join(chunk))
            if fields.get("Job Id"):
                jobs[fields["Job Id"]] = fields
            chunk = []
        chunk.append(line)
    return jobs


def format_walltime(seconds: int) -> str:
    """``HH:MM:SS`` for a PBS walltime."""
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"


def qsub_options(spec: JobSpec) -> list[str]:
    """qsub options for ``spec``; every value is checked to be shell-safe."""
    opts = ["-N", slurm_job_name(spec.name)[:15], "-o", "/dev/null", "-e", "/dev/null"]
    for flag, value, what in (("-q", spec.queue, "queue"), ("-A", spec.project, "project")):
        if value:
            if not _SAFE_WORD.match(value):
                raise DriverError(f"PBS {what} name {value!r} has unsupported characters")
            opts += [flag, value]
    resources = []
    if spec.nodes or spec.count > 1:
        nodes = spec.nodes or 1
        resources.append(f"nodes={int(nodes)}:ppn={-(-spec.count // nodes)}")
    if spec.cpus_per_node:
        resources.append(f"ncpus={int(spec.cpus_per_node)}")
    if spec.memory_mb:
        resources.append(f"mem={int(spec.memory_mb)}mb")
    if spec.runtime_s:
        resources.append(f"walltime={format_walltime(spec.runtime_s)}")
    for resource in resources:
        opts += ["-l", resource]
    if spec.start_held:
        opts.append("-h")
    return opts


def info_from_qstat(fields: Mapping[str, str]) -> JobInfo:
    """A :class:`JobInfo` from ``qstat -f`` alone (no exit status: PBS does not give one)."""
    state = fields.get("job_state", "")
    host = fields.get("exec_host", "").split("/")[0].split("+")[0] or None
    used = parse_duration(fields.get("resources_used.walltime"))
    if state in ("Q", "W", "T"):
        return JobInfo(JobStatus.IDLE)
    if state == "H":
        return JobInfo(JobStatus.HELD, hold_reason="held")
    if state in ("R", "E"):
        return JobInfo(JobStatus.RUNNING, worker_node=host, wallclock_s=used)
    if state == "S":
        return JobInfo(JobStatus.HELD, worker_node=host, hold_reason="suspended")
    if state in ("C", "F"):
        return JobInfo(
            JobStatus.COMPLETED,
            worker_node=host,
            wallclock_s=used,
            exit_reason="finished (PBS reports no exit status)",
        )
    raise DriverError(f"unexpected PBS job state {state!r}")


# ---------------------------------------------------------------------- driver
class PbsDriver(CommandDriver):
    """Jobs through PBS commands.  Config keys: those of :class:`CommandDriver`,
    ``slurm_conf`` (exported as SLURM_CONF, used by the Slurm-backed wrappers) and
    ``slurm_status`` (default true: ask Slurm for exit codes)."""

    name = "pbs"
    system = "PBS"
    job_id = _JOB_ID
    config_keys = CommandDriver.common_keys | {"slurm_conf", "slurm_status"}

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        if self.config.get("slurm_conf"):
            self.env["SLURM_CONF"] = str(self.config["slurm_conf"])
        self.slurm: SlurmDriver | None = None
        if self.config.get("slurm_status", True) and shutil.which(
            "scontrol", path=self.bin_dir or self.env.get("PATH")
        ):
            slurm_config = {
                k: self.config[k]
                for k in ("bin_dir", "command_timeout", "slurm_conf")
                if k in self.config
            }
            self.slurm = SlurmDriver(slurm_config, state_dir)

    def _script_dir(self) -> Path:
        for base in (self.state_dir / "pbs", Path(tempfile.gettempdir()) / "gahp-pbs"):
            if _SAFE_PATH.match(str(base.resolve())):
                base.mkdir(parents=True, exist_ok=True)
                return base.resolve()
        raise DriverError(f"no shell-safe directory for PBS scripts (state_dir {self.state_dir})")

    # ------------------------------------------------------------------ Driver API
    def submit(self, spec: JobSpec) -> str:
        if spec.workdir is not None and not os.path.isabs(spec.workdir):
            spec = attrs.evolve(spec, workdir=os.path.abspath(spec.workdir))
        elif spec.workdir is None:  # qsub's default would be $HOME; match sbatch and fork
            spec = attrs.evolve(spec, workdir=os.getcwd())
        opts = qsub_options(spec)
        fd, path = tempfile.mkstemp(prefix="job-", suffix=".sh", dir=self._script_dir())
        try:
            with os.fdopen(fd, "w") as f:
                f.write(render_script(spec))
            os.chmod(path, 0o700)
            proc = self._run("qsub", *opts, path, timeout=self.submit_timeout)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        lines = proc.stdout.strip().splitlines()
        native_id = lines[-1].strip() if lines else ""
        if not _JOB_ID.match(native_id):
            raise DriverError(f"qsub printed no job id: {proc.stdout.strip()!r}")
        self._submitted(native_id)
        return native_id

    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        found: dict[str, JobInfo] = {}
        if self.slurm is not None:
            by_slurm = {i.split(".")[0]: i for i in native_ids if i.split(".")[0].isdigit()}
            for slurm_id, fields in self.slurm.bulk_fields(list(by_slurm)).items():
                with contextlib.suppress(DriverError):  # else asked alone
                    found[by_slurm[slurm_id]] = job_info_from_fields(fields)
            return found
        proc = self._run("qstat", "-f", check=False)
        if proc.returncode != 0 and (proc.returncode != _UNKNOWN_JOB_RC or proc.stderr.strip()):
            raise DriverError(command_failure(["qstat"], proc))
        jobs = parse_qstat_full_all(proc.stdout)
        for native_id in native_ids:
            qstat_fields = jobs.get(native_id)
            if qstat_fields is not None:
                with contextlib.suppress(DriverError):
                    found[native_id] = info_from_qstat(qstat_fields)
        return found

    def query_status(self, native_id: str) -> JobInfo:
        self._check_id(native_id)
        proc = self._run("qstat", "-f", native_id, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            info = info_from_qstat(parse_qstat_full(proc.stdout))
            if self.slurm is None or info.status in (JobStatus.RUNNING,):
                return info
        elif proc.returncode not in (_UNKNOWN_JOB_RC,) and "nknown" not in proc.stderr:
            raise DriverError(command_failure(["qstat"], proc))
        else:
            info = None
        if self.slurm is not None:
            # Held-ness of a queued job and exit codes are only known to Slurm.
            slurm_id = native_id.split(".")[0]
            _source, fields = self.slurm.lookup(slurm_id) if slurm_id.isdigit() else ("", None)
            if fields is not None:
                return job_info_from_fields(fields)
        if info is not None:
            return info
        return JobInfo(
            JobStatus.COMPLETED, exit_reason="job no longer known to PBS (exit status unknown)"
        )

    def cancel(self, native_id: str) -> None:
        self._check_id(native_id)
        proc = self._run("qdel", native_id, check=False)
        self._changed(native_id)
        if proc.returncode != 0 and not self.query_status(native_id).finished:
            raise DriverError(command_failure(["qdel"], proc))
        self._wait_until_not_running(native_id)
        self._changed(native_id)

    def hold(self, native_id: str) -> None:
        self._hold_with(native_id, ("qhold",), None, " (PBS cannot suspend it)")

    def resume(self, native_id: str) -> None:
        info = self.query_status(native_id)
        if info.status is not JobStatus.HELD:
            raise DriverError(f"PBS job {native_id} is not held: it is {info.status.name}")
        self._changed(native_id)
        self._run("qrls", native_id)
        self._changed(native_id)

    def ping(self) -> None:
        proc = self._run("qstat", timeout=min(self.timeout, 15.0), check=False)
        # The Slurm wrapper's qstat exits with PBSE_UNKJOBID, silently, when no job is listed.
        if proc.returncode == 0 or (proc.returncode == _UNKNOWN_JOB_RC and not proc.stderr.strip()):
            return
        raise DriverError(command_failure(["qstat"], proc))
