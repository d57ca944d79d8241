"""The ``sge`` driver: (Son of) Grid Engine through qsub, qstat -xml, qacct, qdel, qhold/qrls, qmod.

* Commands: ``bin_dir`` when configured, else ``$SGE_ROOT/bin/<arch>`` (``sge_root`` or
  ``$SGE_ROOT``): never whatever ``qsub`` comes first in PATH, which may be another batch
  system's (Debian's slurm-wlm-torque ships ``/usr/bin/qsub``).
* Submission: ``qsub -terse -C '' -V -S /bin/sh [options]`` with the script (see
  :mod:`gahp_lrms.script`) on its standard input.  ``-C ''`` turns off ``#$`` directives, so
  a user string that makes a script line start with ``#$`` is not read as a qsub option.
  A job with site directives (``JobSpec.directives``, e.g. from blahpd's local submit
  attributes script) gets ``-C #gahp<random>`` instead, its ``#$`` lines rewritten to that
  prefix: see :func:`sge_script`.
  User strings reach qsub only as separate ``argv`` items (``-q``, ``-P``, ``-wd``) or
  shell-quoted inside the script (arguments, environment, working directory, stream paths:
  the script redirects the streams, SGE's own ``-o``/``-e`` are ``/dev/null``, because SGE
  expands ``$JOB_ID``-style pseudo variables in those paths and in ``-wd``; a working
  directory containing ``$`` is therefore not given to ``-wd`` at all, the script's ``cd``
  does the work).  The job inherits the submitting process's environment (``-V``).
  ``nodes``/``cpus_per_node``/``count`` need more than one slot: ``-pe <parallel_environment>
  N``; without a configured parallel environment a multi-slot request is refused, except
  that ``count`` instances alone run in one slot.  ``memory_mb`` is the job's total:
  ``h_vmem`` (a per-slot limit in SGE) gets its share per slot.
* Status: from the status registry (see :mod:`gahp_lrms.registry`), kept current by one
  ``qstat -xml -u '*'`` per ``status_interval`` for all tracked jobs, and ``qacct`` for each
  job that left qstat (until its record is found: then its state is final).  One job alone:
  ``qstat -xml -u '*'`` while the job is queued or runs (``Eqw`` adds the error
  reason from ``qstat -j``), then ``qacct -j``.  The accounting record of a finished job may
  lag behind its disappearance from qstat (qmaster writes it every accounting_flush_time,
  15 s by default): for a job this driver submitted (a record in ``state_dir/submitted``)
  the state qstat showed last (else RUNNING) is reported until the record appears, for at
  most ``accounting_wait_s``.  A job known to neither is COMPLETED with an unknown exit
  code.
* Removed or completed: qacct cannot tell a ``qdel`` from a SIGKILL (both are ``failed 100 :
  assumedly after job``, ``exit_status 137``), and a job deleted while pending has no record
  at all.  So ``cancel`` records the job in ``state_dir/cancelled`` before ``qdel``, and a job
  with that record is REMOVED once it leaves qstat (or while it is being deleted, state
  ``d``).  A job ``qdel``-ed behind the driver's back shows COMPLETED, killed by signal 9.
* Hold: a pending job gets ``qhold`` (``hqw``, HELD).  A running job is suspended with ``qmod
  -sj`` (HELD, hold reason "suspended"; needs manager/operator rights, or refused with a
  DriverError when ``suspend_running`` is false).  ``resume`` uses ``qmod -usj`` for a
  suspended job, ``qrls`` for a held one and ``qmod -cj`` (clear the error) for ``Eqw``.
"""

from __future__ import annotations

import math
import re
import secrets
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gahp_lrms.base import (
    CancelMark,
    CommandDriver,
    Features,
    Submission,
    WorkdirRule,
    command_failure,
    run_command,
)
from gahp_lrms.config import SgeConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus, job_slots
from gahp_lrms.script import directive_line, render_script, safe_job_name

__all__ = [
    "SgeDriver",
    "info_from_qacct",
    "info_from_qstat",
    "parse_qacct",
    "parse_qstat_error_reason",
    "parse_qstat_xml",
    "parse_seconds",
    "qsub_options",
    "sge_job_name",
    "sge_script",
]

_SUBMITTED = re.compile(r"\s*(\d+)(?:\.\S*)?\s*\Z")  # "123" or "123.1-4:1" (-terse)


# ---------------------------------------------------------------------- pure parsing
def parse_qstat_xml(text: str) -> dict[str, dict[str, str]]:
    """Jobs in ``qstat -xml`` output, by job number: every child element of a ``job_list``
    (``state``, ``queue_name``, ``slots``, ``JAT_start_time``, ...) as text, plus
    ``list_state`` (its ``state`` attribute: ``running`` or ``pending``).  Array tasks of
    one job are merged (the first one wins)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DriverError(f"unreadable qstat -xml output: {exc}") from exc
    jobs: dict[str, dict[str, str]] = {}
    for node in root.iter("job_list"):
        fields = {child.tag: (child.text or "").strip() for child in node}
        fields["list_state"] = node.get("state", "")
        number = fields.get("JB_job_number", "")
        if number and number not in jobs:
            jobs[number] = fields
    return jobs


def parse_qacct(text: str, job_id: str) -> dict[str, str] | None:
    """The last ``qacct -j`` record (``key value`` lines between ``====`` rules) whose
    ``jobnumber`` is ``job_id``, or None."""
    found = None
    record: dict[str, str] = {}
    for line in [*text.splitlines(), "===="]:
        if line.startswith("===="):
            if record.get("jobnumber") == job_id:
                found = record
            record = {}
            continue
        key, _, value = line.strip().partition(" ")
        if key:
            record[key] = value.strip()
    return found


def parse_qstat_error_reason(text: str) -> str | None:
    """The first ``error reason`` of ``qstat -j ID`` (plain text) output, without its task
    number and time stamp, or None."""
    for line in text.splitlines():
        if line.startswith("error reason"):
            reason = line.partition(":")[2].strip()
            # "11/22/2026 12:54:53 [0:16142]: error: can't chdir to /x: No such file"
            m = re.match(r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d \[[^\]]*\]:\s*(.*)", reason)
            return (m.group(1) if m else reason) or None
    return None


def parse_seconds(text: str | None) -> float | None:
    """Seconds in a qacct duration: ``12``, ``0.003s``, ``1:02:03`` or ``2:1:02:03``."""
    if not text:
        return None
    text = text.strip().removesuffix("s")
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        return None
    if len(parts) > 4:
        return None
    seconds = 0.0
    for part, unit in zip(reversed(parts), (1, 60, 3600, 86400), strict=False):
        seconds += part * unit
    return seconds


def _host(queue_name: str | None) -> str | None:
    """``all.q@host`` -> ``host``."""
    if not queue_name or "@" not in queue_name:
        return None
    return queue_name.partition("@")[2] or None


def _elapsed(start: str | None, now: float | None = None) -> float | None:
    if not start:
        return None
    try:
        started = datetime.fromisoformat(start).timestamp()  # local time, as qstat prints it
    except ValueError:
        return None
    return max(0.0, (time.time() if now is None else now) - started)


_QSTAT_STATES: tuple[tuple[str, JobStatus, str | None, bool], ...] = (
    ("s", JobStatus.HELD, "suspended", True),
    ("S", JobStatus.HELD, "suspended (queue suspended)", True),
    ("T", JobStatus.HELD, "suspended (load threshold)", True),
    ("rt", JobStatus.RUNNING, None, True),
    ("h", JobStatus.HELD, "held (qhold)", False),
    ("qw", JobStatus.IDLE, None, False),
)
"""qstat's state letters, first match wins: (any of these letters, status, hold reason,
whether the job has a node and a run time)."""


def info_from_qstat(
    fields: Mapping[str, str],
    *,
    cancelled: bool = False,
    error_reason: str | None = None,
    now: float | None = None,
) -> JobInfo:
    """A :class:`JobInfo` from one job of :func:`parse_qstat_xml`.

    ``E`` (error) -> HELD with ``error_reason``; ``d`` (being deleted) -> REMOVED when the
    driver cancelled it; ``s``/``S``/``T`` (suspended by the job, its queue, a threshold) ->
    HELD "suspended"; ``r``/``t`` -> RUNNING; ``h`` -> HELD; ``qw`` -> IDLE."""
    state = fields.get("state", "")
    placed: dict[str, Any] = {
        "worker_node": _host(fields.get("queue_name")),
        "wallclock_s": _elapsed(fields.get("JAT_start_time"), now),
    }
    if "E" in state:
        return JobInfo(JobStatus.HELD, hold_reason=_error_reason(error_reason))
    if "d" in state and cancelled:
        return JobInfo(JobStatus.REMOVED, exit_reason="cancelled", **placed)
    for letters, status, why, has_node in _QSTAT_STATES:
        if any(letter in state for letter in letters):
            return JobInfo(status, hold_reason=why, **(placed if has_node else {}))
    raise DriverError(f"unexpected Grid Engine job state {state!r}")


def _error_reason(error_reason: str | None) -> str:
    """The hold reason of a job in error state: ``error: <reason>``."""
    reason = error_reason or "job in error state (Eqw)"
    return reason if reason.lower().startswith("error") else f"error: {reason}"


def _qacct_usage(record: Mapping[str, str]) -> dict[str, Any]:
    """The node and the run and CPU times of a :func:`parse_qacct` record."""
    node = record.get("hostname") or None
    return {
        "worker_node": None if node in (None, "NONE", "-/-") else node,
        "wallclock_s": parse_seconds(record.get("ru_wallclock")),
        "user_cpu_s": parse_seconds(record.get("ru_utime")),
        "sys_cpu_s": parse_seconds(record.get("ru_stime")),
    }


def _failed_code(text: str) -> int:
    """The code of ``failed`` (the text before its ``:``): 0 when empty, -1 when not a
    number."""
    try:
        return int(text.strip() or 0)
    except ValueError:
        return -1


def _exit_status(text: str) -> int | None:
    """The number ``exit_status`` starts with (``137 (Killed)``), or None."""
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def info_from_qacct(record: Mapping[str, str], *, cancelled: bool = False) -> JobInfo:
    """A :class:`JobInfo` from a :func:`parse_qacct` record.

    ``failed 0``: the job's own exit status.  ``failed 100`` (assumedly after job) with an
    ``exit_status`` above 128: killed by signal ``exit_status - 128``.  Any other ``failed``
    code means Grid Engine could not run the job (exit code unknown, the reason says why)."""
    common = _qacct_usage(record)
    if cancelled:
        return JobInfo(JobStatus.REMOVED, exit_reason="cancelled", **common)
    failed_text = record.get("failed", "0")
    failed_code, _, failed_why = failed_text.partition(":")
    failed = _failed_code(failed_code)
    status = _exit_status(record.get("exit_status", ""))
    if failed == 100 and status is not None and status > 128:
        signal = status - 128
        return JobInfo(
            JobStatus.COMPLETED,
            exit_signal=signal,
            exit_reason=f"killed by signal {signal}",
            **common,
        )
    if failed in (0, 100):
        why = f"exited with status {status}" if status else None
        return JobInfo(JobStatus.COMPLETED, exit_code=status, exit_reason=why, **common)
    why = failed_why.strip() or f"code {failed_text}"
    return JobInfo(
        JobStatus.COMPLETED, exit_reason=f"Grid Engine could not run the job: {why}", **common
    )


def sge_job_name(name: str | None, default: str = "gahp") -> str:
    """A valid Grid Engine object name: ``[A-Za-z0-9_.+-]``, not starting with a digit, at
    most 64 characters."""
    clean = safe_job_name(name, 64, "")
    return (("j" + clean) if clean[:1].isdigit() else clean)[:64] or default


def sge_script(spec: JobSpec) -> tuple[str, str]:
    """The batch script for ``spec`` and the directive prefix for ``qsub -C``.

    Without site directives the prefix is ``''``: directives off, so no user string can
    become one.  With them, each ``#$`` line of ``spec.directives`` is rewritten to a prefix
    made for this submission (``#gahp`` and 16 random hex digits), and the script is checked
    to have no other line starting with it: user strings were written before the prefix
    existed, so only the site's lines are read as qsub options.
    """
    site = [*spec.directives, *directive_line("#$", spec.extra_args)]
    if not site:
        return render_script(spec), ""
    for _ in range(8):
        prefix = "#gahp" + secrets.token_hex(8)
        lines = [prefix + d[2:] if d.startswith("#$") else d for d in site]
        script = render_script(spec, directives=lines)
        expected = sum(line.startswith(prefix) for line in lines)
        if sum(line.startswith(prefix) for line in script.split("\n")) == expected:
            return script, prefix
    raise DriverError("cannot choose a directive prefix for qsub -C")  # pragma: no cover


def _check_unsupported(spec: JobSpec) -> None:
    """Refuse what Grid Engine has no standard request for."""
    refused = [
        (
            spec.whole_nodes,
            "whole nodes (WholeNodes): Grid Engine has no standard exclusive-host"
            " request (a site that defines one can ask for it in BatchExtraSubmitArgs)",
        ),
        (
            spec.gpu_model is not None,
            f"GPU model {spec.gpu_model!r} (GPUModel): Grid Engine has"
            " no standard GPU model request",
        ),
        (
            spec.gpu_mode is not None,
            f"GPU mode {spec.gpu_mode!r} (GPUMode): Grid Engine has no standard GPU mode request",
        ),
        (bool(spec.mics), "MIC coprocessors (MICNumber): Grid Engine has no standard request"),
    ]
    for bad, why in refused:
        if bad:
            raise DriverError(f"cannot ask for {why}")


def qsub_options(
    spec: JobSpec,
    *,
    parallel_environment: str | None = None,
    workdir: str | None = None,
    directive_prefix: str = "",
) -> list[str]:
    """qsub options for ``spec`` (a list of argv items, never shell text); ``directive_prefix``
    is ``-C``'s (``''``: directives off; see :func:`sge_script`)."""
    opts = ["-terse", "-C", directive_prefix, "-V", "-S", "/bin/sh", "-N", sge_job_name(spec.name)]
    opts += ["-o", "/dev/null", "-e", "/dev/null", "-j", "n", "-r", "n"]
    opts += ["-wd", _workdir(workdir if workdir is not None else spec.workdir)]
    for flag, value in (("-q", spec.queue), ("-P", spec.project)):
        if value:
            opts += [flag, value]
    pe, slots = _parallel(spec, parallel_environment)
    opts += pe
    _check_unsupported(spec)
    resources = _resources(spec, slots)
    if resources:
        opts += ["-l", ",".join(resources)]
    if spec.start_held:
        opts.append("-h")
    return opts


def _workdir(workdir: str | None) -> str:
    """``-wd``'s directory: ``workdir``, or ``/`` (the script changes to the job's) when
    there is none or it has a ``$`` (-wd expands $JOB_ID & co.)."""
    return workdir if workdir is not None and "$" not in workdir else "/"


def _parallel(spec: JobSpec, parallel_environment: str | None) -> tuple[list[str], int]:
    """The ``-pe`` option and the slots the job gets: one unless a parallel environment
    is configured; a job of several slots without one is refused."""
    slots = job_slots(spec)
    if parallel_environment and slots > 1:
        return ["-pe", parallel_environment, str(slots)], slots
    reserve = max((spec.nodes or 1) * (spec.cpus_per_node or 1), 1)
    if reserve > 1:
        raise DriverError(
            f"the job asks for {reserve} slots: Grid Engine needs a parallel environment"
            " for that (set the sge driver's parallel_environment option)"
        )
    return [], 1


def _resources(spec: JobSpec, slots: int) -> list[str]:
    """The ``-l`` requests: GPUs, run time and memory per slot."""
    resources = []
    if spec.gpus:  # the complex the C blahp asks for; a site without it gets qsub's error
        resources.append(f"gpu={int(spec.gpus)}")
    if spec.runtime_s:
        resources.append(f"h_rt={int(spec.runtime_s)}")
    if spec.memory_mb:
        resources.append(f"h_vmem={math.ceil(spec.memory_mb / slots)}M")
    return resources


# ---------------------------------------------------------------------- driver
class SgeDriver(CommandDriver):
    """Jobs in (Son of) Grid Engine.  Config keys: ``sge_root`` and ``sge_cell`` (exported as
    SGE_ROOT/SGE_CELL; default: the environment's), ``sge_qmaster_port`` (SGE_QMASTER_PORT),
    ``bin_dir`` (where qsub & co. are; default ``$SGE_ROOT/bin/<arch>``),
    ``parallel_environment`` (for jobs of several slots), ``command_timeout`` (s, default 30),
    ``submit_timeout`` (s, default 60), ``suspend_running`` (default true),
    ``cancel_wait_s`` (default 10), ``accounting_wait_s`` (default 60)."""

    name = "sge"
    system = "Grid Engine"
    features = Features(bulk_status=True)
    config_class = SgeConfig
    settings: SgeConfig

    def _setup(self) -> None:
        cfg = self.settings
        self.accounting_wait_s = cfg.accounting_wait_s
        self.suspend_running = cfg.suspend_running
        self.parallel_environment = cfg.parallel_environment
        self.bin_dir = self._find_bin_dir()
        self._last: dict[str, JobInfo] = {}  # what qstat showed last, by job
        self._missing: dict[str, float] = {}  # when a job was first missing from qstat

    # ------------------------------------------------------------------ helpers
    def _find_bin_dir(self) -> Path:
        if self.settings.bin_dir:
            return self.settings.bin_dir
        root = self.env.get("SGE_ROOT")
        if not root:
            raise DriverError(
                "sge driver: cannot find Grid Engine: set the sge_root (or bin_dir) option"
                " or $SGE_ROOT"
            )
        bins = Path(root) / "bin"
        arch = self.env.get("SGE_ARCH")
        if arch:
            return bins / arch
        found = sorted(p.parent for p in bins.glob("*/qsub"))
        if len(found) == 1:
            return found[0]
        arch_script = Path(root) / "util" / "arch"
        if arch_script.exists():
            proc = run_command(["/bin/sh", str(arch_script)], timeout=self.timeout, env=self.env)
            return bins / proc.stdout.strip()
        raise DriverError(f"sge driver: no Grid Engine commands under {bins} (set bin_dir)")

    def queued(self, native_id: str) -> dict[str, str] | None:
        """The job's ``qstat -xml`` fields while Grid Engine has it queued or running."""
        proc = self._run("qstat", "-xml", "-u", "*")
        return parse_qstat_xml(proc.stdout).get(native_id)

    def accounting(self, native_id: str) -> dict[str, str] | None:
        """The job's ``qacct -j`` record, or None when there is none (yet)."""
        proc = self._run("qacct", "-j", native_id, check=False)
        if proc.returncode == 0:
            return parse_qacct(proc.stdout, native_id)
        text = (proc.stderr + proc.stdout).lower()
        if any(s in text for s in ("not found", "no jobs running", "no such file")):
            return None
        raise DriverError(command_failure(["qacct"], proc))

    def _error_reason(self, native_id: str) -> str | None:
        proc = self._run("qstat", "-j", native_id, check=False)
        return parse_qstat_error_reason(proc.stdout) if proc.returncode == 0 else None

    def _finished(self, native_id: str) -> JobInfo:
        """Status of a job qstat no longer lists."""
        cancelled = self._cancelled(native_id)
        record = self.accounting(native_id)
        if record is None and not cancelled and self._mark("submitted", native_id).exists():
            # Ours, and its accounting record is not written yet: report what qstat showed
            # last, for a while.
            now = time.monotonic()
            with self._lock:
                first = self._missing.setdefault(native_id, now)
                last = self._last.get(native_id)
            if now - first < self.accounting_wait_s:
                return last if last is not None else JobInfo(JobStatus.RUNNING)
        if record is not None:
            info = info_from_qacct(record, cancelled=cancelled)
        elif cancelled:
            info = JobInfo(JobStatus.REMOVED, exit_reason="cancelled")
        else:
            return JobInfo(
                JobStatus.COMPLETED,
                exit_reason="job no longer known to Grid Engine (exit status unknown)",
            )
        with self._lock:
            self._final[native_id] = info
            self._last.pop(native_id, None)
            self._missing.pop(native_id, None)
        self._unrecord("submitted", native_id)  # qacct answers from now on
        return info

    # ------------------------------------------------------------------ submit (see CommandDriver)
    job_id = re.compile(r"[1-9]\d*\Z")
    submit_command = "qsub"
    workdir = WorkdirRule(normalise_absolute=True)

    def _submission(self, spec: JobSpec) -> Submission:
        script, prefix = sge_script(spec)  # the script always changes to spec.workdir
        options = qsub_options(
            spec, parallel_environment=self.parallel_environment, directive_prefix=prefix
        )
        return Submission(options, input=script)

    def _printed_id(self, stdout: str) -> str | None:
        m = _SUBMITTED.match(stdout)
        return m.group(1) if m else None

    def _new_job(self, native_id: str) -> None:
        # Grid Engine hands out job numbers again (they restart after a qmaster restart).
        super()._new_job(native_id)
        with self._lock:
            self._last.pop(native_id, None)
            self._missing.pop(native_id, None)
        self._record("submitted", native_id, required=False)  # the job exists: never fail

    # ------------------------------------------------------------------ status
    def query_status(self, native_id: str) -> JobInfo:
        self._check_id(native_id)
        with self._lock:
            final = self._final.get(native_id)
        if final is not None:
            return final
        fields = self.queued(native_id)
        if fields is None:
            return self._finished(native_id)
        return self._from_qstat(native_id, fields)

    def _from_qstat(self, native_id: str, fields: Mapping[str, str]) -> JobInfo:
        reason = self._error_reason(native_id) if "E" in fields.get("state", "") else None
        info = info_from_qstat(fields, error_reason=reason, cancelled=self._cancelled(native_id))
        with self._lock:
            self._last[native_id] = info
            self._missing.pop(native_id, None)
        return info

    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One ``qstat -xml`` for all jobs; ``qacct`` only for those that left it (once
        each: a finished job's state is final)."""
        proc = self._run("qstat", "-xml", "-u", "*")
        queued = parse_qstat_xml(proc.stdout)
        found: dict[str, JobInfo] = {}
        for native_id in native_ids:
            fields = queued.get(native_id)
            try:
                if fields is None:
                    found[native_id] = self._finished(native_id)
                elif "E" not in fields.get("state", ""):  # Eqw needs qstat -j: asked alone
                    found[native_id] = self._from_qstat(native_id, fields)
            except DriverError as exc:
                self.log.warning("Grid Engine job %s: %s", native_id, exc)
        return found

    # ------------------------------------------------------------------ cancel (see CommandDriver)
    cancel_command = ("qdel",)
    cancel_unknown = re.compile("does not exist|not found|invalid queue or job", re.I)
    cancel_mark = CancelMark.KEPT_ON_FAILURE  # qacct cannot tell a qdel from a SIGKILL

    def _cancel_needless(self, native_id: str) -> bool:
        return self.queued(native_id) is None  # finished, or unknown: nothing to do

    def _not_ended(self, native_id: str) -> bool:
        return self.queued(native_id) is not None  # killed asynchronously: until it leaves

    # ------------------------------------------------------------------ hold, resume, ping
    def hold(self, native_id: str) -> None:
        suspend = ("qmod", "-sj") if self.suspend_running else None
        self._hold_with(native_id, ("qhold",), suspend, " (suspend_running is disabled)")

    def resume(self, native_id: str) -> None:
        self._check_id(native_id)
        fields = self.queued(native_id)
        state = (fields or {}).get("state", "")
        info = info_from_qstat(fields) if fields else None
        if info is None or info.status is not JobStatus.HELD:
            what = info.status.name if info else "not queued"
            raise DriverError(f"Grid Engine job {native_id} is not held: it is {what}")
        if "E" in state:  # qmod -cj exits with status 1 even when it cleared the error
            proc = self._run("qmod", "-cj", native_id, check=False)
            text = (proc.stdout + proc.stderr).lower()
            if "cleared error state" not in text and "not in error state" not in text:
                raise DriverError(command_failure(["qmod"], proc))
        if "s" in state:
            self._run("qmod", "-usj", native_id)
        if "h" in state:
            self._run("qrls", native_id)
        if not any(c in state for c in "Esh"):
            raise DriverError(
                f"Grid Engine job {native_id} is suspended by its queue ({state}):"
                " only the queue's administrator can resume it"
            )

    def ping(self) -> None:
        self._run("qstat", "-g", "c", timeout=min(self.timeout, 15.0))
