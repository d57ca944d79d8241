"""The ``slurm`` driver: sbatch; status from squeue (or scontrol), sacct for finished jobs.

* Submission: ``sbatch --parsable [options]`` with the script (see :mod:`gahp_lrms.script`) on
  its standard input.  User strings reach Slurm only as separate ``argv`` items (``-J``,
  ``-D``, ``-p``, ``-A``) or shell-quoted inside the script (arguments, environment, stream
  paths): nothing passes through a shell unquoted, and nothing is comma-split by
  ``--export``.  The job also inherits the submitting process's environment
  (sbatch's default ``--export=ALL``).  ``count`` > 1 starts the instances with ``srun``.
* Status: from the status registry (see :mod:`gahp_lrms.registry`), kept current by one
  ``squeue -t all -j ID,ID,...`` for all tracked jobs per ``status_interval``, plus one
  ``sacct`` (slurmdbd) or ``sacct -c`` (jobcomp/filetxt) for those the controller no longer
  knows.  One job alone (``status_registry = false``, or a job the registry cannot answer):
  ``scontrol -o show job ID`` while the controller knows the job (``MinJobAge``), then
  ``sacct`` or ``sacct -c``.  A job known to neither is reported COMPLETED with an unknown
  exit code.
* Hold: a pending job gets ``scontrol hold``.  A running job cannot be held by Slurm (``scontrol
  hold`` accepts it and does nothing), so it is suspended with ``scontrol suspend`` (needs
  root/operator rights; refused with a DriverError when the ``suspend_running`` config is
  false).  A suspended job is HELD; ``resume`` uses ``scontrol resume`` for it and
  ``scontrol release`` for a held pending job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gahp_lrms.base import CommandDriver, Features, Submission, WorkdirRule, command_failure
from gahp_lrms.config import SlurmConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.script import directive_line, render_script, safe_job_name

__all__ = [
    "SlurmDriver",
    "job_info_from_fields",
    "parse_duration",
    "parse_exit_code",
    "parse_sacct",
    "parse_sacct_rows",
    "parse_scontrol_job",
    "parse_squeue",
    "gres",
    "sbatch_options",
    "slurm_job_name",
    "split_job_id",
    "split_queue",
]


_IDLE_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED"})
_RUNNING_STATES = frozenset(
    {"RUNNING", "COMPLETING", "CONFIGURING", "RESIZING", "SIGNALING", "STAGE_OUT"}
)
_HELD_STATES = frozenset({"SUSPENDED", "STOPPED", "REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
_DONE_REASONS = {
    "COMPLETED": None,
    "FAILED": None,
    "TIMEOUT": "wall-clock time limit exceeded",
    "OUT_OF_MEMORY": "memory limit exceeded",
    "NODE_FAIL": "node failure",
    "BOOT_FAIL": "node boot failure",
    "DEADLINE": "deadline reached",
    "PREEMPTED": "preempted",
}
_REMOVED_STATES = frozenset({"CANCELLED", "REVOKED"})


# ---------------------------------------------------------------------- pure parsing
def parse_scontrol_job(text: str) -> dict[str, str]:
    """``Key=value`` fields of ``scontrol -o show job`` output (first occurrence of a key
    wins; values that contain spaces, e.g. ``Command``, come out truncated)."""
    fields: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


def parse_sacct(text: str, job_id: str) -> dict[str, str] | None:
    """The row of ``sacct -P`` output (with its header line) for ``job_id``, or None.

    The last row wins (a requeued job appears once per run)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    header = lines[0].split("|")
    found = None
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        if row.get("JobID") == job_id:
            found = row
    return found


def parse_sacct_rows(text: str) -> dict[str, dict[str, str]]:
    """Every row of ``sacct -P`` output (with its header line) by ``JobID`` (job steps such
    as ``12.batch`` included; the last row of an id wins)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header = lines[0].split("|")
    rows: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        if row.get("JobID"):
            rows[row["JobID"]] = row
    return rows


SQUEUE_FIELDS = ("JobID", "State", "Reason", "PriorityLong", "TimeUsed", "BatchHost", "exit_code")
"""The ``squeue -O`` fields :func:`parse_squeue` reads, in order."""
SQUEUE_FORMAT = ",".join(f"{f}:|" for f in SQUEUE_FIELDS)


def parse_squeue(text: str) -> dict[str, dict[str, str]]:
    """Jobs of ``squeue -h -O SQUEUE_FORMAT`` output, by id, as ``scontrol``-style fields
    (``JobState``, ``Reason``, ``Priority``, ``RunTime``, ``BatchHost``, ``ExitCode`` as
    ``N:S``: squeue prints the raw wait status)."""
    jobs: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < len(SQUEUE_FIELDS) or not parts[0]:
            continue
        job_id, state, reason, priority, used, host, raw = parts[: len(SQUEUE_FIELDS)]
        fields = {"JobId": job_id, "JobState": state, "Reason": reason, "Priority": priority}
        fields["RunTime"] = used
        if host and host not in ("n/a", "(null)"):
            fields["BatchHost"] = host
        if raw.isdigit():
            status = int(raw)
            fields["ExitCode"] = f"{(status >> 8) & 0xFF}:{status & 0x7F}"
        jobs[job_id] = fields
    return jobs


def parse_duration(text: str | None) -> float | None:
    """Seconds in a Slurm duration (``[D-]HH:MM:SS``, ``MM:SS``, ``SS``, fractions allowed)."""
    if not text or text in ("UNLIMITED", "INVALID", "Unknown", "N/A", "NONE"):
        return None
    days = 0
    if "-" in text:
        day_text, _, text = text.partition("-")
        days = int(day_text)
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        return None
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + part
    if len(parts) == 1 and days:  # "D-HH"
        seconds *= 3600
    return days * 86400 + seconds


def parse_exit_code(text: str | None) -> tuple[int, int] | None:
    """``(status, signal)`` from an ``ExitCode=N:S`` value, or None."""
    if not text:
        return None
    m = re.fullmatch(r"(\d+):(\d+)", text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _node(fields: Mapping[str, str]) -> str | None:
    for key in ("BatchHost", "NodeList"):
        value = fields.get(key)
        if value and value not in ("(null)", "None assigned", "Unknown"):
            return value
    return None


def _usage(fields: Mapping[str, str]) -> dict[str, Any]:
    """Run and CPU times of ``scontrol`` (``RunTime``) or ``sacct`` (``Elapsed``, ``UserCPU``,
    ``SystemCPU``) fields."""
    usage: dict[str, Any] = {
        "wallclock_s": parse_duration(fields.get("RunTime") or fields.get("Elapsed"))
    }
    if "UserCPU" in fields:
        usage["user_cpu_s"] = parse_duration(fields.get("UserCPU"))
        usage["sys_cpu_s"] = parse_duration(fields.get("SystemCPU"))
    return usage


def _exit(state: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """Exit code or signal, and the reason, of a job that ended in ``state``."""
    code = parse_exit_code(fields.get("ExitCode"))
    exit_code = exit_signal = None
    if code is not None:
        if code[1]:
            exit_signal = code[1]
        else:
            exit_code = code[0]
    why = _DONE_REASONS[state]
    if why is None and exit_signal is not None:
        why = f"killed by signal {exit_signal}"
    elif why is None and exit_code:
        why = f"exited with status {exit_code}"
    return {"exit_code": exit_code, "exit_signal": exit_signal, "exit_reason": why}


def _job_state(fields: Mapping[str, str]) -> tuple[str, str]:
    """The state as Slurm wrote it (``JobState``, or sacct's ``State``: ``CANCELLED by 0``)
    and its name (``CANCELLED``; a ``+`` after it dropped)."""
    raw_state = fields.get("JobState") or fields.get("State") or ""
    return raw_state, raw_state.split()[0].rstrip("+") if raw_state.strip() else ""


def _reason(fields: Mapping[str, str]) -> str | None:
    reason = fields.get("Reason")
    return None if reason in (None, "", "None", "(null)") else reason


def _placed(
    state: str, reason: str | None, fields: Mapping[str, str], common: dict[str, Any]
) -> JobInfo | None:
    """The :class:`JobInfo` of a job that ``state`` shows was given a node (running,
    suspended or held, cancelled, ended), with ``common`` fields; None for another state."""
    node = _node(fields)
    if state in _RUNNING_STATES:
        return JobInfo(JobStatus.RUNNING, worker_node=node, **common)
    if state in _HELD_STATES:
        hold = "suspended" if state == "SUSPENDED" else (reason or state.lower())
        return JobInfo(JobStatus.HELD, worker_node=node, hold_reason=hold, **common)
    if state in _REMOVED_STATES:
        return JobInfo(JobStatus.REMOVED, worker_node=node, exit_reason="cancelled", **common)
    if state in _DONE_REASONS:
        return JobInfo(JobStatus.COMPLETED, worker_node=node, **_exit(state, fields), **common)
    return None


def job_info_from_fields(fields: Mapping[str, str]) -> JobInfo:
    """A :class:`JobInfo` from ``scontrol`` (``JobState``, ``RunTime``) or ``sacct``
    (``State``, ``Elapsed``) fields."""
    raw_state, state = _job_state(fields)
    reason = _reason(fields)
    common = _usage(fields)
    if state == "PENDING" and (
        (reason or "").startswith("JobHeld") or fields.get("Priority") == "0"
    ):
        return JobInfo(JobStatus.HELD, hold_reason=reason or "held", **common)
    if state in _IDLE_STATES:
        return JobInfo(JobStatus.IDLE, **common)
    placed = _placed(state, reason, fields, common)
    if placed is None:
        raise DriverError(f"unexpected Slurm job state {raw_state!r}")
    return placed


def slurm_job_name(name: str | None, default: str = "gahp") -> str:
    """A job name safe for every Slurm/PBS tool: ``[A-Za-z0-9_.+-]``, at most 64 chars."""
    return safe_job_name(name, 64, default)


_CLUSTER = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")


def split_queue(queue: str | None) -> tuple[str | None, str | None]:
    """``(partition, cluster)`` of a queue ``partition@cluster`` (HTCondor's way of naming
    a cluster of a Slurm multi-cluster setup, as the C blahp reads it); either may be None."""
    if not queue:
        return None, None
    part, sep, cluster = queue.partition("@")
    if not sep:
        return queue, None
    if not _CLUSTER.match(cluster):
        raise DriverError(f"Slurm cluster name {cluster!r} (in queue {queue!r}) is not a name")
    return part or None, cluster


def split_job_id(native_id: str) -> tuple[str, str | None]:
    """``(job id, cluster)`` of a native id ``ID`` or ``ID@cluster``."""
    job, _, cluster = native_id.partition("@")
    return job, cluster or None


def gres(spec: JobSpec) -> str | None:
    """The ``--gres`` value for the job's GPUs and MICs, or None.  Slurm has no GPU mode:
    a ``gpu_mode`` is refused."""
    if spec.gpu_mode is not None:
        raise DriverError(
            f"GPU mode {spec.gpu_mode!r} (GPUMode) cannot be asked of Slurm: it has no GPU modes"
        )
    items = []
    if spec.gpus or spec.gpu_model:
        model = f":{spec.gpu_model}" if spec.gpu_model else ""
        items.append(f"gpu{model}:{int(spec.gpus or 1)}")
    if spec.mics:
        items.append(f"mic:{int(spec.mics)}")
    return ",".join(items) or None


def sbatch_options(spec: JobSpec) -> list[str]:
    """sbatch options for ``spec`` (a list of argv items, never shell text)."""
    opts = ["--parsable", "-J", slurm_job_name(spec.name), "-o", "/dev/null"]
    opts += ["-e", "/dev/null"]
    if spec.workdir is not None:
        opts += ["-D", spec.workdir]
    opts += [*_placement(spec), *_limits(spec), *_size(spec)]
    if spec.start_held:
        opts.append("-H")
    return opts


def _placement(spec: JobSpec) -> list[str]:
    """``-p`` partition and ``-M`` cluster (of ``queue``), ``-A`` account (``project``)."""
    partition, cluster = split_queue(spec.queue)
    opts = []
    for flag, value in (("-p", partition), ("-M", cluster), ("-A", spec.project)):
        if value:
            opts += [flag, value]
    return opts


def _limits(spec: JobSpec) -> list[str]:
    """``--mem`` (MB) and ``-t`` (minutes, rounded up)."""
    opts = []
    if spec.memory_mb:
        opts.append(f"--mem={int(spec.memory_mb)}M")
    if spec.runtime_s:
        opts += ["-t", str(max(1, math.ceil(spec.runtime_s / 60)))]
    return opts


def _size(spec: JobSpec) -> list[str]:
    """Nodes (``-N``, ``--exclusive``), GPUs and MICs (``--gres``), tasks and CPUs."""
    opts = []
    if spec.nodes or spec.whole_nodes:
        opts += ["-N", str(int(spec.nodes or 1))]
    if spec.whole_nodes:
        opts.append("--exclusive")
    if (value := gres(spec)) is not None:
        opts.append(f"--gres={value}")
    if spec.count > 1:
        opts.append(f"--ntasks={int(spec.count)}")
    if spec.cpus_per_node:
        opts.append(f"--mincpus={int(spec.cpus_per_node)}")
    return opts


def _clusters(cluster: str | None) -> list[str]:
    """The ``-M`` option that sends a command to ``cluster`` (none for the local one)."""
    return ["-M", cluster] if cluster else []


# ---------------------------------------------------------------------- driver
class SlurmDriver(CommandDriver):
    """Jobs in Slurm.  Config keys: those of :class:`CommandDriver`, ``slurm_conf``
    (exported as SLURM_CONF) and ``suspend_running`` (default True: hold a running job by
    suspending it)."""

    name = "slurm"
    system = "Slurm"
    features = Features(bulk_status=True)
    config_class = SlurmConfig
    settings: SlurmConfig

    def _setup(self) -> None:
        self.suspend_running = self.settings.suspend_running
        self._slurmdbd: bool | None = None  # whether plain sacct works (None: not tried)

    # ------------------------------------------------------------------ helpers
    def _on_job(self, command: Sequence[str], native_id: str) -> list[str]:
        job, cluster = split_job_id(native_id)
        return [command[0], *_clusters(cluster), *command[1:], job]

    def lookup(self, native_id: str) -> tuple[str, dict[str, str] | None]:
        """Where the job was found (``scontrol``, ``sacct``, ``jobcomp`` or ``none``) and its
        fields.  A job ``ID@cluster`` is asked of that cluster (``-M``)."""
        job, cluster = split_job_id(native_id)
        m = _clusters(cluster)
        proc = self._run("scontrol", *m, "-o", "show", "job", job, check=False)
        lines = [line for line in proc.stdout.splitlines() if "JobId=" in line]
        if proc.returncode == 0 and lines:
            return "scontrol", parse_scontrol_job(lines[0])
        if "invalid job id" not in (proc.stderr + proc.stdout).lower():
            raise DriverError(command_failure(["scontrol"], proc))
        fmt = "JobID,State,ExitCode,Elapsed,NodeList"
        queries = (
            ("sacct", ["-o", fmt + ",UserCPU,SystemCPU"]),  # slurmdbd, when configured
            ("jobcomp", ["-c", "-o", fmt]),  # jobcomp/filetxt
        )
        for source, extra in queries:
            proc = self._run("sacct", *m, "-P", "-j", job, *extra, check=False)
            if proc.returncode == 0:
                row = parse_sacct(proc.stdout, job)
                if row is not None:
                    return source, row
        return "none", None

    def _fields(self, native_id: str) -> dict[str, str] | None:
        return self.lookup(self._check_id(native_id))[1]

    def bulk_fields(self, native_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Fields of the jobs among ``native_ids`` that Slurm still knows, from one ``squeue``
        and, for those the controller has forgotten, one ``sacct`` (or ``sacct -c``) per
        cluster (the local one, and each of the jobs ``ID@cluster``)."""
        by_cluster: dict[str | None, dict[str, str]] = {}
        for native_id in native_ids:
            job, cluster = split_job_id(native_id)
            by_cluster.setdefault(cluster, {})[job] = native_id
        found: dict[str, dict[str, str]] = {}
        for cluster, jobs in by_cluster.items():
            for job, fields in self._cluster_fields(cluster, list(jobs)).items():
                if job in jobs:
                    found[jobs[job]] = fields
        return found

    def _cluster_fields(
        self, cluster: str | None, jobs: Sequence[str]
    ) -> dict[str, dict[str, str]]:
        m = _clusters(cluster)
        ids = ",".join(jobs)
        proc = self._run(
            "squeue", *m, "-h", "-t", "all", "-j", ids, "-O", SQUEUE_FORMAT, check=False
        )
        if proc.returncode == 0:
            found = parse_squeue(proc.stdout)
        elif "invalid job id" in (proc.stderr + proc.stdout).lower():
            found = {}  # none of them is known to the controller any more
        else:
            raise DriverError(command_failure(["squeue"], proc))
        gone = [i for i in jobs if i not in found]
        if gone:
            found.update(self._accounting(gone, cluster))
        return found

    def _accounting(
        self, native_ids: Sequence[str], cluster: str | None = None
    ) -> dict[str, dict[str, str]]:
        """sacct rows of finished jobs: slurmdbd's when it is configured, else jobcomp's."""
        fmt = "JobID,State,ExitCode,Elapsed,NodeList"
        m = _clusters(cluster)
        ids = ",".join(native_ids)
        wanted = set(native_ids)
        if self._slurmdbd is not False or cluster is not None:
            proc = self._run(
                "sacct", *m, "-P", "-j", ids, "-o", fmt + ",UserCPU,SystemCPU", check=False
            )
            if proc.returncode == 0:
                if cluster is None:
                    self._slurmdbd = True
                return {k: v for k, v in parse_sacct_rows(proc.stdout).items() if k in wanted}
            if "disabled" in (proc.stderr + proc.stdout).lower() and cluster is None:
                self._slurmdbd = False
        proc = self._run("sacct", *m, "-c", "-P", "-j", ids, "-o", fmt, check=False)
        if proc.returncode != 0:
            return {}  # those jobs are then asked one by one
        return {k: v for k, v in parse_sacct_rows(proc.stdout).items() if k in wanted}

    # ------------------------------------------------------------------ submit (see CommandDriver)
    job_id = re.compile(r"\d+(?:_\d+)?(?:@[A-Za-z0-9_.-]{1,64})?\Z")
    """``ID``, or ``ID@cluster`` for a job sent to another cluster (queue ``part@cluster``)."""
    submit_command = "sbatch"
    # sbatch's default is its own working directory: the server's
    workdir = WorkdirRule(server_default=False)

    def _submission(self, spec: JobSpec) -> Submission:
        site = [*spec.directives, *directive_line("#SBATCH", spec.extra_args)]
        script = render_script(spec, launcher=["srun", "--kill-on-bad-exit=0"], directives=site)
        _, cluster = split_queue(spec.queue)  # its jobs are "ID@cluster"
        return Submission(
            sbatch_options(spec), input=script, id_suffix=f"@{cluster}" if cluster else ""
        )

    def _printed_id(self, stdout: str) -> str:
        return stdout.strip().split(";")[0]  # --parsable: "ID" or "ID;cluster"

    # ------------------------------------------------------------------ status
    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        found: dict[str, JobInfo] = {}
        for native_id, fields in self.bulk_fields(native_ids).items():
            try:
                found[native_id] = job_info_from_fields(fields)
            except DriverError as exc:  # an unexpected state: that job is asked alone
                self.log.warning("Slurm job %s: %s", native_id, exc)
        return found

    def query_status(self, native_id: str) -> JobInfo:
        fields = self._fields(native_id)
        if fields is None:
            return JobInfo(
                JobStatus.COMPLETED,
                exit_reason="job no longer known to Slurm (exit status unknown)",
            )
        return job_info_from_fields(fields)

    # ------------------------------------------------------------------ cancel (see CommandDriver)
    cancel_command = ("scancel",)
    cancel_unknown = re.compile("invalid job id|already completing or completed", re.I)

    # ------------------------------------------------------------------ hold, resume, ping
    def hold(self, native_id: str) -> None:
        suspend = ("scontrol", "suspend") if self.suspend_running else None
        self._hold_with(native_id, ("scontrol", "hold"), suspend, " (suspend_running is disabled)")

    def resume(self, native_id: str) -> None:
        fields = self._fields(native_id)
        info = job_info_from_fields(fields) if fields else None
        if info is None or info.status is not JobStatus.HELD:
            what = info.status.name if info else "unknown to Slurm"
            raise DriverError(f"Slurm job {native_id} is not held: it is {what}")
        state = (fields or {}).get("JobState", "")
        if state == "SUSPENDED":
            self._run(*self._on_job(("scontrol", "resume"), native_id))
        else:
            self._run(*self._on_job(("scontrol", "release"), native_id))

    def ping(self) -> None:
        self._run("scontrol", "ping", timeout=min(self.timeout, 15.0))
