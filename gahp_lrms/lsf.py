"""The ``lsf`` driver: IBM Spectrum LSF, OpenLava and volclava through bsub, bjobs, bhist,
bkill, bstop and bresume.

* Commands: ``bin_dir`` when configured, else ``LSF_BINDIR`` from ``$LSF_ENVDIR/lsf.conf``
  (``lsf_envdir`` or ``$LSF_ENVDIR``), else PATH.  ``lsf_envdir`` is exported to the
  commands as ``LSF_ENVDIR``.
* Submission: ``bsub -o /dev/null -e /dev/null -J <name> [options]`` with the script (see
  :mod:`gahp_lrms.script`) on its standard input.  The script redirects the job's streams
  itself: without ``-o`` LSF would mail the output (and lose it where no mailer runs), and
  the script's redirections keep ``%J``-style patterns in paths literal.  User strings reach
  bsub only as separate ``argv`` items (``-q`` queue, ``-P`` project) or shell-quoted inside
  the script (arguments, environment, working directory, stream paths).  ``bsub`` reads
  ``#BSUB`` lines anywhere in a script, even inside a quoted string, so the script is
  rendered with ``one_line_values``: a newline in a value never starts a new script line.
  The job name (``-J``) is ``name`` reduced to ``[A-Za-z0-9_.+-]``.  LSF runs a job in the
  directory bsub was started from (there is no ``-cwd`` in OpenLava/volclava): bsub runs in
  ``workdir`` when it exists (else in ``/tmp``) and the script changes to ``workdir``.  The
  job's environment is the submitting process's (LSF passes it on) plus ``environment``.
  ``nodes * cpus_per_node`` slots (at least ``count``): ``-n N``, with ``-R
  "span[ptile=cpus_per_node]"`` when ``nodes`` > 1; ``count`` instances are started by the
  script.  ``memory_mb``: ``-M`` in the unit of ``LSF_UNIT_FOR_LIMITS`` from lsf.conf
  (KB, MB, GB, ...), MB when it is not set (OpenLava/volclava take MB).  ``runtime_s``:
  ``-W`` minutes, rounded up.  ``start_held``: ``-H``.
* Status: from the status registry (see :mod:`gahp_lrms.registry`), kept current by one
  ``bjobs -a -o "jobid stat exec_host start_time finish_time" -json ID...`` for all tracked
  jobs per ``status_interval`` (``bjobs -a -w ID...`` where bjobs refuses ``-json``, as
  before LSF 10.1: no run times then); then one ``bjobs -l ID...`` for the jobs seen EXIT (the exit
  code is only in the long format: ``Exited with exit code N.``), and one ``bhist -l -n 0
  ID...`` for the jobs bjobs no longer knows (finished jobs leave bjobs after
  ``CLEAN_PERIOD``).  A job known to neither is COMPLETED with an unknown exit code.  One job
  alone: the same commands for that job.  States: PEND, WAIT, PROV -> IDLE; PSUSP -> HELD
  ("held"); USUSP, SSUSP -> HELD ("suspended"); RUN, and UNKWN/ZOMBI (the host does not
  answer; the job is still LSF's) -> RUNNING; DONE -> COMPLETED with exit code 0; EXIT ->
  COMPLETED.
* Exit codes: LSF reports ``128 + signal`` for a job killed by a signal (``bkill`` of a
  running job: 130, SIGKILL: 137, the ``-W`` limit: 140), like a shell's ``$?``.  So an exit
  status from 129 to 192 is reported as ``exit_signal`` (status - 128), not as ``exit_code``;
  a job that itself exits with such a status is indistinguishable from it.  A job ended while
  pending (``bkill`` of a pending job) has no exit status at all ("Exited").
* Cancel: the job is recorded in ``state_dir/cancelled`` before ``bkill``; from then on it
  is REMOVED ("cancelled").  ``cancel`` waits (at most ``cancel_wait_s``) until LSF shows the
  job ended: a pending job ends at once, a running one within about a second.  "Job has
  already finished" is no error: the record is removed and the job keeps its own exit
  status.  A ``bkill`` behind the driver's back shows as COMPLETED, killed by signal 2
  (running) or without an exit status (pending).  An unknown job: nothing to do.
* Hold: ``bstop`` (a pending job becomes PSUSP, a running one USUSP); ``resume``:
  ``bresume``, which also releases ``bsub -H``.  A finished job can be neither.
* Ping: ``bqueues`` (it needs mbatchd).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

from gahp_lrms.base import (
    CancelMark,
    CommandDriver,
    Features,
    Submission,
    WorkdirRule,
    command_failure,
)
from gahp_lrms.config import LsfConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus, job_slots
from gahp_lrms.script import directive_line, render_script, safe_job_name

__all__ = [
    "BJOBS_FIELDS",
    "LsfDriver",
    "bsub_options",
    "exit_info",
    "info_from_bjobs",
    "info_from_record",
    "join_continuations",
    "lsf_job_name",
    "lsf_time",
    "parse_bjobs_json",
    "parse_bjobs_wide",
    "parse_bsub",
    "parse_lsf_conf",
    "split_records",
]

_SUBMITTED = re.compile(r"^Job <(\d+)> is submitted", re.M)
_NOT_FOUND = re.compile(r"is not found|No matching job found", re.I)
_NOT_FOUND_ID = re.compile(r"Job <(\d+)> is not found")
_OPTION_REFUSED = re.compile(r"illegal option|invalid option|unrecognized option|[Uu]sage:")
_MEMORY_UNITS = {"KB": 1.0 / 1024, "MB": 1.0, "GB": 1024.0, "TB": 1024.0**2, "PB": 1024.0**3}

BJOBS_FIELDS = ("jobid", "stat", "exec_host", "start_time", "finish_time")
"""The ``bjobs -o`` fields the driver asks for (none of them contains spaces)."""

_IDLE = frozenset({"PEND", "WAIT", "PROV"})
_RUNNING = frozenset({"RUN", "UNKWN", "ZOMBI"})
_FINISHED = frozenset({"DONE", "EXIT"})
_HOLD_REASONS = {"PSUSP": "held", "USUSP": "suspended", "SSUSP": "suspended"}


# ---------------------------------------------------------------------- pure parsing
def parse_bsub(text: str) -> str | None:
    """The job id in bsub's ``Job <12> is submitted to ...`` line, or None."""
    m = _SUBMITTED.search(text)
    return m.group(1) if m else None


def parse_lsf_conf(text: str) -> dict[str, str]:
    """``NAME=value`` settings of an ``lsf.conf`` (comments and blank lines skipped, quotes
    around a value removed)."""
    settings: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        settings[name] = value
    return settings


def parse_bjobs_json(text: str) -> tuple[dict[str, dict[str, str]], set[str]]:
    """Jobs of ``bjobs -o "..." -json`` output by JOBID (fields upper case, values as
    printed; for an array the first element's record), and the ids bjobs reported as not
    found.  Raises ValueError when ``text`` is not such output."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("RECORDS", []), list):
        raise ValueError("not bjobs -json output")
    jobs: dict[str, dict[str, str]] = {}
    missing: set[str] = set()
    for record in data.get("RECORDS", []):
        if not isinstance(record, dict):
            continue
        job_id = str(record.get("JOBID", "")).strip()
        if not job_id:
            continue
        if "ERROR" in record:
            if _NOT_FOUND.search(str(record["ERROR"])):
                missing.add(job_id)
            continue
        jobs.setdefault(job_id, {str(k): str(v) for k, v in record.items()})
    return jobs, missing


def parse_bjobs_wide(text: str) -> dict[str, dict[str, str]]:
    """Jobs of ``bjobs -w`` (or ``-a -w``) output by JOBID: each column cut at the positions
    of the header's names (an empty EXEC_HOST of a pending job stays empty; JOB_NAME and
    SUBMIT_TIME may contain spaces)."""
    lines = text.splitlines()
    index = next((n for n, line in enumerate(lines) if line.startswith("JOBID")), None)
    if index is None:
        return {}
    header = lines[index]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    jobs: dict[str, dict[str, str]] = {}
    for line in lines[index + 1 :]:
        if not line.strip():
            continue
        fields = _wide_row(line, names, starts)
        if fields.get("JOBID"):
            jobs.setdefault(fields["JOBID"], fields)
    return jobs


def _wide_row(line: str, names: list[str], starts: list[int]) -> dict[str, str]:
    """One job's line of ``bjobs -w``: the header's ``names`` to their values (``starts``:
    where each name starts in the header)."""
    # The fixed columns before JOB_NAME are whitespace-separated (values are cut to fit
    # or widened with -w); JOB_NAME and SUBMIT_TIME are cut at the header positions.
    fixed = names.index("JOB_NAME") if "JOB_NAME" in names else len(names)
    tokens = line[: starts[fixed]].split() if fixed < len(names) else line.split()
    if len(tokens) == fixed - 1 and "EXEC_HOST" in names[:fixed]:
        tokens.insert(names.index("EXEC_HOST"), "")  # blank EXEC_HOST of a pending job
    fields = dict(zip(names[:fixed], tokens, strict=False))
    for pos in range(fixed, len(names)):
        end = starts[pos + 1] if pos + 1 < len(names) else None
        fields[names[pos]] = line[starts[pos] : end].strip()
    return fields


def join_continuations(text: str) -> str:
    """``text`` with wrapped lines joined: ``bhist -l`` (and IBM LSF's ``bjobs -l``) wrap at
    80 columns and indent the rest of a line by 21 spaces."""
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith(" " * 21) and out and out[-1].strip():
            out[-1] += line[21:]
        else:
            out.append(line)
    return "\n".join(out)


def split_records(text: str) -> dict[str, str]:
    """The records of ``bjobs -l`` or ``bhist -l`` output (continuation lines joined) by job
    id (``12``, or ``8[3]`` for an array element); the last record of an id wins."""
    records: dict[str, str] = {}
    text = join_continuations(text)
    starts = [m for m in re.finditer(r"^Job <([^>]+)>", text, re.M)]
    for m, following in zip(starts, [*starts[1:], None], strict=False):
        end = following.start() if following is not None else len(text)
        records[m.group(1)] = text[m.start() : end]
    return records


# The events that end a job, in the long formats (times first: "Tue Nov 24 11:47:20: ").
_END = re.compile(
    r"(?P<done>Done successfully)"
    r"|Exited with exit code\s*(?P<code>-?\d+)"
    r"|Exited by signal\s*(?P<signal>\d+)"
    r"|:\s*(?P<pending>Exited)\s*[;.]?\s*$",
    re.M,
)
_KILLED_BY = re.compile(r"Signal <(\w+)> requested by user or administrator <([^>]*)>")
_TERM = re.compile(r"\b(TERM_[A-Z_]+):\s*([^;\n]*?)\.?\s*(?:;|$)", re.M)
_STARTED_ON = re.compile(
    r"(?:[Ss]tarted (?:on|\d+ Task\(s\) on Host\(s\)) (?:\d+ \S+ )?|Dispatched to )<([^>]+)>"
)


def exit_info(code: int) -> dict[str, Any]:
    """``exit_code``/``exit_signal``/``exit_reason`` for LSF's exit status ``code``: 129-192
    is ``128 + signal`` (see the module documentation)."""
    if 128 < code <= 128 + 64:
        signal = code - 128
        return {"exit_signal": signal, "exit_reason": f"killed by signal {signal}"}
    return {"exit_code": code, "exit_reason": f"exited with status {code}" if code else None}


def info_from_record(
    record: str, *, cancelled: bool = False, common: Mapping[str, Any] | None = None
) -> JobInfo | None:
    """A finished job's :class:`JobInfo` from its ``bjobs -l`` or ``bhist -l`` record (see
    :func:`split_records`), or None when the record shows no end.  The last end event wins
    (a requeued job has several).  ``common``: further fields (worker node, times)."""
    ends = list(_END.finditer(record))
    if not ends:
        return None
    fields: dict[str, Any] = dict(common or {})
    if "worker_node" not in fields:
        started = _STARTED_ON.findall(record)
        if started:
            fields["worker_node"] = started[-1]
    if cancelled:
        return JobInfo(JobStatus.REMOVED, exit_reason="cancelled", **fields)
    end = ends[-1]
    if end.group("done"):
        return JobInfo(JobStatus.COMPLETED, exit_code=0, **fields)
    info = _exit_fields(end, record, fields)
    term = _term_reason(record)
    if term is not None:
        info["exit_reason"] = term
    return JobInfo(JobStatus.COMPLETED, **info, **fields)


def _exit_fields(end: re.Match[str], record: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The exit code or signal and the reason of the job whose last end event (not "Done")
    is ``end``; a job killed while pending has neither (nor a node: dropped from
    ``fields``)."""
    if end.group("code") is not None:
        return exit_info(int(end.group("code")))
    if end.group("signal") is not None:
        signal = int(end.group("signal"))
        return {"exit_signal": signal, "exit_reason": f"killed by signal {signal}"}
    killers = _KILLED_BY.findall(record)
    who = f" by {killers[-1][1]}" if killers and killers[-1][1] else ""
    fields.pop("worker_node", None)
    return {"exit_reason": f"ended before it started (killed{who} while pending)"}


def _term_reason(record: str) -> str | None:
    """The last ``TERM_...: text`` of the record (why LSF ended the job), or None."""
    term = _TERM.findall(record)
    if not term:
        return None
    name, text = term[-1]
    return f"{name}: {text}".rstrip(": ") if text else name


def lsf_time(text: str | None, now: float | None = None) -> float | None:
    """Seconds since the epoch of a ``bjobs -o`` time (``11/24-13:57:07``, local time, no
    year: the latest such time not after ``now``, give or take a day), or None for ``-``."""
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+)/(\d+)-(\d+):(\d+)(?::(\d+))?\s*", text)
    if not m:
        return None
    month, day, hour, minute, second = (int(g or 0) for g in m.groups())
    current = datetime.fromtimestamp(time.time() if now is None else now)
    for year in (current.year, current.year - 1):
        try:
            when = datetime(year, month, day, hour, minute, second)
        except ValueError:  # 29 February of a year that has none
            continue
        if when <= current + timedelta(days=1):
            return when.timestamp()
    return None


def _host(exec_host: str | None) -> str | None:
    """The first host of an EXEC_HOST value (``vm``, ``vm:vm``, ``2*vm``, or ``-``)."""
    if not exec_host:
        return None
    first = re.split(r"[\s:]+", exec_host.strip())[0]
    first = re.sub(r"^\d+\*", "", first)
    return first if first and first != "-" else None


def _times(fields: Mapping[str, str], now: float | None) -> float | None:
    start = lsf_time(fields.get("START_TIME"), now)
    if start is None:
        return None
    end = lsf_time(fields.get("FINISH_TIME"), now)
    if end is None:
        end = time.time() if now is None else now
    return max(0.0, end - start)


def info_from_bjobs(
    fields: Mapping[str, str],
    *,
    record: str | None = None,
    cancelled: bool = False,
    now: float | None = None,
) -> JobInfo:
    """A :class:`JobInfo` from one job of :func:`parse_bjobs_json` (or ``parse_bjobs_wide``);
    an EXIT job's exit status comes from its ``bjobs -l`` ``record``."""
    stat = fields.get("STAT", "").strip()
    common: dict[str, Any] = {"worker_node": _host(fields.get("EXEC_HOST"))}
    wall = _times(fields, now)
    if wall is not None:
        common["wallclock_s"] = wall
    if cancelled:
        return JobInfo(JobStatus.REMOVED, exit_reason="cancelled", **common)
    if stat in _IDLE:
        return JobInfo(JobStatus.IDLE)
    if stat in _HOLD_REASONS:
        return JobInfo(JobStatus.HELD, hold_reason=_HOLD_REASONS[stat], **common)
    if stat in _RUNNING:
        return JobInfo(JobStatus.RUNNING, **common)
    if stat == "DONE":
        return JobInfo(JobStatus.COMPLETED, exit_code=0, **common)
    if stat == "EXIT":
        info = info_from_record(record, common=common) if record else None
        if info is None:
            return JobInfo(
                JobStatus.COMPLETED, exit_reason="exited (exit status unknown)", **common
            )
        return info
    raise DriverError(f"unexpected LSF job state {stat!r}")


def lsf_job_name(name: str | None, default: str = "gahp") -> str:
    """A job name bsub takes as it is: ``[A-Za-z0-9_.+-]`` (no ``[`` of an array), at most
    128 characters."""
    return safe_job_name(name, 128, default)


def bsub_options(spec: JobSpec, *, memory_unit: str = "MB") -> list[str]:
    """bsub options for ``spec`` (a list of argv items, never shell text); ``memory_unit``
    is the unit of ``-M`` (``LSF_UNIT_FOR_LIMITS``)."""
    opts = ["-o", "/dev/null", "-e", "/dev/null", "-J", lsf_job_name(spec.name)]
    if spec.queue:
        opts += ["-q", spec.queue]
    if spec.project:
        opts += ["-P", spec.project]
    slots = job_slots(spec)
    if slots > 1:
        opts += ["-n", str(slots)]
    opts += _bsub_placement(spec, slots) + _bsub_gpu(spec) + _bsub_limits(spec, memory_unit)
    if spec.start_held:
        opts.append("-H")
    return opts


def _bsub_placement(spec: JobSpec, slots: int) -> list[str]:
    """``-R`` (span, MICs) and ``-x`` (whole nodes)."""
    opts: list[str] = []
    sections = []
    if (spec.nodes or 1) > 1:
        sections.append(f"span[ptile={spec.cpus_per_node or 1}]")
    elif spec.whole_nodes and slots > 1:
        sections.append("span[hosts=1]")
    if spec.mics:
        sections.append(f"rusage[nmics={int(spec.mics)}]")
    if sections:
        opts += ["-R", " ".join(sections)]
    if spec.whole_nodes:
        opts.append("-x")
    return opts


def _bsub_gpu(spec: JobSpec) -> list[str]:
    """``-gpu num=N[:mode=...][:gmodel=...]``, when the job asks for GPUs."""
    if not (spec.gpus or spec.gpu_model or spec.gpu_mode):
        return []
    gpu = f"num={int(spec.gpus or 1)}"
    if spec.gpu_mode:
        gpu += f":mode={spec.gpu_mode}"
    if spec.gpu_model:
        gpu += f":gmodel={spec.gpu_model}"
    return ["-gpu", gpu]


def _bsub_limits(spec: JobSpec, memory_unit: str) -> list[str]:
    """``-M`` (memory, in ``memory_unit``) and ``-W`` (run time, in minutes)."""
    opts: list[str] = []
    if spec.memory_mb:
        per_unit = _MEMORY_UNITS.get(memory_unit.upper())
        if per_unit is None:
            raise DriverError(f"LSF_UNIT_FOR_LIMITS={memory_unit}: unknown unit")
        opts += ["-M", str(max(1, math.ceil(spec.memory_mb / per_unit)))]
    if spec.runtime_s:
        opts += ["-W", str(math.ceil(spec.runtime_s / 60))]
    return opts


# ---------------------------------------------------------------------- driver
class LsfDriver(CommandDriver):
    """Jobs in LSF (IBM Spectrum LSF, OpenLava, volclava).  Config keys: ``lsf_envdir``
    (exported as LSF_ENVDIR; default: the environment's), ``bin_dir`` (where bsub & co. are;
    default: LSF_BINDIR of ``$LSF_ENVDIR/lsf.conf``, else PATH), ``command_timeout`` (s,
    default 30), ``submit_timeout`` (s, default 60), ``cancel_wait_s`` (default 10), and the
    status registry's keys."""

    name = "lsf"
    system = "LSF"
    features = Features(bulk_status=True)
    config_class = LsfConfig
    settings: LsfConfig

    def _setup(self) -> None:
        self.lsf_conf = self._read_lsf_conf(self.env.get("LSF_ENVDIR"))
        if not self.settings.bin_dir and self.lsf_conf.get("LSF_BINDIR"):
            self.bin_dir = self.lsf_conf["LSF_BINDIR"]
        self.memory_unit = self.lsf_conf.get("LSF_UNIT_FOR_LIMITS") or "MB"
        self._wide = False  # bjobs has no -json: status from bjobs -a -w

    @staticmethod
    def _read_lsf_conf(envdir: str | None) -> dict[str, str]:
        if not envdir:
            return {}
        try:
            return parse_lsf_conf((Path(envdir) / "lsf.conf").read_text(errors="replace"))
        except OSError:
            return {}

    # ------------------------------------------------------------------ helpers
    def _bjobs(self, native_ids: Sequence[str]) -> tuple[dict[str, dict[str, str]], set[str]]:
        """One ``bjobs -a -o ... -json`` for ``native_ids`` (``bjobs -a -w`` where there is no
        ``-json``, as in LSF 9): their fields, and the ids bjobs does not know."""
        if not self._wide:
            fields = " ".join(BJOBS_FIELDS)
            proc = self._run("bjobs", "-a", "-o", fields, "-json", *native_ids, check=False)
            if proc.returncode in (0, 255):
                with contextlib.suppress(ValueError):
                    return parse_bjobs_json(proc.stdout)
            if proc.returncode == 255 and _only_not_found(proc.stderr) and not proc.stdout.strip():
                return {}, set(native_ids)
            if not _OPTION_REFUSED.search(proc.stderr + proc.stdout):
                raise DriverError(command_failure(["bjobs"], proc))
            refusal = proc.stderr.strip()[:200]
            self.log.info("bjobs refuses -o/-json (%s): using bjobs -a -w", refusal)
            self._wide = True
        proc = self._run("bjobs", "-a", "-w", *native_ids, check=False)
        jobs = parse_bjobs_wide(proc.stdout)
        missing = set(_NOT_FOUND_ID.findall(proc.stderr))
        if proc.returncode == 0 or (proc.returncode == 255 and (jobs or missing)):
            return jobs, missing
        raise DriverError(command_failure(["bjobs"], proc))

    def _records(self, command: str, *args: str) -> dict[str, str]:
        """The ``-l`` records of ``bjobs``/``bhist`` (one command for all ``args``)."""
        proc = self._run(command, "-l", *args, check=False)
        if proc.returncode == 0 or (
            proc.returncode == 255 and (proc.stdout.strip() or _only_not_found(proc.stderr))
        ):
            return split_records(proc.stdout)
        raise DriverError(command_failure([command], proc))

    def _describe(self, native_ids: Sequence[str], *, strict: bool) -> dict[str, JobInfo]:
        """States of ``native_ids`` from at most three commands (bjobs -json, bjobs -l for
        EXIT jobs, bhist -l for jobs bjobs no longer knows).  A job that cannot be described
        raises (``strict``) or is left out."""
        found: dict[str, JobInfo] = {}
        ask: list[str] = []
        with self._lock:
            for native_id in native_ids:
                final = self._final.get(native_id)
                if final is not None:
                    found[native_id] = final
                else:
                    ask.append(native_id)
        if not ask:
            return found
        answers = self._query(ask, strict)
        for native_id in ask:
            if native_id in answers.unanswered:
                continue  # asked on its own (see _optional_records)
            try:
                info = answers.info(native_id)
            except DriverError as exc:
                if strict:
                    raise
                self.log.warning("LSF job %s: %s", native_id, exc)
                continue
            found[native_id] = info
            if info.finished:
                with self._lock:
                    self._final[native_id] = info
        return found

    def _query(self, ask: Sequence[str], strict: bool) -> _Answers:
        """What bjobs, and bjobs -l and bhist -l where they are needed, say of ``ask``."""
        queued, _missing = self._bjobs(ask)
        cancelled = frozenset(i for i in ask if self._cancelled(i))
        exited = [i for i in ask if queued.get(i, {}).get("STAT") == "EXIT" and i not in cancelled]
        gone = [i for i in ask if i not in queued and i not in cancelled]
        long = self._optional_records(exited, strict, "bjobs")
        history = self._optional_records(gone, strict, "bhist", "-n", "0")
        unanswered = (exited if long is None else []) + (gone if history is None else [])
        return _Answers(
            queued, cancelled, long or {}, history or {}, frozenset(unanswered), time.time()
        )

    def _optional_records(
        self, native_ids: Sequence[str], strict: bool, command: str, *options: str
    ) -> dict[str, str] | None:
        """:meth:`_records` of ``native_ids``; in a bulk query a failure (None) leaves those
        jobs out (each is then asked on its own) instead of failing the whole query."""
        if not native_ids:
            return {}
        try:
            return self._records(command, *options, *native_ids)
        except DriverError as exc:
            if strict:
                raise
            self.log.warning(
                "%s -l failed (%d jobs asked on their own): %s", command, len(native_ids), exc
            )
            return None

    # ------------------------------------------------------------------ submit (see CommandDriver)
    job_id = re.compile(r"[1-9]\d*\Z")
    submit_command = "bsub"
    workdir = WorkdirRule(normalise_absolute=True)

    def _submission(self, spec: JobSpec) -> Submission:
        options = bsub_options(spec, memory_unit=self.memory_unit)
        # LSF runs the job in bsub's working directory; the script always changes to it.
        workdir = str(spec.workdir)
        cwd = workdir if os.path.isdir(workdir) and os.access(workdir, os.X_OK) else "/tmp"
        site = [*spec.directives, *directive_line("#BSUB", spec.extra_args)]
        script = render_script(spec, one_line_values=True, directives=site)
        return Submission(options, input=script, cwd=cwd)

    def _printed_id(self, stdout: str) -> str | None:
        return parse_bsub(stdout)

    # ------------------------------------------------------------------ status
    def query_status(self, native_id: str) -> JobInfo:
        self._check_id(native_id)
        return self._describe([native_id], strict=True)[native_id]

    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        """At most three commands for any number of jobs: ``bjobs -json``, then ``bjobs -l``
        for those that exited and ``bhist -l`` for those bjobs no longer knows."""
        return self._describe([i for i in native_ids if self.job_id.match(i)], strict=False)

    # ------------------------------------------------------------------ cancel (see CommandDriver)
    cancel_command = ("bkill",)
    cancel_unknown = re.compile(f"already finished|{_NOT_FOUND.pattern}", re.I)
    cancel_mark = CancelMark.DROPPED_ON_FAILURE

    def _cancel_needless(self, native_id: str) -> bool:
        # cancelled already, finished, or unknown: nothing to do
        return self._cancelled(native_id) or self.query_status(native_id).finished

    def _not_ended(self, native_id: str) -> bool:
        # LSF ends the job asynchronously (SIGINT, SIGTERM, then SIGKILL): until it shows
        # the job ended, its processes may live on.
        try:
            queued, _missing = self._bjobs([native_id])
        except DriverError:
            return False
        return queued.get(native_id, {}).get("STAT", "DONE") not in _FINISHED

    # ------------------------------------------------------------------ hold, resume, ping
    def hold(self, native_id: str) -> None:
        self._hold_with(native_id, ("bstop",), ("bstop",))

    def resume(self, native_id: str) -> None:
        info = self.query_status(native_id)
        if info.status is not JobStatus.HELD:
            raise DriverError(f"LSF job {native_id} is not held: it is {info.status.name}")
        self._run("bresume", native_id)

    def ping(self) -> None:
        self._run("bqueues", timeout=min(self.timeout, 15.0))


def _from_history(record: str | None) -> JobInfo:
    """A job bjobs no longer knows, from its ``bhist -l`` record (if any)."""
    info = info_from_record(record) if record else None
    if info is not None:
        return info
    why = "job no longer known to LSF (exit status unknown)"
    if record:
        why = "job no longer known to LSF, its history shows no end (exit status unknown)"
    return JobInfo(JobStatus.COMPLETED, exit_reason=why)


@attrs.frozen
class _Answers:
    """What the commands of one status query said: bjobs' fields (``queued``), the jobs
    the driver cancelled, the ``bjobs -l`` records of EXIT jobs (``long``), the ``bhist -l``
    records of jobs bjobs no longer knows (``history``), the jobs that could not be
    described (``unanswered``) and the time of the query (``now``)."""

    queued: Mapping[str, Mapping[str, str]]
    cancelled: frozenset[str]
    long: Mapping[str, str]
    history: Mapping[str, str]
    unanswered: frozenset[str]
    now: float

    def info(self, native_id: str) -> JobInfo:
        """The job's state (raises DriverError for a state the driver does not know)."""
        fields = self.queued.get(native_id)
        cancelled = native_id in self.cancelled
        if fields is not None:
            record = self.long.get(native_id)
            return info_from_bjobs(fields, record=record, cancelled=cancelled, now=self.now)
        if cancelled:
            return JobInfo(JobStatus.REMOVED, exit_reason="cancelled")
        return _from_history(self.history.get(native_id))


def _only_not_found(stderr: str) -> bool:
    """Whether every line of ``stderr`` says that a job is unknown."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return bool(lines) and all(_NOT_FOUND.search(line) for line in lines)
