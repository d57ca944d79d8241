"""The ``pbs`` driver: qsub/qstat/qdel/qhold/qrls, for PBS Professional/OpenPBS and for
Torque-style commands.

Two kinds of PBS answer to the same command names, and the driver tells them apart by asking
``qstat --version`` once (``flavor = "auto"``, the default): PBS Professional and OpenPBS
print ``pbs_version = ...``; anything else (Torque, or Debian's ``slurm-wlm-torque`` wrappers
of Slurm) is Torque-style.  ``flavor = "pbspro"`` or ``"torque"`` skips the question.
``bin_dir`` names the directory of the commands (e.g. ``/opt/pbs/bin``): ``/usr/bin/qsub``
may well be another system's.

Submission (both kinds): a ``/bin/sh`` script (see :mod:`gahp_lrms.script`: arguments,
environment, working directory and stream paths are shell-quoted inside it), written to
``state_dir/pbs`` (a path checked to be shell-safe), given to ``qsub`` by path from that
directory, and deleted afterwards.  No user string is put on the qsub command line unchecked:
queue and project must match ``[A-Za-z0-9_.@-]+`` (else DriverError), the job name is
sanitised.  The job's own ``-o``/``-e`` are ``/dev/null``: the script redirects the streams.
The job starts with the environment PBS gives it (the owner's login environment and
``PBS_*``) plus the spec's ``environment``.

PBS Professional:

* Resources in its syntax: ``-l select=N:ncpus=M:mem=Xmb`` (N = ``nodes``, default 1; M =
  ``cpus_per_node``, or the instances per node of ``count``; X = ``memory_mb``, the job's
  total, shared out among the N chunks), ``-l walltime=HH:MM:SS``; the chunks' placement
  is the site's default ``place``.
  ``qsub -f`` (no lingering per-user qsub daemon), ``-h`` for a held start.
* Status: one ``qstat -f -F json`` per ``status_interval`` for all the jobs PBS has queued or
  running (a large server's list is big: raise ``status_interval`` there), and ``qstat -x -f
  -F json <ids>`` for the tracked jobs that left it (finished since the last round: each is
  asked once, then its state is final).  PBS's history keeps finished jobs with their
  ``Exit_status``: 0-255 is the job's exit code, 256+N means killed by signal N, a negative
  value means PBS could not run the job.
  A job PBS does not know is REMOVED when job history is on (``job_history_enable``: it
  never existed, or its history expired), else COMPLETED with its exit status unknown.
* Cancel: the job is recorded as cancelled (``state_dir/cancelled``), then ``qdel``; from
  then on it is REMOVED (PBS kills it within the queue's ``kill_delay``; nothing waits for
  that).  ``qdel`` of a finished job (exit status 35) leaves it COMPLETED.
* Hold: ``qhold`` of a queued job (state ``H``); a running job cannot be held (``qhold``
  would only mark it for a later requeue): DriverError.  ``resume``: ``qrls``.

Torque-style commands: ``-l nodes=N:ppn=M``, ``ncpus``, ``mem``, ``walltime``.  ``qstat``
there has no exit status and shows a held job as ``Q``, so when Slurm's ``scontrol`` is
available (``slurm_status``, default true) Slurm is asked for held-ness and exit codes, and
the status registry is kept current by Slurm's bulk query (one ``squeue``, one ``sacct``);
without Slurm, by one ``qstat -f`` for all jobs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gahp_core import private_dir
from gahp_lrms.base import CancelMark, CommandDriver, Features, Submission, command_failure
from gahp_lrms.config import FLAVORS, PbsConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.script import directive_line, render_script
from gahp_lrms.slurm import (
    SlurmDriver,
    job_info_from_fields,
    parse_duration,
    slurm_job_name,
)

_Fields = TypeVar("_Fields")

__all__ = [
    "FLAVORS",
    "PbsDriver",
    "format_walltime",
    "info_from_pbspro",
    "jobs_by_native_id",
    "parse_qstat_full",
    "parse_qstat_full_all",
    "parse_qstat_json",
    "qsub_options",
    "unknown_ids",
]

_SAFE_WORD = re.compile(r"[A-Za-z0-9_.@-]+\Z")
_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+\Z")
_UNKNOWN_JOB_RC = 153  # PBSE_UNKJOBID (15001) & 0xff
_FINISHED_RC = 35  # PBSE_HISTJOBID (15139) & 0xff: "Job has finished"
_BAD_STATE_RC = 168  # PBSE_BADSTATE (15016) & 0xff: "Request invalid for state of job"
_UNKNOWN_LINE = re.compile(
    r"qstat: (?:Unknown Job Id |illegally formed job identifier: )(\S+)\s*\Z"
)
_IDS_PER_QSTAT = 200  # ids per qstat command line (a few KiB)


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


def parse_qstat_json(text: str) -> dict[str, dict[str, Any]]:
    """The jobs of PBS Professional's ``qstat -f -F json`` output, by id (none when the
    output has no ``Jobs``, as when every id asked for is unknown)."""
    try:
        data = json.loads(text, strict=False)  # control characters may appear in values
    except ValueError as exc:
        raise DriverError(f"unreadable qstat -F json output: {exc}") from exc
    jobs = data.get("Jobs", {}) if isinstance(data, dict) else None
    if not isinstance(jobs, dict):
        raise DriverError("unreadable qstat -F json output: Jobs is not an object")
    return {str(k): v for k, v in jobs.items() if isinstance(v, dict)}


def jobs_by_native_id(jobs: Mapping[str, _Fields], native_ids: Iterable[str]) -> dict[str, _Fields]:
    """The entries of ``jobs`` (keyed by PBS's full ids, ``1234.server``) for ``native_ids``.

    A bare sequence number (``1234``, as in the job ids the C blahp hands out,
    ``pbs/<date>/1234``) stands for the one job of that number, whatever its server suffix:
    so the jobs the C blahp submitted are followed after a switch to this server."""
    out: dict[str, _Fields] = {}
    short: dict[str, list[_Fields]] | None = None
    for native_id in native_ids:
        fields = jobs.get(native_id)
        if fields is None and native_id.isdigit():
            if short is None:
                short = {}
                for key, value in jobs.items():
                    short.setdefault(key.partition(".")[0], []).append(value)
            matches = short.get(native_id, [])
            fields = matches[0] if len(matches) == 1 else None
        if fields is not None:
            out[native_id] = fields
    return out


def unknown_ids(stderr: str) -> set[str] | None:
    """The ids qstat's error output calls unknown (``qstat: Unknown Job Id 9.host``, or
    ``illegally formed job identifier``), or None when it says anything else too."""
    ids: set[str] = set()
    for line in stderr.splitlines():
        m = _UNKNOWN_LINE.match(line.strip())
        if m is None and line.strip():
            return None
        if m is not None:
            ids.add(m.group(1))
    return ids


def format_walltime(seconds: int) -> str:
    """``HH:MM:SS`` for a PBS walltime."""
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"


def _refuse(what: str, attribute: str, flavour: str) -> DriverError:
    return DriverError(f"{what} ({attribute}) cannot be asked of {flavour}: it has no such request")


def _check_accelerators(spec: JobSpec, pbspro: bool) -> None:
    """Refuse what neither PBS flavour can ask for: GPU models and MICs, and (PBS Pro) GPU
    modes."""
    flavour = "PBS Pro/OpenPBS" if pbspro else "Torque"
    if spec.gpu_model is not None:
        raise _refuse(f"GPU model {spec.gpu_model!r}", "GPUModel", flavour)
    if spec.gpu_mode is not None and pbspro:
        raise _refuse(f"GPU mode {spec.gpu_mode!r}", "GPUMode", flavour)
    if spec.mics:
        raise _refuse("MIC coprocessors", "MICNumber", flavour)


def _resources(spec: JobSpec, pbspro: bool) -> list[str]:
    _check_accelerators(spec, pbspro)
    per_node_count = -(-spec.count // (spec.nodes or 1))
    if pbspro:
        resources = _pbspro_resources(spec, per_node_count)
    else:
        resources = _torque_resources(spec, per_node_count)
    if spec.runtime_s:
        resources.append(f"walltime={format_walltime(spec.runtime_s)}")
    return resources


def _pbspro_resources(spec: JobSpec, per_node_count: int) -> list[str]:
    """One ``select`` of ``nodes`` chunks (memory belongs to the chunks: the job's total,
    shared out, as are the GPUs), and ``place`` for whole nodes."""
    nodes = int(spec.nodes or 1)
    chunk = f"select={nodes}:ncpus={int(max(spec.cpus_per_node or 1, per_node_count))}"
    if spec.memory_mb:
        chunk += f":mem={-(-int(spec.memory_mb) // nodes)}mb"
    if spec.gpus:
        if spec.gpus % nodes:
            raise DriverError(
                f"{spec.gpus} GPUs (GPUNumber) cannot be shared out evenly over {nodes} "
                "PBS chunks (nodes)"
            )
        chunk += f":ngpus={spec.gpus // nodes}"
    if not spec.whole_nodes:
        return [chunk]
    return [chunk, "place=scatter:excl" if nodes > 1 else "place=excl"]


def _torque_resources(spec: JobSpec, per_node_count: int) -> list[str]:
    """``nodes=N:ppn=P`` (with GPUs) when the job needs more than one slot or a whole node,
    ``ncpus`` and ``mem``."""
    resources = []
    if spec.nodes or spec.count > 1 or spec.gpus or spec.whole_nodes:
        resources.append(_torque_nodes(spec, per_node_count))
    if spec.cpus_per_node:
        resources.append(f"ncpus={int(spec.cpus_per_node)}")
    if spec.memory_mb:
        resources.append(f"mem={int(spec.memory_mb)}mb")
    return resources


def _torque_nodes(spec: JobSpec, per_node_count: int) -> str:
    entry = f"nodes={int(spec.nodes or 1)}:ppn={per_node_count}"
    if spec.gpus:
        entry += f":gpus={int(spec.gpus)}"
        if spec.gpu_mode:
            entry += f":{spec.gpu_mode}"
    return entry


def _pbs_job_name(name: str | None, pbspro: bool) -> str:
    """A job name that starts with a letter, at most 64 characters (15 for Torque)."""
    name = slurm_job_name(name)
    if not name[:1].isalpha():
        name = "j" + name
    return name[:64] if pbspro else name[:15]


def _queue_and_project(spec: JobSpec) -> list[str]:
    """``-q`` queue and ``-A`` project, each checked to be one safe word."""
    opts = []
    for flag, value, what in (("-q", spec.queue, "queue"), ("-A", spec.project, "project")):
        if value:
            if not _SAFE_WORD.match(value):
                raise DriverError(f"PBS {what} name {value!r} has unsupported characters")
            opts += [flag, value]
    return opts


def qsub_options(spec: JobSpec, *, flavor: str = "torque") -> list[str]:
    """qsub options for ``spec`` (``flavor``: ``pbspro`` or ``torque``); every value is
    checked to be shell-safe."""
    pbspro = flavor == "pbspro"
    opts = ["-N", _pbs_job_name(spec.name, pbspro), "-o", "/dev/null", "-e", "/dev/null"]
    if pbspro:
        opts.insert(0, "-f")  # no lingering per-user qsub daemon
    opts += _queue_and_project(spec)
    for resource in _resources(spec, pbspro):
        opts += ["-l", resource]
    if spec.whole_nodes and not pbspro:  # Torque with Maui/Moab, as the C blahp asks
        opts += ["-W", "x=NACCESSPOLICY:SINGLEJOB"]
    if spec.start_held:
        opts.append("-h")
    return opts


def _exec_host(fields: Mapping[str, Any]) -> str | None:
    return str(fields.get("exec_host") or "").split("/")[0].split("+")[0] or None


def _finished_info(fields: Mapping[str, Any], host: str | None, used: float | None) -> JobInfo:
    status = fields.get("Exit_status")
    try:
        code = int(status) if status is not None else None
    except (TypeError, ValueError):
        code = None
    common: dict[str, Any] = {"worker_node": host, "wallclock_s": used}
    if code is None:
        comment = str(fields.get("comment") or "").strip()
        why = f"finished without an exit status ({comment})" if comment else None
        return JobInfo(
            JobStatus.COMPLETED, exit_reason=why or "finished (exit status unknown)", **common
        )
    if code >= 256:  # the job's top process was killed (a shell's child gives 128 + N)
        return JobInfo(
            JobStatus.COMPLETED,
            exit_signal=code - 256,
            exit_reason=f"killed by signal {code - 256}",
            **common,
        )
    if code < 0:
        return JobInfo(
            JobStatus.COMPLETED,
            exit_reason=f"PBS could not run the job, or ended it (Exit_status {code})",
            **common,
        )
    why = f"exited with status {code}" if code else None
    return JobInfo(JobStatus.COMPLETED, exit_code=code, exit_reason=why, **common)


def info_from_pbspro(fields: Mapping[str, Any], *, cancelled: bool = False) -> JobInfo:
    """A :class:`JobInfo` from one job of PBS Professional's ``qstat -x -f -F json``.

    ``cancelled``: the driver deleted it, so it is REMOVED whatever its state (PBS may take
    a few seconds to kill it)."""
    state = str(fields.get("job_state", ""))
    host = _exec_host(fields)
    used_field = fields.get("resources_used")
    used = parse_duration(
        str(used_field.get("walltime")) if isinstance(used_field, Mapping) else None
    )
    if cancelled:
        return JobInfo(
            JobStatus.REMOVED, exit_reason="cancelled", worker_node=host, wallclock_s=used
        )
    if state in ("Q", "W", "T", "M"):
        return JobInfo(JobStatus.IDLE)
    if state == "H":
        return JobInfo(
            JobStatus.HELD, hold_reason=f"held (Hold_Types {fields.get('Hold_Types', 'u')})"
        )
    if state in ("R", "E", "B"):
        return JobInfo(JobStatus.RUNNING, worker_node=host, wallclock_s=used)
    if state in ("S", "U"):
        return JobInfo(JobStatus.HELD, worker_node=host, wallclock_s=used, hold_reason="suspended")
    if state in ("F", "X"):
        return _finished_info(fields, host, used)
    raise DriverError(f"unexpected PBS job state {state!r}")


def info_from_qstat(fields: Mapping[str, str]) -> JobInfo:
    """A :class:`JobInfo` from Torque-style ``qstat -f`` alone (it has no exit status)."""
    state = fields.get("job_state", "")
    host = _exec_host(fields)
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
    """Jobs through PBS commands.  Config keys: those of :class:`CommandDriver`, ``flavor``
    (``auto``, ``pbspro`` or ``torque``), and for Torque-style wrappers of Slurm
    ``slurm_conf`` (exported as SLURM_CONF) and ``slurm_status`` (default true: ask Slurm
    for exit codes)."""

    name = "pbs"
    system = "PBS"
    features = Features(bulk_status=True)
    config_class = PbsConfig
    settings: PbsConfig

    def _setup(self) -> None:
        flavor = self.settings.flavor
        self._flavor: str | None = None if flavor == "auto" else flavor
        self._history: bool | None = None
        self._tmp_scripts: Path | None = None  # made by _script_dir when state_dir will not do
        self._slurm: SlurmDriver | None = None
        if (
            flavor != "pbspro"
            and self.settings.slurm_status
            and shutil.which("scontrol", path=self.bin_dir or self.env.get("PATH"))
        ):
            slurm_config = {
                k: self.config[k]
                for k in ("bin_dir", "command_timeout", "slurm_conf")
                if k in self.config
            }
            self._slurm = SlurmDriver(slurm_config, self.state_dir)

    # ------------------------------------------------------------------ what PBS this is
    def flavor(self) -> str:
        """``pbspro`` or ``torque``: the configured one, else asked of ``qstat --version``
        once."""
        if self._flavor is None:
            proc = self._run("qstat", "--version", check=False, timeout=min(self.timeout, 15.0))
            found = "pbspro" if "pbs_version" in proc.stdout + proc.stderr else "torque"
            with self._lock:
                self._flavor = found
        return self._flavor

    @property
    def slurm(self) -> SlurmDriver | None:
        """Slurm, behind Torque-style wrapper commands (None for any other PBS)."""
        if self._slurm is None or self.flavor() != "torque":
            return None
        return self._slurm

    def history_enabled(self) -> bool:
        """Whether the PBS Professional server keeps finished jobs (``job_history_enable``);
        asked once."""
        if self._history is None:
            proc = self._run("qstat", "-B", "-f", "-F", "json")
            try:
                servers: dict[str, dict[str, Any]] = json.loads(proc.stdout, strict=False)["Server"]
                value = next(iter(servers.values())).get("job_history_enable", False)
            except (ValueError, AttributeError, KeyError, TypeError, StopIteration) as exc:
                raise DriverError(f"unreadable qstat -B -F json output: {exc}") from exc
            with self._lock:
                self._history = str(value).lower() in ("true", "1")
        return self._history

    def _script_dir(self) -> Path:
        """A private directory with a shell-safe path for job scripts: ``state_dir/pbs``,
        else (a path with ``@``, say) one made for this driver by ``mkdtemp``, never a
        shared one."""
        try:
            base = self.state_dir / "pbs"
            if _SAFE_PATH.match(str(base.resolve())):
                return private_dir(base).resolve()
            with self._lock:
                if self._tmp_scripts is None:
                    tmp = Path(tempfile.mkdtemp(prefix="gahp-pbs-")).resolve()
                    if not _SAFE_PATH.match(str(tmp)):
                        os.rmdir(tmp)
                        raise DriverError(
                            f"no shell-safe directory for PBS scripts (state_dir {self.state_dir})"
                        )
                    self._tmp_scripts = tmp
                return private_dir(self._tmp_scripts)
        except OSError as exc:
            raise DriverError(f"no usable directory for PBS scripts: {exc}") from exc

    async def aclose(self) -> None:
        await super().aclose()
        if self._tmp_scripts is not None:
            with contextlib.suppress(OSError):
                self._tmp_scripts.rmdir()  # empty: each script is removed once submitted

    # ------------------------------------------------------------------ submit (see CommandDriver)
    job_id = re.compile(r"[A-Za-z0-9_\[][A-Za-z0-9_.\[\]-]*\Z")  # never an option
    submit_command = "qsub"

    def _submission(self, spec: JobSpec) -> Submission:
        opts = qsub_options(spec, flavor=self.flavor())
        directory = self._script_dir()
        fd, path = tempfile.mkstemp(prefix="job-", suffix=".sh", dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(
                    render_script(
                        spec,
                        # Slurm's qsub wrapper reads "#PBS" lines anywhere in the script
                        one_line_values=True,
                        directives=[*spec.directives, *directive_line("#PBS", spec.extra_args)],
                    )
                )
            os.chmod(path, 0o700)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        # From the script's directory: qsub records its working directory in the job.
        return Submission([*opts, path], cwd=directory, remove=path)

    def _printed_id(self, stdout: str) -> str:
        lines = stdout.strip().splitlines()
        return lines[-1].strip() if lines else ""

    # ------------------------------------------------------------------ status
    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        if self.flavor() == "pbspro":
            return self._pbspro_bulk(native_ids)
        return self._torque_bulk(native_ids)

    def _pbspro_bulk(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One ``qstat -f -F json`` for every job PBS has queued or running (qstat asks the
        server once per id given, so ids are not given), then ``qstat -x -f -F json`` for
        the tracked jobs that left it: those finished since (each once, then final)."""
        proc = self._run("qstat", "-f", "-F", "json")
        live = jobs_by_native_id(
            parse_qstat_json(proc.stdout) if proc.stdout.strip() else {}, native_ids
        )
        found = {
            native_id: info_from_pbspro(fields, cancelled=self._cancelled(native_id))
            for native_id, fields in live.items()
        }
        gone = [native_id for native_id in native_ids if native_id not in live]
        for start in range(0, len(gone), _IDS_PER_QSTAT):
            found.update(self._pbspro_status(gone[start : start + _IDS_PER_QSTAT]))
        return found

    def query_status(self, native_id: str) -> JobInfo:
        self._check_id(native_id)
        if self.flavor() == "pbspro":
            found = self._pbspro_status([native_id])
            if native_id not in found:
                raise DriverError(f"qstat did not describe PBS job {native_id}")
            return found[native_id]
        return self._torque_query(native_id)

    def _pbspro_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One ``qstat -x -f -F json`` for ``native_ids``: every one of them described."""
        proc = self._run("qstat", "-x", "-f", "-F", "json", *native_ids, check=False)
        unknown = unknown_ids(proc.stderr)
        if unknown is None or (proc.returncode != 0 and not unknown):
            raise DriverError(command_failure(["qstat"], proc))
        jobs = parse_qstat_json(proc.stdout) if proc.stdout.strip() else {}
        described = jobs_by_native_id(jobs, native_ids)
        found: dict[str, JobInfo] = {}
        for native_id in native_ids:
            fields = described.get(native_id)
            if fields is not None:
                found[native_id] = info_from_pbspro(fields, cancelled=self._cancelled(native_id))
            elif native_id in unknown or not jobs:
                found[native_id] = self._unknown(native_id)
        return found

    def _unknown(self, native_id: str) -> JobInfo:
        if self._cancelled(native_id):
            return JobInfo(JobStatus.REMOVED, exit_reason="cancelled")
        if self.history_enabled():
            return JobInfo(
                JobStatus.REMOVED,
                exit_reason="job unknown to PBS (never submitted, or its history has expired)",
            )
        return JobInfo(
            JobStatus.COMPLETED,
            exit_reason="job no longer known to PBS (job history is off: exit status unknown)",
        )

    def _torque_bulk(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        found: dict[str, JobInfo] = {}
        slurm = self.slurm
        if slurm is not None:
            by_slurm = {i.split(".")[0]: i for i in native_ids if i.split(".")[0].isdigit()}
            for slurm_id, fields in slurm.bulk_fields(list(by_slurm)).items():
                with contextlib.suppress(DriverError):  # else asked alone
                    found[by_slurm[slurm_id]] = job_info_from_fields(fields)
            return found
        proc = self._run("qstat", "-f", check=False)
        if proc.returncode != 0 and (proc.returncode != _UNKNOWN_JOB_RC or proc.stderr.strip()):
            raise DriverError(command_failure(["qstat"], proc))
        jobs = jobs_by_native_id(parse_qstat_full_all(proc.stdout), native_ids)
        for native_id, qstat_fields in jobs.items():
            with contextlib.suppress(DriverError):
                found[native_id] = info_from_qstat(qstat_fields)
        return found

    def _torque_query(self, native_id: str) -> JobInfo:
        proc = self._run("qstat", "-f", native_id, check=False)
        slurm = self.slurm
        info: JobInfo | None = None
        if proc.returncode == 0 and proc.stdout.strip():
            info = info_from_qstat(parse_qstat_full(proc.stdout))
            if slurm is None or info.status is JobStatus.RUNNING:
                return info
        elif proc.returncode != _UNKNOWN_JOB_RC and "nknown" not in proc.stderr:
            raise DriverError(command_failure(["qstat"], proc))
        if slurm is not None:
            # Held-ness of a queued job and exit codes are only known to Slurm.
            slurm_id = native_id.split(".")[0]
            _source, fields = slurm.lookup(slurm_id) if slurm_id.isdigit() else ("", None)
            if fields is not None:
                return job_info_from_fields(fields)
        if info is not None:
            return info
        return JobInfo(
            JobStatus.COMPLETED, exit_reason="job no longer known to PBS (exit status unknown)"
        )

    # ------------------------------------------------------------------ cancel (see CommandDriver)
    cancel_command = ("qdel",)

    # PBS Professional: the job is marked as cancelled before qdel (REMOVED from then on;
    # PBS kills it within the queue's kill_delay, nothing waits for that).  Torque-style
    # commands: a qdel that fails is no error once the job is over; a running job is
    # waited for.
    def _cancel_mark(self) -> CancelMark:
        return CancelMark.DROPPED_ON_FAILURE if self.flavor() == "pbspro" else CancelMark.NONE

    def _cancel_needless(self, native_id: str) -> bool:
        # finished, unknown, or cancelled already: nothing to do
        return self.flavor() == "pbspro" and self.query_status(native_id).finished

    def _cancel_tolerated(self, native_id: str, proc: subprocess.CompletedProcess[str]) -> bool:
        if self.flavor() != "pbspro":
            return self.query_status(native_id).finished
        # It ended meanwhile, or its program ended and PBS is finishing it (state E, which
        # qdel refuses): not cancelled.
        return proc.returncode in (_FINISHED_RC, _UNKNOWN_JOB_RC) or (
            proc.returncode == _BAD_STATE_RC and self._exiting(native_id)
        )

    def _not_ended(self, native_id: str) -> bool:
        return self.flavor() != "pbspro" and super()._not_ended(native_id)

    def _exiting(self, native_id: str) -> bool:
        """PBS lists the job as exiting (E) or finished: qdel refuses an exiting job."""
        proc = self._run("qstat", "-x", "-f", "-F", "json", native_id, check=False)
        jobs = parse_qstat_json(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}
        fields = jobs_by_native_id(jobs, [native_id]).get(native_id)
        return fields is not None and str(fields.get("job_state", "")) in ("E", "F", "X")

    # ------------------------------------------------------------------ hold, resume, ping
    def hold(self, native_id: str) -> None:
        self._hold_with(native_id, ("qhold",), None, " (PBS cannot suspend it)")

    def resume(self, native_id: str) -> None:
        info = self.query_status(native_id)
        if info.status is not JobStatus.HELD or info.hold_reason == "suspended":
            what = info.hold_reason if info.status is JobStatus.HELD else info.status.name
            raise DriverError(f"PBS job {native_id} is not held: it is {what}")
        self._run("qrls", native_id)

    def ping(self) -> None:
        proc = self._run("qstat", timeout=min(self.timeout, 15.0), check=False)
        # The Slurm wrapper's qstat exits with PBSE_UNKJOBID, silently, when no job is listed.
        if proc.returncode == 0 or (proc.returncode == _UNKNOWN_JOB_RC and not proc.stderr.strip()):
            return
        raise DriverError(command_failure(["qstat"], proc))
