"""Value types shared by every job driver: what to run, what became of it, and errors."""

from __future__ import annotations

import collections
import enum
import os
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

__all__ = [
    "DriverError",
    "FinalStates",
    "JobInfo",
    "JobSpec",
    "JobStatus",
    "job_slots",
    "refuse_requests",
    "untracked_environ",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class DriverError(Exception):
    """A driver could not do what was asked; the message says why (and quotes the batch
    system's own error output when there was one). The root of gahp_lrms's exceptions."""


class JobStatus(enum.IntEnum):
    """Job states, numbered as BLAH reports them."""

    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5


def _no_nul(value: str, what: str) -> str:
    if "\0" in value:
        raise ValueError(f"{what} contains a NUL character")
    return value


def _opt_path(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)


def _to_args(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("arguments must be a sequence of strings, not one string")
    return tuple(value)


def _to_env(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


def _check_args(_inst: Any, _attr: Any, value: tuple[str, ...]) -> None:
    for arg in value:
        if not isinstance(arg, str):
            raise TypeError(f"argument {arg!r} is not a string")
        _no_nul(arg, "an argument")


def _check_env(_inst: Any, _attr: Any, value: Mapping[str, str]) -> None:
    for name, val in value.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        if not isinstance(val, str):
            raise TypeError(f"environment value of {name} is not a string")
        _no_nul(val, f"environment value of {name}")


def _check_strings(inst: JobSpec, _attr: Any, _value: Any) -> None:
    for name in ("executable", "stdin", "stdout", "stderr", "workdir", "queue", "project", "name"):
        value = getattr(inst, name)
        if value is not None:
            _no_nul(value, name)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _to_lines(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("directives must be a sequence of lines, not one string")
    return tuple(value)


def _check_directives(_inst: Any, _attr: Any, value: tuple[str, ...]) -> None:
    for line in value:
        if not isinstance(line, str):
            raise TypeError(f"directive {line!r} is not a string")
        if any(c in line for c in "\n\r\0"):
            raise ValueError(f"directive {line!r} is not one line")


_positive = attrs.validators.optional(attrs.validators.gt(0))

_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}\Z")
_ARG_FORBIDDEN = re.compile("[\"'\\\\#\x00-\x1f\x7f]")
MAX_EXTRA_ARGS = 64


def _check_name(_inst: Any, attr: Any, value: str | None) -> None:
    if value is not None and not _NAME.match(value):
        raise ValueError(f"{attr.name} {value!r} is not a plain name ([A-Za-z0-9_.+-]{{1,64}})")


def _check_extra_args(_inst: Any, _attr: Any, value: tuple[str, ...]) -> None:
    if len(value) > MAX_EXTRA_ARGS:
        raise ValueError(f"more than {MAX_EXTRA_ARGS} extra submit arguments")
    for arg in value:
        if not isinstance(arg, str) or not arg:
            raise ValueError(f"extra submit argument {arg!r} is empty or not a string")
        if _ARG_FORBIDDEN.search(arg):
            raise ValueError(
                f"extra submit argument {arg!r} has a quote, backslash, '#' or control character"
            )
    if value and not value[0].startswith("-"):
        raise ValueError(f"extra submit arguments must start with an option, not {value[0]!r}")


@attrs.frozen
class JobSpec:
    """What to run.  Paths may be relative to ``workdir``; ``None`` means the batch system's
    default (for the working directory: the directory the driver submits from, for the
    standard streams: ``/dev/null``).  The job's environment is the submitting process's
    environment plus ``environment`` (which wins)."""

    executable: str = attrs.field(validator=attrs.validators.min_len(1))
    arguments: tuple[str, ...] = attrs.field(default=(), converter=_to_args, validator=_check_args)
    environment: Mapping[str, str] = attrs.field(
        factory=dict, converter=_to_env, validator=_check_env, hash=False
    )
    stdin: str | None = attrs.field(default=None, converter=_opt_path)
    stdout: str | None = attrs.field(default=None, converter=_opt_path)
    stderr: str | None = attrs.field(default=None, converter=_opt_path)
    workdir: str | None = attrs.field(default=None, converter=_opt_path)
    queue: str | None = None
    project: str | None = None
    memory_mb: int | None = attrs.field(default=None, validator=_positive)
    runtime_s: int | None = attrs.field(default=None, validator=_positive)
    """Wall-clock limit in seconds (batch systems round it up to whole minutes)."""
    nodes: int | None = attrs.field(default=None, validator=_positive)
    cpus_per_node: int | None = attrs.field(default=None, validator=_positive)
    """CPUs to reserve on each node (not the number of processes: see ``count``)."""
    count: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    """Number of instances of the executable to run (Ninf-G ``count``)."""
    start_held: bool = False
    name: str | None = attrs.field(default=None, validator=_check_strings)
    transfer_input: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """Input files to stage (drivers on a shared filesystem leave them where they are)."""
    transfer_output: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """Output files to bring back into ``workdir`` (ditto)."""
    options: Mapping[str, str] = attrs.field(factory=dict, converter=_to_env, hash=False)
    """Driver-specific settings from the submit description (e.g. a BOINC project URL)."""
    gpus: int | None = attrs.field(default=None, validator=_positive)
    """GPUs for the job (in all, on its first node when the batch system counts per node)."""
    gpu_model: str | None = attrs.field(default=None, validator=_check_name)
    gpu_mode: str | None = attrs.field(default=None, validator=_check_name)
    mics: int | None = attrs.field(default=None, validator=_positive)
    """Intel MIC (Xeon Phi) coprocessors."""
    whole_nodes: bool = False
    """The job's nodes (``nodes``, default 1) are its alone."""
    extra_args: tuple[str, ...] = attrs.field(
        default=(), converter=_to_args, validator=_check_extra_args
    )
    """The user's own submit options (HTCondor's ``batch_extra_submit_args``), already split
    into words; each is checked (no quote, backslash, ``#`` or control character; the first
    is an option).  The batch-script drivers write them on ONE directive line of their own
    prefix (see :func:`gahp_lrms.script.directive_line`), never on a command line or into a
    shell; fork and boinc refuse them."""
    directives: tuple[str, ...] = attrs.field(
        default=(), converter=_to_lines, validator=_check_directives
    )
    """Lines for the head of the batch script, verbatim, one line each (e.g. ``#SBATCH
    --partition=short`` from a site's local-submit-attributes script).  TRUSTED text: never put
    user strings here.  The batch-script drivers (slurm, pbs, lsf) write them right after the
    ``#!`` line, where the submit command reads directives; sge translates ``#$`` lines to a
    per-submission prefix (directives are otherwise off); fork and boinc run no batch script
    and ignore them."""


@attrs.frozen
class JobInfo:
    """What a driver knows about a job; every field but ``status`` is ``None`` when unknown.

    ``exit_signal`` is set (and ``exit_code`` is ``None``) when the job was killed by a signal.
    Times are in seconds.
    """

    status: JobStatus
    exit_code: int | None = None
    exit_signal: int | None = None
    exit_reason: str | None = None
    wallclock_s: float | None = None
    user_cpu_s: float | None = None
    sys_cpu_s: float | None = None
    worker_node: str | None = None
    hold_reason: str | None = None

    @property
    def finished(self) -> bool:
        """True once the job can change no more (COMPLETED or REMOVED)."""
        return self.status in (JobStatus.COMPLETED, JobStatus.REMOVED)


def refuse_requests(spec: JobSpec, system: str) -> None:
    """Raise :class:`DriverError` when ``spec`` asks for what ``system`` (a driver without a
    batch system: fork, boinc) cannot give: GPUs, MICs, whole nodes, extra submit options."""
    asked = [
        ("GPUs (GPUNumber/GPUModel/GPUMode)", spec.gpus or spec.gpu_model or spec.gpu_mode),
        ("MIC coprocessors (MICNumber)", spec.mics),
        ("whole nodes (WholeNodes)", spec.whole_nodes),
        ("extra submit arguments (BatchExtraSubmitArgs)", spec.extra_args),
    ]
    names = [what for what, value in asked if value]
    if names:
        raise DriverError(f"{system} cannot give a job {', '.join(names)}")


def job_slots(spec: JobSpec) -> int:
    """Slots a job reserves: ``nodes * cpus_per_node``, at least ``count``."""
    return max((spec.nodes or 1) * (spec.cpus_per_node or 1), spec.count)


class FinalStates:
    """The final states of finished jobs (they never change), by job id, the newest ``limit``
    kept: a driver answers them again without a command, and a long-running server does not
    grow with every job it has seen finish (HTCondor stops asking about a job once it got its
    final state).  A job dropped here is asked of the batch system again.  Not locked: the
    driver's lock guards it."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._states: collections.OrderedDict[str, JobInfo] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, native_id: str) -> JobInfo | None:
        return self._states.get(native_id)

    def __setitem__(self, native_id: str, info: JobInfo) -> None:
        self._states[native_id] = info
        self._states.move_to_end(native_id)
        while len(self._states) > self.limit:
            self._states.popitem(last=False)

    def pop(self, native_id: str, default: JobInfo | None = None) -> JobInfo | None:
        return self._states.pop(native_id, default)


TRACKING_PREFIX = "_CONDOR_ANCESTOR_"


def untracked_environ() -> dict[str, str]:
    """This process's environment without HTCondor's process-tracking markers
    (``_CONDOR_ANCESTOR_<pid>``, which the gridmanager's environment carries): a job that
    inherits them is one of the schedd's processes to HTCondor's procd, which kills it when
    the schedd restarts, on a host that runs both."""
    return {k: v for k, v in os.environ.items() if not k.startswith(TRACKING_PREFIX)}
