"""Ninf-G jobs on a gahp_lrms driver: creation, status polling, notifications, cancel.

One Ninf-G job of ``count`` N is N driver jobs, submitted as one unit
(:meth:`~gahp_lrms.Driver.submit_many`: one HTCondor cluster of N procs, else N
submissions), each writing its own output files in a private scratch directory. Its status
is the least advanced of its processes' (PENDING until every one has started, DONE once
every one has ended, a removed one counting as ended); when all have ended, the outputs are
concatenated into the client's redirect files and only then is DONE notified. Every job
gets exactly one terminal notification, and none after EXIT.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from gahp_core import Refused, private_dir
from gahp_lrms import Driver, DriverError, JobInfo, JobSpec, JobStatus
from gahp_ninfg.attributes import AttributeProblem, JobRequest, parse_attributes

log = logging.getLogger("gahp.ninfg.jobs")

STATUS_FAILURES_BEFORE_FAILED = 5


class Status(enum.Enum):
    """Ninf-G job states (they only move forward)."""

    PENDING = "PENDING"
    ACTIVE = "ACTIVE"
    DONE = "DONE"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (Status.DONE, Status.FAILED)


@attrs.define
class NinfgJob:
    """A job the client knows by ``id``."""

    id: str
    reqid: str
    scratch: Path
    request: JobRequest | None = None
    status: Status = Status.PENDING
    natives: list[str] = attrs.field(factory=list)
    destroy: asyncio.Event = attrs.field(factory=asyncio.Event)
    announced: bool = False  # CREATE_NOTIFY S sent
    unit: bool = False  # ``id`` is the driver's id of all of ``natives`` (one cancel)


class JobManager:
    """All jobs of one invoke server."""

    def __init__(
        self,
        driver: Driver,
        run_in_worker: Callable[..., Awaitable[Any]],
        spawn: Callable[[Any], Any],
        notify: Callable[[Sequence[str]], None],
        default_polling: float,
        scratch_root: Path | None = None,
        unit_id: Callable[[Sequence[str]], str | None] | None = None,
        spec_extras: Callable[[JobRequest], Mapping[str, Any]] | None = None,
    ) -> None:
        """``unit_id``: the job id the client is given, from the native ids of its
        processes (e.g. their HTCondor cluster id), which the driver also cancels as one
        (``Driver.cancel(unit id)`` removes every process); None, or a None answer (or an
        id already in use): this server's own ``<driver>.<pid>.<serial>``.
        ``spec_extras``: further :class:`~gahp_lrms.JobSpec` fields for a request's
        processes (e.g. its ``condor_option`` lines); it raises :class:`AttributeProblem`
        to refuse the request. Without it, ``condor_option`` lines are ignored (logged)."""
        self.driver = driver
        self.run_in_worker = run_in_worker
        self.spawn = spawn
        self.notify = notify
        self.default_polling = default_polling
        self.scratch_root = Path(scratch_root or tempfile.mkdtemp(prefix="ng-invoke-"))
        self.unit_id = unit_id
        self.spec_extras = spec_extras
        self.jobs: dict[str, NinfgJob] = {}
        self._serial = itertools.count(1)
        self._prefix = f"{driver.name}.{os.getpid()}"
        self._closing = False
        self._submits: set[asyncio.Future[Any]] = set()

    # ---- requests (called on the event loop; never block) -------------------------------------

    def create(self, reqid: str, pairs: Sequence[tuple[str, str]]) -> None:
        """Accept a JOB_CREATE: the job is created in the background."""
        jid = f"{self._prefix}.{next(self._serial)}"
        job = NinfgJob(id=jid, reqid=reqid, scratch=self.scratch_root / jid)
        self.jobs[jid] = job
        self.spawn(self._run(job, pairs))

    def status(self, jid: str) -> str:
        job = self.jobs.get(jid)
        if job is None or not job.announced:
            raise Refused(f"no job {jid}")
        return job.status.value

    def destroy(self, jid: str) -> None:
        """Cancel the job if it runs; forget it once its terminal state is sent."""
        job = self.jobs.get(jid)
        if job is None or not job.announced:
            raise Refused(f"no job {jid}")
        job.destroy.set()
        if job.status.terminal:
            self._forget(job)

    def _forget(self, job: NinfgJob) -> None:
        if self.jobs.pop(job.id, None) is None:
            return
        self.spawn(self._forget_natives(job))

    async def _forget_natives(self, job: NinfgJob) -> None:
        for native in job.natives:
            try:
                await self.driver.forget(native)
            except DriverError as exc:
                log.debug("job %s: forgetting %s: %s", job.id, native, exc)

    # ---- the life of a job ----------------------------------------------------------------

    async def _run(self, job: NinfgJob, pairs: Sequence[tuple[str, str]]) -> None:
        try:
            job.request = parse_attributes(pairs)
            specs = await self.run_in_worker(self._prepare, job)
            await self._submit(job, specs)
        except (AttributeProblem, DriverError, OSError) as exc:
            log.warning("job %s (request %s) not created: %s", job.id, job.reqid, exc)
            await self._cancel_natives(job)
            self._cleanup(job)
            del self.jobs[job.id]
            self.notify(("CREATE_NOTIFY", job.reqid, "F", _one_line(exc)))
            return
        self._rename(job)
        job.announced = True
        log.info("job %s: %d process(es) %s", job.id, len(job.natives), " ".join(job.natives))
        self.notify(("CREATE_NOTIFY", job.reqid, "S", job.id))
        try:
            await self._watch(job)
        finally:
            if not job.status.terminal:  # cancelled at shutdown
                await asyncio.shield(self._cancel_natives(job))
            self._cleanup(job)
        if job.destroy.is_set():
            self._forget(job)

    async def _submit(self, job: NinfgJob, specs: Sequence[JobSpec]) -> None:
        """Submit the processes as one unit; their ids are recorded even if this task is
        cancelled meanwhile, so the shutdown sweep finds them."""
        if self._closing:
            raise DriverError("the invoke server is shutting down")
        future = asyncio.ensure_future(self.driver.submit_many(specs))
        self._submits.add(future)

        def record(done: asyncio.Future[Any]) -> None:
            self._submits.discard(done)
            if not done.cancelled() and done.exception() is None:
                job.natives.extend(done.result())

        future.add_done_callback(record)
        await asyncio.shield(future)

    def _rename(self, job: NinfgJob) -> None:
        """Give the job the id :attr:`unit_id` makes of its processes' ids, if any."""
        if self.unit_id is None:
            return
        new = self.unit_id(job.natives)
        if not new or new == job.id or new in self.jobs:
            return
        del self.jobs[job.id]
        log.debug("job %s is %s", job.id, new)
        job.id = new
        job.unit = True
        self.jobs[new] = job

    def _prepare(self, job: NinfgJob) -> list[JobSpec]:
        """Scratch directory, staged executable, auth number file; one spec per process."""
        req = job.request
        assert req is not None
        if req.backend != "NORMAL":
            raise AttributeProblem(
                f"backend {req.backend} is not supported by this invoke server (NORMAL only)"
            )
        extras: Mapping[str, Any] = {}
        if self.spec_extras is not None:
            extras = self.spec_extras(req)
        elif req.condor_options:
            log.warning(
                "job %s: %d condor_option line(s) ignored (not a Condor invoke server)",
                job.id,
                len(req.condor_options),
            )
        private_dir(self.scratch_root)
        job.scratch.mkdir(mode=0o700)
        exe = Path(req.executable)
        if req.staging:
            if not exe.is_file():
                raise AttributeProblem(f"executable {exe} to stage does not exist")
            staged = job.scratch / exe.name
            shutil.copyfile(exe, staged)
            staged.chmod(0o700)
            exe = staged
        elif not (exe.is_file() and os.access(exe, os.X_OK)):
            raise AttributeProblem(f"executable {exe} does not exist or is not executable")
        args = list(req.arguments)
        if req.auth_number is not None:
            auth = job.scratch / "auth_number"
            fd = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(req.auth_number + "\n")
            args.append(f"--authNumberFile={auth}")
        workdir = req.work_directory or str(job.scratch)
        if not Path(workdir).is_dir():
            raise AttributeProblem(f"work_directory {workdir} does not exist")
        specs = []
        for i in range(req.count):
            specs.append(
                JobSpec(
                    executable=str(exe),
                    arguments=tuple(args),
                    environment=req.environment,
                    stdout=str(job.scratch / f"stdout.{i}") if req.stdout_file else os.devnull,
                    stderr=str(job.scratch / f"stderr.{i}") if req.stderr_file else os.devnull,
                    workdir=workdir,
                    queue=req.queue,
                    project=req.project,
                    memory_mb=req.max_memory_mb,
                    runtime_s=req.max_wall_minutes * 60 if req.max_wall_minutes else None,
                    nodes=req.host_count,
                    name=f"ninfg-{job.id}",
                    **extras,
                )
            )
        return specs

    async def _watch(self, job: NinfgJob) -> None:
        req = job.request
        assert req is not None
        interval = req.status_polling or self.default_polling
        await self.driver.limit_status_interval(interval)
        failures = 0
        cancelled = False
        while True:
            if job.destroy.is_set() and not cancelled:
                cancelled = True
                await self._cancel_natives(job)
            try:
                infos: list[JobInfo] = list(
                    await asyncio.gather(*(self.driver.status(n) for n in job.natives))
                )
                failures = 0
            except DriverError as exc:
                failures += 1
                log.warning("job %s: status failed (%d): %s", job.id, failures, exc)
                if failures >= STATUS_FAILURES_BEFORE_FAILED:
                    await self._cancel_natives(job)
                    self._set(job, Status.FAILED, f"batch system not answering: {exc}")
                    return
                infos = []
            if infos:
                started = all(i.status not in (JobStatus.IDLE, JobStatus.HELD) for i in infos)
                if all(i.finished for i in infos):
                    await self.run_in_worker(self._collect_outputs, job)
                    if job.status is Status.PENDING and all(_ran(i) for i in infos):
                        self._set(job, Status.ACTIVE, "")  # it ran between two polls
                    self._set(job, Status.DONE, _summary(infos))
                    return
                if started and job.status is Status.PENDING:
                    self._set(job, Status.ACTIVE, "")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.destroy.wait(), timeout=interval)

    def _set(self, job: NinfgJob, status: Status, text: str) -> None:
        job.status = status
        log.info("job %s: %s %s", job.id, status.value, text)
        fields = ["STATUS_NOTIFY", job.id, status.value]
        if text:
            fields.append(text)
        self.notify(fields)

    def _collect_outputs(self, job: NinfgJob) -> None:
        """Concatenate the processes' outputs, in order, into the client's redirect files."""
        req = job.request
        assert req is not None
        for target, stem in ((req.stdout_file, "stdout"), (req.stderr_file, "stderr")):
            if not target:
                continue
            # Into the client's own file: its mode (0600) and inode stay as they are.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                for i in range(len(job.natives)):
                    part = job.scratch / f"{stem}.{i}"
                    if part.exists():
                        with open(part, "rb") as src:
                            shutil.copyfileobj(src, out)

    async def _cancel_natives(self, job: NinfgJob) -> None:
        async def cancel(native: str) -> None:
            try:
                await self.driver.cancel(native)
            except DriverError as exc:
                log.warning("job %s: cancelling %s failed: %s", job.id, native, exc)

        await asyncio.gather(*(cancel(n) for n in ([job.id] if job.unit else job.natives)))

    def _cleanup(self, job: NinfgJob) -> None:
        shutil.rmtree(job.scratch, ignore_errors=True)

    # ---- shutdown (EXIT, stdin EOF): cancel everything, notify nothing ---------------------

    async def shutdown(self) -> None:
        """Refuse new submissions, let those under way finish, then cancel every job that
        has not ended (also one cancelled in mid-submit)."""
        self._closing = True
        if self._submits:
            await asyncio.wait(list(self._submits))
        unfinished = [j for j in self.jobs.values() if not j.status.terminal]
        await asyncio.gather(*(self._cancel_natives(j) for j in unfinished))
        for job in unfinished:
            self._cleanup(job)
        shutil.rmtree(self.scratch_root, ignore_errors=True)
        await self.driver.aclose()


def _summary(infos: Sequence[JobInfo]) -> str:
    codes = []
    for info in infos:
        if info.status is JobStatus.REMOVED:
            codes.append("cancelled")
        elif info.exit_signal is not None:
            codes.append(f"signal {info.exit_signal}")
        elif info.exit_code is not None:
            codes.append(f"exit {info.exit_code}")
        else:
            codes.append("ended")
    return ", ".join(codes)


def _ran(info: JobInfo) -> bool:
    """Whether a finished process had started: it ended with an exit status or signal."""
    return info.status is JobStatus.COMPLETED and (
        info.exit_code is not None or info.exit_signal is not None
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
