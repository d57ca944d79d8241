"""The driver interface and the one way drivers run external commands.

The API callers use is :class:`Driver`: asynchronous, every method awaited on the server's
event loop (``await driver.submit(spec)``, ``await driver.status(id)``, ...), like httpx's
``AsyncClient``. A driver is one of two kinds:

* native: a :class:`Driver` subclass whose coroutines await their own I/O (``boinc``);
* blocking: a :class:`BlockingDriver` subclass (:class:`CommandDriver` for command-line
  batch systems: slurm, pbs, sge, lsf; also fork) written as plain methods with the same
  names (``submit``, ``status``, ``cancel``, ``hold``, ``resume``, ``ping``; optionally
  ``submit_many``, ``bulk_status``, ``forget``, ``reported``, ``limit_status_interval``)
  that may block.

A blocking driver is adapted once, here, by :class:`ThreadedDriver` (:func:`as_driver`;
:func:`gahp_lrms.get_driver` does it): each call runs in a worker thread (the server's
bounded pool), and the status registry lives on the loop, in the adapter: after ``submit``
the job is tracked, after ``cancel``/``hold``/``resume`` its next status is asked directly,
so the driver itself never touches the registry. A driver with a bulk query declares it
(``features = Features(bulk_status=True)``); nothing is inferred from what it overrides.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import enum
import logging
import os
import re
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import attrs

from gahp_core import ConfigError, load_settings, open_private, private_dir, setting_names
from gahp_lrms.config import DEFAULT_TIMEOUT, CommandConfig, DriverConfig
from gahp_lrms.model import (
    DriverError,
    FinalStates,
    JobInfo,
    JobSpec,
    JobStatus,
    untracked_environ,
)
from gahp_lrms.registry import DriverRegistry

__all__ = [
    "DEFAULT_TIMEOUT",
    "BlockingDriver",
    "CancelMark",
    "CommandDriver",
    "Driver",
    "Features",
    "RunInWorker",
    "Submission",
    "ThreadedDriver",
    "WorkdirRule",
    "as_driver",
    "driver_settings",
    "run_command",
]


def driver_settings(
    cls: type[DriverConfig],
    config: Mapping[str, Any],
    name: str,
    extra_keys: frozenset[str] = frozenset(),
    prefix: str = "",
) -> Any:
    """``config`` read as the settings class ``cls`` of driver ``name``; keys in
    ``extra_keys`` are left to the driver. A bad key is a :class:`DriverError` naming it
    (as ``prefix + key``, else after ``NAME driver:``)."""
    try:
        return load_settings(
            cls, {k: v for k, v in config.items() if k not in extra_keys}, prefix=prefix
        )
    except ConfigError as exc:
        raise DriverError(f"{exc}" if prefix else f"{name} driver: {exc}") from None


RunInWorker = Callable[..., Awaitable[Any]]
"""``await run_in_worker(fn, *args)``: ``fn(*args)`` run in a worker thread (by default
:func:`asyncio.to_thread`; a GAHP server passes its bounded worker pool's)."""


class _Options:
    """A driver's name, options and state directory (what both kinds of driver share)."""

    name: str
    config_class: ClassVar[type[DriverConfig]] = DriverConfig
    """The driver's options, typed (see :mod:`gahp_lrms.config`): built in ``__init__`` as
    :attr:`settings`; an unknown key or a wrong type is refused there."""
    config_keys: ClassVar[frozenset[str]] = frozenset()
    """Further keys the driver reads from :attr:`config` itself (untyped)."""
    settings: DriverConfig

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        self.config: Mapping[str, Any] = dict(config)
        """The options as given."""
        extra = frozenset(self.config_keys) - setting_names(self.config_class)
        self.settings = driver_settings(self.config_class, self.config, self.name, extra)
        self.state_dir = Path(state_dir)

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """Every option key the driver accepts."""
        return setting_names(cls.config_class) | cls.config_keys


class Driver(_Options, abc.ABC):
    """A local batch system as seen by a GAHP server: the API callers use, asynchronous
    (as httpx's ``AsyncClient``). Every method is awaited on the server's event loop and
    must not block it.

    Native ids contain no whitespace and stay valid for a new driver object built with the
    same configuration and ``state_dir`` (a restarted server).

    An id the batch system no longer knows (or never knew) gets a definite answer:
    ``status`` returns ``COMPLETED`` with ``exit_code=None`` and an ``exit_reason`` saying so;
    ``cancel`` of such a job, or of a finished one, does nothing.  ``hold``/``resume`` of a job
    that cannot be held/resumed raise :class:`DriverError`.  A batch system that does not
    answer (down, timeout) always raises :class:`DriverError`, never a guessed status.

    Two kinds of driver implement it:

    * a native one subclasses :class:`Driver` and awaits its own I/O (the ``boinc`` driver:
      HTTP on the server's loop, no thread of its own);
    * a blocking one subclasses :class:`BlockingDriver` (or :class:`CommandDriver`) and
      writes the same methods as plain functions that may block for a command's timeout.
      It is adapted once, here, by :class:`ThreadedDriver` (which :func:`as_driver` and
      :func:`gahp_lrms.get_driver` put around it): each call runs in a worker thread, and
      the status registry (see :mod:`gahp_lrms.registry`) lives on the loop, fed by the
      driver's ``bulk_status`` and ``status`` when its :attr:`BlockingDriver.features`
      declare ``bulk_status``.
    """

    @abc.abstractmethod
    async def submit(self, spec: JobSpec) -> str:
        """Start or queue the job; return its native id."""

    async def submit_many(self, specs: Sequence[JobSpec]) -> list[str]:
        """Submit ``specs`` as one unit where the batch system has one (an HTCondor cluster
        of ``len(specs)`` procs); return their native ids, in order. All or none: when one
        fails, those already submitted are cancelled and the error is raised. By default
        :meth:`submit` for each in turn."""
        natives: list[str] = []
        try:
            for spec in specs:
                natives.append(await self.submit(spec))
        except BaseException:
            for native in natives:
                with contextlib.suppress(DriverError):
                    await self.cancel(native)
            raise
        return natives

    @abc.abstractmethod
    async def status(self, native_id: str) -> JobInfo:
        """Current state of a job."""

    @abc.abstractmethod
    async def cancel(self, native_id: str) -> None:
        """Remove the job, killing it if it runs; afterwards its status is REMOVED."""

    @abc.abstractmethod
    async def hold(self, native_id: str) -> None:
        """Keep a queued job from starting (or suspend a running one where supported)."""

    @abc.abstractmethod
    async def resume(self, native_id: str) -> None:
        """Undo :meth:`hold`."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Return if the batch system answers; raise :class:`DriverError` otherwise."""

    async def limit_status_interval(self, seconds: float) -> None:  # noqa: B027 (optional)
        """A caller polls every ``seconds``: answer :meth:`status` with states at most
        that old (a driver that caches states shortens its cache). By default nothing."""

    async def forget(self, native_id: str) -> None:  # noqa: B027 (optional)
        """The caller will not ask about this (finished or cancelled) job again: drop
        what is kept of it. By default nothing."""

    async def reported(self, native_id: str) -> None:  # noqa: B027 (optional)
        """The job's final status has been answered to the client: remove the files kept
        for it that hold its secrets or grow with every job (a cached final state may
        stay, so that a repeated question still gets the same answer). By default
        nothing."""

    async def aclose(self) -> None:  # noqa: B027 (optional, empty by default)
        """Called once when the server stops, on its event loop: end waits and release
        what the driver holds. Jobs must survive it (a new driver object on the same
        ``state_dir`` takes them over). By default nothing."""


@attrs.frozen
class Features:
    """What a :class:`BlockingDriver` offers beyond the required methods, declared by the
    driver (its :attr:`~BlockingDriver.features`), not guessed from what it overrides."""

    bulk_status: bool = False
    """It defines :meth:`~BlockingDriver.bulk_status` (many jobs, few queries): its
    states come from a status registry, unless its options say ``status_registry =
    false`` (the options must then be a :class:`~gahp_lrms.config.RegistryConfig`)."""


class BlockingDriver(_Options, abc.ABC):
    """A driver written as blocking functions: the methods of :class:`Driver`, each a plain
    function that may block for a command's timeout (it runs in a worker thread, see
    :class:`ThreadedDriver`; several run at once, so a driver guards its own state).

    :meth:`status` answers for one job, asking the batch system (or the driver's records);
    a driver that can describe many jobs with one query also defines :meth:`bulk_status`
    and declares it in :attr:`features`: the adapter then answers status from a
    :class:`~gahp_lrms.registry.StatusRegistry` built from the two.
    """

    features: ClassVar[Features] = Features()
    """What the driver offers beyond the required methods."""

    @abc.abstractmethod
    def submit(self, spec: JobSpec) -> str:
        """Start or queue the job; return its native id."""

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str]:
        """Submit ``specs`` as one unit where the batch system has one (an HTCondor cluster
        of ``len(specs)`` procs); return their native ids, in order. All or none: when one
        fails, those already submitted are cancelled and the error is raised. By default
        :meth:`submit` for each in turn."""
        natives: list[str] = []
        try:
            for spec in specs:
                natives.append(self.submit(spec))
        except BaseException:
            for native in natives:
                with contextlib.suppress(DriverError):
                    self.cancel(native)
            raise
        return natives

    @abc.abstractmethod
    def status(self, native_id: str) -> JobInfo:
        """Current state of a job (for this job alone)."""

    @abc.abstractmethod
    def cancel(self, native_id: str) -> None:
        """Remove the job, killing it if it runs; afterwards its status is REMOVED."""

    @abc.abstractmethod
    def hold(self, native_id: str) -> None:
        """Keep a queued job from starting (or suspend a running one where supported)."""

    @abc.abstractmethod
    def resume(self, native_id: str) -> None:
        """Undo :meth:`hold`."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Return if the batch system answers; raise :class:`DriverError` otherwise."""

    def bulk_status(self, native_ids: Sequence[str]) -> Mapping[str, JobInfo]:
        """States of many jobs from as few queries as possible (at most 3, whatever their
        number); ids left out are asked with :meth:`status`. Only called when
        :attr:`features` declare it."""
        raise NotImplementedError(f"{type(self).__name__} declares no bulk_status")

    def limit_status_interval(self, seconds: float) -> None:  # noqa: B027 (optional)
        """As :meth:`Driver.limit_status_interval`; must not block. By default nothing."""

    def forget(self, native_id: str) -> None:  # noqa: B027 (optional)
        """As :meth:`Driver.forget`. By default nothing."""

    def reported(self, native_id: str) -> None:  # noqa: B027 (optional)
        """As :meth:`Driver.reported`. By default nothing."""

    async def aclose(self) -> None:  # noqa: B027 (optional, empty by default)
        """As :meth:`Driver.aclose` (on the event loop). By default nothing."""


class ThreadedDriver(Driver):
    """A :class:`BlockingDriver` as a :class:`Driver`: each call runs in a worker thread
    (``run_in_worker``), the status registry (when the driver declares ``bulk_status``)
    on the caller's event loop. The blocking driver is :attr:`blocking`."""

    def __init__(self, blocking: BlockingDriver, run_in_worker: RunInWorker | None = None) -> None:
        # not Driver.__init__: the options are the blocking driver's, read already
        self.blocking = blocking
        self.name = blocking.name
        self.config = blocking.config
        self.settings = blocking.settings
        self.state_dir = blocking.state_dir
        self._in_worker: RunInWorker = run_in_worker or asyncio.to_thread
        self.statuses = DriverRegistry.of(blocking, self._bulk, self._direct)
        """The driver's status registry (disabled when it has no bulk query)."""

    async def _bulk(self, native_ids: Sequence[str]) -> Mapping[str, JobInfo]:
        return cast(
            "Mapping[str, JobInfo]", await self._in_worker(self.blocking.bulk_status, native_ids)
        )

    async def _direct(self, native_id: str) -> JobInfo:
        return cast("JobInfo", await self._in_worker(self.blocking.status, native_id))

    async def submit(self, spec: JobSpec) -> str:
        native_id = cast("str", await self._in_worker(self.blocking.submit, spec))
        self.statuses.track(native_id)  # its first status can come from the next bulk query
        return native_id

    async def submit_many(self, specs: Sequence[JobSpec]) -> list[str]:
        natives = cast("list[str]", await self._in_worker(self.blocking.submit_many, specs))
        for native_id in natives:
            self.statuses.track(native_id)
        return natives

    async def status(self, native_id: str) -> JobInfo:
        return await self.statuses.status(native_id)

    async def _changing(self, method: Callable[[str], None], native_id: str) -> None:
        """Run a request that changes the job; its next status is asked directly."""
        try:
            await self._in_worker(method, native_id)
        finally:
            self.statuses.invalidate(native_id)

    async def cancel(self, native_id: str) -> None:
        await self._changing(self.blocking.cancel, native_id)

    async def hold(self, native_id: str) -> None:
        await self._changing(self.blocking.hold, native_id)

    async def resume(self, native_id: str) -> None:
        await self._changing(self.blocking.resume, native_id)

    async def ping(self) -> None:
        await self._in_worker(self.blocking.ping)

    async def limit_status_interval(self, seconds: float) -> None:
        self.statuses.limit_interval(seconds)
        self.blocking.limit_status_interval(seconds)

    async def forget(self, native_id: str) -> None:
        self.statuses.forget(native_id)
        await self._in_worker(self.blocking.forget, native_id)

    async def reported(self, native_id: str) -> None:
        await self._in_worker(self.blocking.reported, native_id)

    async def aclose(self) -> None:
        await self.statuses.aclose()
        await self.blocking.aclose()


def as_driver(driver: Driver | BlockingDriver, run_in_worker: RunInWorker | None = None) -> Driver:
    """``driver`` as the asynchronous API: itself, or a blocking one adapted by
    :class:`ThreadedDriver` (its calls run with ``run_in_worker``)."""
    if isinstance(driver, BlockingDriver):
        return ThreadedDriver(driver, run_in_worker)
    return driver


@attrs.frozen
class WorkdirRule:
    """How :meth:`CommandDriver.submit` settles a job's working directory (a relative one
    is always made absolute)."""

    server_default: bool = True
    """A job without one gets the server's (else the batch system's default, e.g. $HOME)."""
    normalise_absolute: bool = False
    """An absolute one is normalised too (``..`` and ``//`` resolved)."""


class CancelMark(enum.Enum):
    """Whether :meth:`CommandDriver.cancel` notes the job in ``state_dir/cancelled`` (see
    ``_record``) before it runs the cancel command, and what a failure of that command does
    to the note."""

    NONE = "none"
    """No note: the batch system tells a cancelled job apart by itself."""
    DROPPED_ON_FAILURE = "dropped-on-failure"
    """Noted; dropped when the cancel command fails."""
    KEPT_ON_FAILURE = "kept-on-failure"
    """Noted; dropped only when the failure says the job is unknown or already over."""


@attrs.frozen
class Submission:
    """How a job is handed to the submit command: its arguments, its standard input (the
    script, or None), the directory it runs in (None: the server's), a file to delete
    once it has run (None: none) and what to append to the printed job id (e.g. Slurm's
    ``@cluster``)."""

    args: Sequence[str]
    input: str | None = None
    cwd: str | os.PathLike[str] | None = None
    remove: str | None = None
    id_suffix: str = ""


class CommandDriver(BlockingDriver):
    """A batch system driven through its command-line tools (Slurm, PBS, Grid Engine, LSF).

    Shared configuration: ``bin_dir`` (where the commands are; default: PATH),
    ``command_timeout`` (s, default 30), ``submit_timeout`` (s, default 60) and
    ``cancel_wait_s`` (how long ``cancel`` waits for a running job to end, default 10).

    The sequences are the base's, the commands and patterns the subclass's:

    * :meth:`submit`: the working directory settled as ``workdir`` (a
      :class:`WorkdirRule`) says, the ``submit_command`` run as :meth:`_submission` says, the
      job id taken from its output (:meth:`_printed_id`, checked against ``job_id``), what
      was known of an earlier job with that id dropped (:meth:`_new_job`), the job tracked.
    * :meth:`cancel`: nothing when :meth:`_cancel_needless`; the job marked as cancelled
      as ``cancel_mark`` (a :class:`CancelMark`; :meth:`_cancel_mark`) says,
      ``cancel_command`` run, its failure tolerated when it says
      the job is unknown or over (``cancel_unknown``, :meth:`_cancel_tolerated`), then a
      wait (at most ``cancel_wait_s``) while :meth:`_not_ended`.
    * :meth:`status`: the id checked, then :meth:`query_status` (the subclass's). A
      subclass that can describe many jobs with one query defines :meth:`bulk_status` and
      declares it (``features = Features(bulk_status=True)``): the adapter
      (:class:`ThreadedDriver`) then answers status from a
      :class:`~gahp_lrms.registry.StatusRegistry` (``state_dir/status-registry.jsonl``)
      unless ``status_registry`` is false.  ``status_interval`` (s, default 5) is how old a
      state may be; ``stale_limit_s`` (s, default 1800) how long the last known states are
      answered while the batch system does not answer.

    The options: :class:`~gahp_lrms.config.CommandConfig`.
    """

    config_class: ClassVar[type[DriverConfig]] = CommandConfig
    common_keys: ClassVar[frozenset[str]] = setting_names(CommandConfig)
    system: ClassVar[str] = ""
    """The batch system's name, in messages."""
    job_id: ClassVar[re.Pattern[str]]
    """The shape of its job ids."""
    submit_command: ClassVar[str] = ""
    cancel_command: ClassVar[tuple[str, ...]] = ()
    cancel_unknown: ClassVar[re.Pattern[str]] = re.compile(r"(?!)")
    """What a failed ``cancel_command`` prints when the job is unknown or already over."""
    workdir: ClassVar[WorkdirRule] = WorkdirRule()
    """How ``submit`` settles a job's working directory."""
    cancel_mark: ClassVar[CancelMark] = CancelMark.NONE
    """Whether ``cancel`` notes the job as cancelled, and what a failed cancel does to it."""
    settings: CommandConfig

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        self.timeout = self.settings.command_timeout
        self.submit_timeout = self.settings.submit_timeout
        self.cancel_wait_s = self.settings.cancel_wait_s
        self.bin_dir: str | Path | None = self.settings.bin_dir
        self.env: dict[str, str] = untracked_environ() | self.settings.environment()
        self.log = logging.getLogger(f"gahp.lrms.{self.name}")
        self._final = FinalStates()  # of finished jobs, for drivers that keep them
        self._lock = threading.Lock()
        self._setup()

    def _setup(self) -> None:  # noqa: B027 (optional, empty by default)
        """Called at the end of ``__init__``: what the subclass sets up from its
        :attr:`settings` (:attr:`env` has the variables they export)."""

    # ------------------------------------------------------------------ submit
    def submit(self, spec: JobSpec) -> str:
        spec = self._with_workdir(spec)
        submission = self._submission(spec)
        try:
            proc = run_command(
                [self.command_path(self.submit_command), *submission.args],
                timeout=self.submit_timeout,
                env=self.env,
                cwd=submission.cwd,
                input=submission.input,
            )
        finally:
            if submission.remove is not None:
                with contextlib.suppress(OSError):
                    os.unlink(submission.remove)
        native_id = self._printed_id(proc.stdout)
        if native_id and submission.id_suffix:
            native_id += submission.id_suffix
        if native_id is None or not self.job_id.match(native_id):
            raise DriverError(f"{self.submit_command} printed no job id: {proc.stdout.strip()!r}")
        self._new_job(native_id)
        return native_id

    def _with_workdir(self, spec: JobSpec) -> JobSpec:
        workdir = spec.workdir
        rule = self.workdir
        if workdir is None and rule.server_default:
            workdir = os.getcwd()  # else the batch system's default (qsub's: $HOME)
        if workdir is not None and (rule.normalise_absolute or not os.path.isabs(workdir)):
            workdir = os.path.abspath(workdir)
        return spec if workdir == spec.workdir else attrs.evolve(spec, workdir=workdir)

    def _submission(self, spec: JobSpec) -> Submission:
        """How ``spec`` (its working directory made absolute) is submitted."""
        raise NotImplementedError(f"{type(self).__name__} defines neither submit nor _submission")

    def _printed_id(self, stdout: str) -> str | None:
        """The job id in the submit command's output (checked against ``job_id``; by
        default the output, stripped)."""
        return stdout.strip()

    def _new_job(self, native_id: str) -> None:
        """The batch system gave ``native_id`` to a new job (ids are given again): what is
        known of an earlier job with it is not this job's."""
        self._unrecord("cancelled", native_id)
        with self._lock:
            self._final.pop(native_id, None)

    # ------------------------------------------------------------------ cancel
    def cancel(self, native_id: str) -> None:
        self._check_id(native_id)
        if self._cancel_needless(native_id):
            return
        mark = self._cancel_mark()
        if mark is not CancelMark.NONE:
            self._record("cancelled", native_id)
        proc = self._run(*self._on_job(self.cancel_command, native_id), check=False)
        if proc.returncode != 0:
            tolerated = self._cancel_tolerated(native_id, proc)
            if mark is CancelMark.DROPPED_ON_FAILURE or (
                mark is CancelMark.KEPT_ON_FAILURE and tolerated
            ):
                self._unrecord("cancelled", native_id)  # not cancelled
            if tolerated:
                return  # unknown, or over meanwhile: it keeps its own exit status
            raise DriverError(command_failure(self.cancel_command, proc))
        with self._lock:
            self._final.pop(native_id, None)
        self._wait_until_not_running(native_id)

    def _cancel_needless(self, native_id: str) -> bool:
        """Whether there is nothing to cancel (the job is over, or unknown). By default
        the cancel command is always run."""
        return False

    def _cancel_mark(self) -> CancelMark:
        """How this cancel notes the job (by default ``cancel_mark``)."""
        return self.cancel_mark

    def _cancel_tolerated(self, native_id: str, proc: subprocess.CompletedProcess[str]) -> bool:
        """Whether the failed cancel command says the job is unknown or already over (by
        default: its output matches ``cancel_unknown``)."""
        return self.cancel_unknown.search(proc.stderr + proc.stdout) is not None

    def _not_ended(self, native_id: str) -> bool:
        """After a cancel: whether the job has yet to end (by default: it is RUNNING)."""
        return self.status(native_id).status is JobStatus.RUNNING

    def _wait_until_not_running(self, native_id: str) -> None:
        """After a cancel: a running job takes a moment to die; wait for it (bounded)."""
        deadline = time.monotonic() + self.cancel_wait_s
        while time.monotonic() < deadline:
            if not self._not_ended(native_id):
                return
            time.sleep(0.2)

    # ------------------------------------------------------------------ status
    def status(self, native_id: str) -> JobInfo:
        """The job's state, asked of the batch system for this job alone."""
        return self.query_status(self._check_id(native_id))

    def query_status(self, native_id: str) -> JobInfo:
        """The state of one job (its id checked), asked of the system for this job alone
        (what the subclass defines, unless it defines :meth:`status` itself)."""
        raise NotImplementedError(f"{type(self).__name__} defines neither status nor query_status")

    # ------------------------------------------------------------------ commands
    def command_path(self, name: str) -> str:
        """Where command ``name`` is: in ``bin_dir`` when configured, else found on PATH."""
        return str(Path(self.bin_dir) / name) if self.bin_dir else name

    def _on_job(self, command: Sequence[str], native_id: str) -> list[str]:
        """``command`` (a name and its leading arguments) applied to job ``native_id`` (by
        default: the id appended)."""
        return [*command, native_id]

    def _run(
        self,
        name: str,
        *args: str,
        check: bool = True,
        timeout: float | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return run_command(
            [self.command_path(name), *args],
            timeout=self.timeout if timeout is None else timeout,
            env=self.env,
            check=check,
            cwd=cwd,
        )

    def _hold_with(
        self, native_id: str, hold: Sequence[str], suspend: Sequence[str] | None, why: str = ""
    ) -> None:
        """Hold a queued job with the ``hold`` command; a running one (also one that
        started meanwhile) with ``suspend``, or refuse with ``why`` when that is None."""
        info = self.status(native_id)
        if info.status is JobStatus.IDLE:
            self._run(*self._on_job(hold, native_id))
            info = self.status(native_id)  # it may have started meanwhile
        if info.status is JobStatus.RUNNING:
            if suspend is None:
                raise DriverError(
                    f"{self.system} job {native_id} is running: cannot hold a running job{why}"
                )
            self._run(*self._on_job(suspend, native_id))
        elif info.status is not JobStatus.HELD:
            raise DriverError(
                f"{self.system} job {native_id} cannot be held: it is {info.status.name}"
            )

    # ------------------------------------------------------------------ job marks
    def _mark(self, kind: str, native_id: str) -> Path:
        """The file that notes job ``native_id`` in ``state_dir/<kind>/``."""
        return self.state_dir / kind / native_id

    def _record(self, kind: str, native_id: str, *, required: bool = True) -> None:
        """Note the job in ``state_dir/<kind>/`` (e.g. ``cancelled``: the server removed
        it, so it is REMOVED, not COMPLETED, once it ends). A mark that cannot be written
        raises :class:`DriverError` when ``required``."""
        path = self._mark(kind, native_id)
        try:
            private_dir(path.parent)
            os.close(open_private(path, os.O_WRONLY | os.O_CREAT))
        except OSError as exc:
            if required:
                raise DriverError(f"cannot record job {native_id} in {path.parent}: {exc}") from exc

    def _unrecord(self, kind: str, native_id: str) -> None:
        """Drop the job's ``kind`` mark, if any."""
        with contextlib.suppress(OSError):
            self._mark(kind, native_id).unlink(missing_ok=True)

    def _cancelled(self, native_id: str) -> bool:
        """Whether the server cancelled the job (see :meth:`_record`)."""
        return self._mark("cancelled", native_id).exists()

    def _check_id(self, native_id: str) -> str:
        if not isinstance(native_id, str) or not self.job_id.match(native_id):
            raise DriverError(f"malformed {self.system} job id {native_id!r}")
        return native_id


def run_command(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (never through a shell) and return the completed process (text output);
    ``input`` is written to its standard input (else it reads ``/dev/null``).

    A missing program, a timeout, or (with ``check``) a non-zero exit status raises
    :class:`DriverError` quoting the command's stderr.
    """
    argv = [os.fspath(a) for a in argv]
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL if input is None else None,
            input=input,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=None if env is None else dict(env),
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError as exc:
        raise DriverError(f"{argv[0]}: command not found ({exc.strerror})") from exc
    except PermissionError as exc:
        raise DriverError(f"{argv[0]}: cannot execute ({exc.strerror})") from exc
    except subprocess.TimeoutExpired as exc:
        raise DriverError(
            f"{Path(argv[0]).name} did not answer within {timeout:g} s (is the batch system down?)"
        ) from exc
    if check and proc.returncode != 0:
        raise DriverError(command_failure(argv, proc))
    return proc


def command_failure(argv: Sequence[str], proc: subprocess.CompletedProcess[str]) -> str:
    """A one-line description of a failed command: its name, status and error output."""
    output = (proc.stderr or "").strip() or (proc.stdout or "").strip() or "no output"
    output = " ".join(output.split())
    if len(output) > 500:
        output = output[:500] + "..."
    return f"{Path(argv[0]).name} failed (exit status {proc.returncode}): {output}"
