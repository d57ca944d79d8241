"""The ``condor`` driver: jobs in an HTCondor pool, through its schedd and HTCondor's own
Python bindings (``htcondor2``), never through the output of ``condor_q``.

* Which schedd: ``collector`` and ``schedd_name`` (a remote pool; FS, IDTOKENS... as the
  HTCondor configuration says), else the schedd of the HTCondor configuration in the
  environment (``$CONDOR_CONFIG``, or the ``condor_config`` setting), as HTCondor's own tools
  and the C blahp's condor scripts find it.
* The bindings run in a helper process (:mod:`gahp_lrms._condor_worker`): they hold Python's
  interpreter lock while a daemon makes them wait, and their configuration is global.  Each
  call is bounded by ``schedd_timeout`` (``submit_timeout`` for a submit); a helper that
  does not answer in time is killed and the call is a :class:`DriverError`.
* Submission: a vanilla-universe job on a shared file system (``should_transfer_files =
  NO``; jobs run in their working directory, as with the other drivers).  User strings
  become ClassAd string attributes (``Arguments`` and ``Environment`` in HTCondor's V2
  syntax, ``Iwd``, ``In``, ``Out``, ``Err``): ``$(`` is written as ``$(DOLLAR)(`` so that the
  submit language expands nothing.  What it cannot carry is refused with the reason: a line
  break, ``$$(`` (HTCondor substitutes it from the machine's ad when the job starts, with no
  escape), ``$(DOLLAR)`` itself, a path ending in a backslash.  ``count`` N is one cluster
  of N procs (id ``CLUSTER``); one job is ``CLUSTER.PROC``.  ``submit_many`` makes one
  cluster of jobs whose descriptions differ (a Ninf-G job's processes: their own output
  files), one proc each (ids ``CLUSTER.PROC``).  ``options`` keys ``submit:<name>`` are
  further submit commands (``gahp_ninfg``'s ``condor_option`` lines, checked there and
  again here).
* Status: from the status registry (see :mod:`gahp_lrms.registry`): one schedd query for
  all tracked jobs per ``status_interval`` (``member(ClusterId, {...})``), plus one history
  query for those that left the queue.  Exit codes and signals from ``ExitCode`` /
  ``ExitBySignal`` / ``ExitSignal``.
* Cancel is a remove (``REMOVED``), hold and resume are HTCondor's hold and release (a
  running job is vacated and held; a released job runs again from the start).
* Refused, with the reason: whole nodes, more than one node, GPU modes, MIC coprocessors and
  extra submit arguments (there is no ``condor_submit`` command line to extend: a site adds
  submit commands through ``condor_local_submit_attributes.sh``, whose lines
  ``name = value`` are added to the job's submit description).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from gahp_lrms.base import BlockingDriver, Features
from gahp_lrms.config import CondorConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus, untracked_environ
from gahp_lrms.script import safe_job_name

__all__ = [
    "OWN_COMMANDS",
    "CondorDriver",
    "STATUS_ATTRIBUTES",
    "classad_string",
    "job_info_from_ad",
    "submit_description",
    "v2_arguments",
    "v2_environment",
]

log = logging.getLogger("gahp.lrms.condor")

JOB_ID = re.compile(r"(\d{1,12})(?:\.(\d{1,9}))?\Z")
STATUS_ATTRIBUTES = (
    "ClusterId",
    "ProcId",
    "JobStatus",
    "ExitBySignal",
    "ExitCode",
    "ExitSignal",
    "HoldReason",
    "HoldReasonCode",
    "RemoveReason",
    "RemoteHost",
    "LastRemoteHost",
    "RemoteWallClockTime",
    "RemoteUserCpu",
    "RemoteSysCpu",
    "JobCurrentStartDate",
    "ServerTime",
    "GahpRuntimeLimit",
)
"""The job attributes the status queries ask for."""
CANCEL_REASON = "removed through the GAHP server (BLAH_JOB_CANCEL)"
MAX_REPLY_BYTES = 64 << 20
"""Bytes one answer of the helper process may have."""
_MACRO = re.compile(r"\$(?=[A-Za-z_]*\()")
_MATCH_TIME = re.compile(r"\$\$[A-Za-z_]*[(\[]")
_DOLLAR = re.compile(r"\$\(\s*DOLLAR\s*\)", re.IGNORECASE)


# ---------------------------------------------------------------------- submit description
def submit_text(value: str, what: str) -> str:
    """``value`` as it must be written in HTCondor's submit language to arrive unchanged:
    ``$(`` (and ``$NAME(``) written with ``$(DOLLAR)``; a line break, ``$$(`` and
    ``$(DOLLAR)`` itself, which the language cannot carry, refused naming ``what``."""
    if "\n" in value or "\r" in value:
        raise DriverError(f"{what} has a line break: HTCondor's submit language cannot carry it")
    if _MATCH_TIME.search(value):
        raise DriverError(
            f"{what} has '$$(': HTCondor replaces it from the machine's ClassAd when the job "
            "starts, and has no way to write it literally"
        )
    if _DOLLAR.search(value):
        raise DriverError(
            f"{what} has '$(DOLLAR)': HTCondor's submit language reads it as '$' and has no "
            "way to write it literally"
        )
    return _MACRO.sub("$(DOLLAR)", value)


def classad_string(value: str, what: str) -> str:
    """``value`` as a ClassAd string literal in the submit language (which reads old ClassAd
    syntax: only ``\\"`` is an escape), ready for a ``MY.`` attribute."""
    text = submit_text(value, what)
    if text.endswith("\\"):
        raise DriverError(
            f"{what} ends with a backslash: HTCondor's submit language cannot carry it"
        )
    return '"' + text.replace('"', '\\"') + '"'


def _v2_word(word: str) -> str:
    return "'" + word.replace("'", "''") + "'"


def v2_arguments(args: Sequence[str]) -> str:
    """``args`` in HTCondor's V2 argument syntax (each in single quotes, ``'`` doubled)."""
    return " ".join(_v2_word(a) for a in args)


def v2_environment(env: Mapping[str, str]) -> str:
    """``env`` in HTCondor's V2 environment syntax (``NAME='value'``, ``'`` doubled)."""
    return " ".join(f"{name}={_v2_word(value)}" for name, value in env.items())


def _refuse(spec: JobSpec) -> None:
    asked = [
        ("whole nodes (WholeNodes): a vanilla job gets the CPUs it requests", spec.whole_nodes),
        (
            "more than one node (HostNumber, NodeNumber over SMPGranularity): a vanilla job "
            "runs on one machine",
            (spec.nodes or 1) > 1,
        ),
        ("a GPU mode (GPUMode): HTCondor has no GPU modes", spec.gpu_mode),
        (
            "MIC coprocessors (MICNumber): HTCondor has no MIC resource unless a pool defines one",
            spec.mics,
        ),
        (
            "extra submit arguments (BatchExtraSubmitArgs): jobs are submitted through the "
            "schedd, with no condor_submit command line (a site adds submit commands with "
            "condor_local_submit_attributes.sh)",
            spec.extra_args,
        ),
    ]
    names = [what for what, value in asked if value]
    if names:
        raise DriverError(f"HTCondor cannot give a job {'; '.join(names)}")


def _executable(spec: JobSpec, workdir: str) -> str:
    exe = spec.executable
    if "/" not in exe:
        found = shutil.which(exe)
        if found is None:
            raise DriverError(f"executable {exe!r} is not on the server's PATH")
        return found
    return exe if os.path.isabs(exe) else os.path.normpath(os.path.join(workdir, exe))


def _directive(line: str) -> tuple[str, str] | None:
    """A site's submit command ``name = value`` (blank and ``#`` lines: None)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"\+?[A-Za-z_][A-Za-z0-9_.]*", name):
        raise DriverError(f"site submit command {line!r} is not 'name = value'")
    if name.lower() in ("queue", "executable", "universe"):
        raise DriverError(f"site submit command {line!r} may not set {name}")
    return name, value.strip()


def submit_description(
    spec: JobSpec,
    settings: CondorConfig,
    *,
    cwd: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The submit description (commands and ``MY.`` attributes) of ``spec``. ``cwd`` is the
    working directory of a job without one (default: this process's); ``environ`` the
    environment a job inherits when ``inherit_environment`` is set."""
    _refuse(spec)
    workdir = spec.workdir or cwd or os.getcwd()
    if not os.path.isabs(workdir):
        workdir = os.path.abspath(workdir)
    exe = _executable(spec, workdir)
    if exe != exe.strip():
        raise DriverError(f"executable {exe!r} begins or ends with a blank")
    desc: dict[str, str] = {
        "universe": "vanilla",
        "executable": submit_text(exe, "the executable"),
        "transfer_executable": "false",
        "should_transfer_files": "NO",
        "notification": "never",
        "batch_name": safe_job_name(spec.name, 64),
        "MY.Iwd": classad_string(workdir, "the working directory"),
        "request_cpus": str(int(spec.cpus_per_node or 1)),
        "MY.GahpJob": "true",
    }
    desc.update(_job_strings(spec, settings, environ))
    desc.update(_resources(spec))
    desc.update(_placement(spec, settings))
    for line in spec.directives:  # the site's own submit commands (trusted text)
        found = _directive(line)
        if found is not None:
            desc[found[0]] = found[1]
    for key, value in spec.options.items():  # the job's own (a Ninf-G condor_option)
        if key.startswith(SUBMIT_OPTION):
            name, value = _user_command(key.removeprefix(SUBMIT_OPTION), value)
            desc[name] = value
    return desc


def _job_strings(
    spec: JobSpec, settings: CondorConfig, environ: Mapping[str, str] | None
) -> dict[str, str]:
    """Arguments, environment and standard streams, as ClassAd strings."""
    desc: dict[str, str] = {}
    if spec.arguments:
        desc["MY.Arguments"] = classad_string(v2_arguments(spec.arguments), "an argument")
    env = dict(spec.environment)
    if settings.inherit_environment:
        env = {**(untracked_environ() if environ is None else environ), **env}
    if env:
        desc["MY.Environment"] = classad_string(v2_environment(env), "the environment")
    for attr, value, what in (
        ("In", spec.stdin, "standard input"),
        ("Out", spec.stdout, "standard output"),
        ("Err", spec.stderr, "standard error"),
    ):
        if value:
            desc[f"MY.{attr}"] = classad_string(value, f"the {what} path")
    return desc


def _resources(spec: JobSpec) -> dict[str, str]:
    """Memory, GPUs and the run-time limit (a periodic remove, as the C blahp's)."""
    desc: dict[str, str] = {}
    if spec.memory_mb:
        desc["request_memory"] = str(int(spec.memory_mb))
    if spec.gpus or spec.gpu_model:
        desc["request_gpus"] = str(int(spec.gpus or 1))
    if spec.gpu_model:
        desc["require_gpus"] = f"DeviceName == {classad_string(spec.gpu_model, 'GPUModel')}"
    if spec.runtime_s:
        limit = int(spec.runtime_s)
        desc["MY.GahpRuntimeLimit"] = str(limit)
        desc["periodic_remove"] = (
            f"JobStatus == 2 && (time() - JobCurrentStartExecutingDate) > {limit}"
        )
    return desc


def _placement(spec: JobSpec, settings: CondorConfig) -> dict[str, str]:
    """Queue (an attribute, and requirements when configured), project, start held."""
    desc: dict[str, str] = {}
    if spec.queue:
        quoted = classad_string(spec.queue, "the queue")
        desc[f"MY.{settings.queue_attribute}"] = quoted
        if settings.queue_requirements:
            desc["requirements"] = settings.queue_requirements.replace("{queue}", quoted)
    if spec.project:
        desc["MY.ProjectName"] = classad_string(spec.project, "the project")
    if spec.start_held:
        desc["hold"] = "true"
    return desc


SUBMIT_OPTION = "submit:"
"""The prefix of the ``JobSpec.options`` keys that are submit commands."""
OWN_COMMANDS = frozenset(
    [
        "universe",
        "executable",
        "arguments",
        "args",
        "environment",
        "env",
        "getenv",
        "input",
        "output",
        "error",
        "initialdir",
        "initial_dir",
        "iwd",
        "log",
        "queue",
        "hold",
        "leave_in_queue",
        "on_exit_remove",
        "transfer_executable",
        "should_transfer_files",
        "my.iwd",
        "my.in",
        "my.out",
        "my.err",
        "my.arguments",
        "my.environment",
        "+iwd",
        "+in",
        "+out",
        "+err",
        "+arguments",
        "+environment",
    ]
)
"""Submit commands a job's own options may not set: the driver writes them."""


def _user_command(name: str, value: str) -> tuple[str, str]:
    """A job's own submit command, checked: a command name, a value of one line."""
    if not re.fullmatch(r"\+?[A-Za-z_][A-Za-z0-9_.]{0,63}", name):
        raise DriverError(f"submit command {name!r} is not a submit command name")
    if name.lower() in OWN_COMMANDS:
        raise DriverError(f"submit command {name} is the driver's own")
    if any(c in value for c in "\r\n\0") or len(value) > 4096:
        raise DriverError(f"submit command {name}: the value is not one line of at most 4096")
    return name, value


# ---------------------------------------------------------------------- status
_CONDOR_STATES = {
    1: JobStatus.IDLE,
    2: JobStatus.RUNNING,
    3: JobStatus.REMOVED,
    4: JobStatus.COMPLETED,
    5: JobStatus.HELD,
    6: JobStatus.RUNNING,  # transferring output
    7: JobStatus.HELD,  # suspended
}


def _number(ad: Mapping[str, Any], key: str) -> float | None:
    value = ad.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _host(ad: Mapping[str, Any]) -> str | None:
    for key in ("RemoteHost", "LastRemoteHost"):
        value = ad.get(key)
        if isinstance(value, str) and value:
            return value.partition("@")[2] or value
    return None


def job_info_from_ad(ad: Mapping[str, Any]) -> JobInfo:
    """A :class:`JobInfo` from a job's ad (the :data:`STATUS_ATTRIBUTES` of a schedd or
    history query)."""
    raw = ad.get("JobStatus")
    state = _CONDOR_STATES.get(raw) if isinstance(raw, int) else None
    if state is None or not isinstance(raw, int):
        raise DriverError(f"unexpected HTCondor JobStatus {raw!r}")
    common: dict[str, Any] = {
        "wallclock_s": _wallclock(ad, raw),
        "user_cpu_s": _number(ad, "RemoteUserCpu"),
        "sys_cpu_s": _number(ad, "RemoteSysCpu"),
        "worker_node": _host(ad),
    }
    finish = _FINISHED_INFO.get(state)
    if finish is not None:
        return finish(ad, raw, common)
    return JobInfo(state, **common)


def _wallclock(ad: Mapping[str, Any], raw: int) -> float | None:
    """The job's wall-clock time, with the current run's for a running or
    transferring job."""
    wall = _number(ad, "RemoteWallClockTime")
    start, now = _number(ad, "JobCurrentStartDate"), _number(ad, "ServerTime")
    if raw in (2, 6) and start and now:
        wall = (wall or 0.0) + max(0.0, now - start)
    return wall


def _held_info(ad: Mapping[str, Any], raw: int, common: dict[str, Any]) -> JobInfo:
    held = "suspended" if raw == 7 else str(ad.get("HoldReason") or "held")
    return JobInfo(JobStatus.HELD, hold_reason=held, **common)


def _removed_info(ad: Mapping[str, Any], raw: int, common: dict[str, Any]) -> JobInfo:
    """A removed job; one the runtime limit removed has completed (the limit exceeded)."""
    why = str(ad.get("RemoveReason") or "removed")
    limit = ad.get("GahpRuntimeLimit")
    if isinstance(limit, int) and "PeriodicRemove" in why:
        return JobInfo(
            JobStatus.COMPLETED,
            exit_reason=f"wall-clock time limit exceeded ({limit} s)",
            **common,
        )
    return JobInfo(JobStatus.REMOVED, exit_reason=why, **common)


def _completed_info(ad: Mapping[str, Any], raw: int, common: dict[str, Any]) -> JobInfo:
    state = JobStatus.COMPLETED
    if ad.get("ExitBySignal") is True:
        signal = ad.get("ExitSignal")
        sig = signal if isinstance(signal, int) else None
        return JobInfo(state, exit_signal=sig, exit_reason=f"killed by signal {sig}", **common)
    code = ad.get("ExitCode")
    exit_code = code if isinstance(code, int) else None
    failed = f"exited with status {exit_code}" if exit_code else None
    return JobInfo(state, exit_code=exit_code, exit_reason=failed, **common)


_FINISHED_INFO: dict[JobStatus, Callable[[Mapping[str, Any], int, dict[str, Any]], JobInfo]] = {
    JobStatus.HELD: _held_info,
    JobStatus.REMOVED: _removed_info,
    JobStatus.COMPLETED: _completed_info,
}


def _worst(infos: Sequence[JobInfo]) -> JobInfo:
    """The state of a cluster from its procs' (Ninf-G's rule: the least advanced wins; a
    finished cluster's exit is its first failing proc's, removed procs count as done)."""
    by_status: dict[JobStatus, list[JobInfo]] = {}
    for info in infos:
        by_status.setdefault(info.status, []).append(info)
    for status in (JobStatus.HELD, JobStatus.IDLE, JobStatus.RUNNING):
        if status in by_status:
            return by_status[status][0]
    if len(by_status.get(JobStatus.REMOVED, ())) == len(infos):
        return infos[0]
    done = by_status.get(JobStatus.COMPLETED, [])
    failed = [i for i in done if i.exit_code or i.exit_signal]
    return (failed or done)[0]


def _split(native_id: str) -> tuple[int, int | None]:
    m = JOB_ID.match(native_id)
    if m is None:
        raise DriverError(f"malformed HTCondor job id {native_id!r}")
    return int(m.group(1)), None if m.group(2) is None else int(m.group(2))


def _constraint(native_id: str) -> str:
    cluster, proc = _split(native_id)
    if proc is None:
        return f"ClusterId == {cluster}"
    return f"ClusterId == {cluster} && ProcId == {proc}"


def _members(clusters: Sequence[int]) -> str:
    return "member(ClusterId, {" + ",".join(str(c) for c in sorted(set(clusters))) + "})"


# ---------------------------------------------------------------------- helper process
class _Helper:
    """The helper process running the bindings (started on first use, again after a
    failure); one request at a time."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}
        """Requests sent, by ``op`` (for tests and benchmarks)."""

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        with self.lock:
            self.calls[request["op"]] = self.calls.get(request["op"], 0) + 1
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
                line = self._read_line(proc, time.monotonic() + timeout)
            except (OSError, ValueError) as exc:
                self._stop()
                raise DriverError(f"HTCondor helper process failed: {exc}") from None
            if line is None:
                self._stop()
                raise DriverError(
                    f"the HTCondor schedd did not answer within {timeout:g} s (is it down?)"
                )
            try:
                answer = json.loads(line)
            except ValueError:
                self._stop()
                raise DriverError("HTCondor helper process answered garbage") from None
        if "error" in answer:
            raise DriverError(f"HTCondor: {answer['error']}")
        return answer["ok"]

    def _started(self) -> subprocess.Popen[bytes]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
                close_fds=True,
            )
        except OSError as exc:
            raise DriverError(f"cannot start the HTCondor helper process: {exc}") from None
        return self.proc

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """One line of the helper's output, or None when it did not come before
        ``deadline``; a helper that exited or wrote too much raises ValueError."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            data = os.read(fd, 1 << 16)
            if not data:
                status = proc.wait(timeout=5)
                raise ValueError(f"it exited (status {status}): is htcondor2 installed for it?")
            chunks.append(data)
            size += len(data)
            if size > MAX_REPLY_BYTES:
                raise ValueError(f"answer over {MAX_REPLY_BYTES} bytes")
            if b"\n" in data:
                whole = b"".join(chunks)
                line, _, rest = whole.partition(b"\n")
                if rest:
                    raise ValueError("more than one answer")
                return line

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)

    def close(self) -> None:
        with self.lock:
            self._stop()


# ---------------------------------------------------------------------- driver
class CondorDriver(BlockingDriver):
    """Jobs in an HTCondor pool (see the module documentation). Options:
    :class:`~gahp_lrms.config.CondorConfig`."""

    name = "condor"
    system: ClassVar[str] = "HTCondor"
    config_class = CondorConfig
    features = Features(bulk_status=True)
    settings: CondorConfig

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        env = untracked_environ()
        if self.settings.condor_config is not None:
            env["CONDOR_CONFIG"] = str(self.settings.condor_config)
        python = self.settings.python or sys.executable
        worker = str(Path(__file__).with_name("_condor_worker.py"))
        self._helper = _Helper(
            [python, worker, self.settings.collector or "-", self.settings.schedd_name or "-"],
            env,
        )

    @property
    def schedd_calls(self) -> dict[str, int]:
        """Requests sent to the schedd so far, by kind (``query``, ``history``, ``act``...)."""
        return dict(self._helper.calls)

    def _call(self, op: str, timeout: float | None = None, **request: Any) -> Any:
        return self._helper.call(
            {"op": op, **request}, self.settings.schedd_timeout if timeout is None else timeout
        )

    def _check_id(self, native_id: str) -> str:
        if not isinstance(native_id, str):
            raise DriverError(f"malformed HTCondor job id {native_id!r}")
        _split(native_id)
        return native_id

    # ------------------------------------------------------------------ submit
    def submit(self, spec: JobSpec) -> str:
        desc = submit_description(spec, self.settings)
        count = max(1, int(spec.count))
        result = self._call("submit", self.settings.submit_timeout, description=desc, count=count)
        cluster = int(result["cluster"])
        return str(cluster) if count > 1 else f"{cluster}.{int(result['first_proc'])}"

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str]:
        """One cluster with a proc per spec (ids ``CLUSTER.PROC``): the submit commands
        that differ between them are given per proc (itemdata)."""
        if len(specs) <= 1 or any(int(s.count) > 1 for s in specs):
            return super().submit_many(specs)
        cwd = os.getcwd()
        descs = [submit_description(s, self.settings, cwd=cwd) for s in specs]
        keys = list(dict.fromkeys(k for d in descs for k in d))
        varying = [k for k in keys if len({d.get(k) for d in descs}) > 1]
        if any(k not in d for k in varying for d in descs):
            return super().submit_many(specs)  # not one shape: one submission each
        desc = dict(descs[0])
        items: list[dict[str, str]] = [{} for _ in descs]
        for n, key in enumerate(varying):
            macro = f"GahpItem{n}"
            desc[key] = f"$({macro})"
            for item, d in zip(items, descs, strict=True):
                item[macro] = d[key]
        request: dict[str, Any] = {"description": desc, "count": len(specs)}
        if varying:
            request["itemdata"] = items
        result = self._call("submit", self.settings.submit_timeout, **request)
        cluster, first = int(result["cluster"]), int(result["first_proc"])
        if int(result["count"]) != len(specs):
            with contextlib.suppress(DriverError):
                self._call("act", action="Remove", constraint=f"ClusterId == {cluster}")
            raise DriverError(
                f"HTCondor made {result['count']} procs of cluster {cluster}, not {len(specs)}"
            )
        return [f"{cluster}.{first + i}" for i in range(len(specs))]

    # ------------------------------------------------------------------ status
    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        ids = [i for i in native_ids if JOB_ID.match(i)]
        if not ids:
            return {}
        parsed = {i: _split(i) for i in ids}
        ads = self._call(
            "query",
            constraint=_members([c for c, _ in parsed.values()]),
            projection=list(STATUS_ATTRIBUTES),
        )
        found, gone = self._describe(parsed, _by_job(ads), history=False)
        if gone:
            wanted = {i: parsed[i] for i in gone}
            match = -1 if any(p is None for _, p in wanted.values()) else len(wanted)
            past = self._call(
                "history",
                constraint=_members([c for c, _ in wanted.values()]),
                projection=list(STATUS_ATTRIBUTES),
                match=match,
            )
            more, _ = self._describe(wanted, _by_job(ads) | _by_job(past), history=True)
            found.update(more)
        return found

    def _describe(
        self,
        parsed: Mapping[str, tuple[int, int | None]],
        jobs: Mapping[tuple[int, int], Mapping[str, Any]],
        *,
        history: bool,
    ) -> tuple[dict[str, JobInfo], list[str]]:
        """States of the ids whose jobs ``jobs`` describe, and the ids to look for in the
        history (a cluster with no unfinished proc left in the queue)."""
        found: dict[str, JobInfo] = {}
        gone: list[str] = []
        by_cluster: dict[int, dict[int, Mapping[str, Any]]] = {}
        for (c, p), ad in jobs.items():
            by_cluster.setdefault(c, {})[p] = ad
        for native_id, (cluster, proc) in parsed.items():
            procs = by_cluster.get(cluster, {})
            if proc is None:
                ads = [procs[p] for p in sorted(procs)]
            else:
                ads = [procs[proc]] if proc in procs else []
            try:
                infos = [job_info_from_ad(ad) for ad in ads]
            except DriverError as exc:
                log.warning("HTCondor job %s: %s", native_id, exc)
                continue
            if not infos:
                if not history:
                    gone.append(native_id)
                continue
            if proc is None and not history and all(i.finished for i in infos):
                gone.append(native_id)  # its other procs may be in the history
                continue
            found[native_id] = infos[0] if proc is not None else _worst(infos)
        return found, gone

    def status(self, native_id: str) -> JobInfo:
        return self.query_status(native_id)

    def query_status(self, native_id: str) -> JobInfo:
        info = self.bulk_status([self._check_id(native_id)]).get(native_id)
        if info is None:
            return JobInfo(
                JobStatus.COMPLETED,
                exit_reason="job no longer known to HTCondor (exit status unknown)",
            )
        return info

    # ------------------------------------------------------------------ cancel, hold, resume
    def _act(self, action: str, native_id: str, reason: str | None = None) -> None:
        result = self._call("act", action=action, constraint=_constraint(native_id), reason=reason)
        if not result.get("TotalSuccess") and action != "Remove":
            raise DriverError(f"HTCondor refused to {action.lower()} job {native_id}: {result}")

    def cancel(self, native_id: str) -> None:
        info = self.query_status(self._check_id(native_id))
        if info.finished:
            return
        self._act("Remove", native_id, CANCEL_REASON)
        deadline = time.monotonic() + self.settings.cancel_wait_s
        while time.monotonic() < deadline:  # until the job's processes are gone
            if not self._call("query", constraint=_constraint(native_id), projection=["JobStatus"]):
                break
            time.sleep(0.2)

    def hold(self, native_id: str) -> None:
        info = self.query_status(self._check_id(native_id))
        if info.status is JobStatus.HELD:
            return
        if info.finished:
            raise DriverError(f"HTCondor job {native_id} cannot be held: it is {info.status.name}")
        self._act("Hold", native_id, "held through the GAHP server (BLAH_JOB_HOLD)")

    def resume(self, native_id: str) -> None:
        info = self.query_status(self._check_id(native_id))
        if info.status is not JobStatus.HELD:
            raise DriverError(f"HTCondor job {native_id} is not held: it is {info.status.name}")
        action = "Continue" if info.hold_reason == "suspended" else "Release"
        self._act(action, native_id)

    def ping(self) -> None:
        self._call("ping", timeout=min(self.settings.schedd_timeout, 30.0))

    async def aclose(self) -> None:
        self._helper.close()

    def close(self) -> None:
        """Stop the helper process (a later call starts it again)."""
        self._helper.close()


def _by_job(ads: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], Mapping[str, Any]]:
    out: dict[tuple[int, int], Mapping[str, Any]] = {}
    for ad in ads:
        cluster, proc = ad.get("ClusterId"), ad.get("ProcId")
        if isinstance(cluster, int) and isinstance(proc, int):
            out[(cluster, proc)] = ad
    return out
