"""The ``boinc`` job driver: a BOINC project as a batch system, for blahpd.

HTCondor 10 dropped its ``boinc`` grid type but still speaks BLAH (``grid_resource =
batch boinc``); this driver maps the BLAH job model onto BOINC's with gahp_boinc's
:class:`~gahp_boinc.BoincClient` and its MD5 staging:

- one BLAH job is one BOINC job; Cmd names the BOINC application (its last path component:
  HTCondor sends the executable joined to Iwd);
- submissions that arrive close together for the same project, account, application and
  job parameters go into one BOINC batch: submit checks the job (inputs readable, their
  number as the application's input template wants), records it as *queued* and returns at
  once; a flusher task submits each group after ``batch_window_s`` seconds (or once it
  has ``batch_max_jobs`` jobs) in one submission, after which its jobs are *submitted*.
  A group the project refuses holds exactly its jobs (HELD, with the project's error as
  HoldReason). ``batch_window_s = 0``: one batch per job, submitted before submit returns;
- In and TransferInput are the job's input files, in that order (staged by MD5);
- when BOINC says DONE the outputs are fetched into Iwd (TransferOutput: just those;
  otherwise all), Out receives the first output file and Err the job's stderr, and only
  then is the job COMPLETED (ExitCode, RemoteWallClockTime, RemoteUserCpu);
- a failed job (BOINC ERROR) is COMPLETED with the failed instance's exit status as ExitCode
  (1 when the server does not say), an ExitReason, and what is known of the failure in Err;
  not HELD: BOINC cannot run it again, so there is nothing to release;
- cancel aborts the job alone (REMOVED); hold and resume are refused (BOINC cannot pause a
  job);
- a batch is retired once every job of it is final and its outputs collected.

Status comes from a :class:`~gahp_lrms.registry.StatusRegistry`: one query_batch2 per
project and ``status_interval`` names every tracked batch; jobs it finds DONE or ERROR are
left to the per-job path, which fetches outputs or failure details first.

The driver's methods block (blahpd calls them from its worker pool); everything else is
coroutines on blahpd's event loop (``loop=``): the BOINC client's requests, the batching,
retries and recovery, and the job records (one loop orders all of it: no threads, no
thread locks). blahpd thus keeps one loop and one connection pool; a driver made without one runs
a loop of its own in a thread. At shutdown (:meth:`BoincDriver.aclose`) the calls still
waiting are cancelled and the jobs still queued are left for the next process, which
submits them.

The parts: :mod:`gahp_lrms._boinc_planner` (which jobs share a batch, and when it is due),
:mod:`gahp_lrms._boinc_store` (the records), :mod:`gahp_lrms._boinc_owners` (which process
submits the queued jobs), :mod:`gahp_lrms._boinc_outcome` (what is answered of a job and
left in its directory) and :mod:`gahp_lrms._boinc_loop` (the loop and the one crossing into
it).

What the driver knows of each job is kept under ``state_dir`` (never the authenticator),
so ids stay valid across blahpd restarts, after the batch is retired too; queued jobs found
at start are submitted unless the project already has their batch with them (never twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from gahp_boinc import (
    ArchiveLimits,
    BadAuthenticator,
    BoincClient,
    BoincError,
    CompletedJob,
    FetchRequest,
    JobDetail,
    JobOptions,
    NoSuchBatch,
    NoSuchJob,
    Project,
    RpcError,
    StagingError,
    SubmitRequest,
    Templates,
    UnsafeOutput,
    check_job,
    check_output_name,
)
from gahp_core import ConfigError, error_text, http_url, read_secret_file
from gahp_lrms._boinc_loop import KeyedLock, LoopBridge
from gahp_lrms._boinc_outcome import (
    UNFINISHED,
    deliver_outputs,
    describe_failure,
    job_path,
    record_answer,
    write_err,
)
from gahp_lrms._boinc_owners import Owners
from gahp_lrms._boinc_planner import BatchPlanner, Group, GroupKey, new_batch_name
from gahp_lrms._boinc_store import (
    REPLICATION_ATTRIBUTES,
    BatchRecord,
    JobRecord,
    JobState,
    JobStore,
    replication_kwargs,
)
from gahp_lrms.base import Driver
from gahp_lrms.config import BoincDriverConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus, refuse_requests
from gahp_lrms.registry import RegistryHolder

log = logging.getLogger("gahp.lrms.boinc")

T = TypeVar("T")

TEMPLATE_TTL_S = 60.0
"""Seconds an application's templates are trusted when checking submissions."""


class _NoProject(DriverError):
    """A job's BOINC project cannot be addressed: none configured, or its authenticator
    file unreadable."""


def _read_authenticator(path: str) -> str:
    try:
        return read_secret_file(path, "BOINC authenticator")
    except ConfigError as exc:
        raise _NoProject(str(exc)) from None


def _driver_error(exc: BoincError) -> DriverError:
    """A BOINC client's failure as blahpd reports it."""
    return DriverError(error_text(exc, expected=BoincError))


def _job_inputs(spec: JobSpec, workdir: Path) -> list[tuple[str, str]]:
    """(path, name) of the job's input files: In, then TransferInput."""
    names = (spec.stdin,) if spec.stdin and spec.stdin != os.devnull else ()
    paths = [Path(n) if os.path.isabs(n) else workdir / n for n in (*names, *spec.transfer_input)]
    return [(str(p), p.name) for p in paths]


@attrs.frozen
class _Place:
    """Where a submitted job is: its project (as the job names it) and batch."""

    url: str | None
    authenticator_file: str | None
    batch: str

    @classmethod
    def of(cls, rec: JobRecord) -> _Place:
        assert rec.batch is not None
        return cls(rec.project_url, rec.authenticator_file, rec.batch)


class BoincDriver(RegistryHolder, Driver):
    """Jobs on a BOINC project through its remote-submission RPCs."""

    name = "boinc"
    config_class = BoincDriverConfig
    settings: BoincDriverConfig

    def __init__(
        self,
        config: Mapping[str, Any],
        state_dir: Path,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, state_dir)
        cfg = self.settings
        self.store = JobStore(self.state_dir)
        self.jobs_dir, self.queued_dir = self.store.jobs_dir, self.store.queued_dir
        self.batches_dir = self.store.batches_dir
        self.lease_seconds = cfg.lease_seconds
        self.rpc_timeout = cfg.rpc_timeout
        self.batch_window_s = cfg.batch_window_s
        self.batch_max_jobs = cfg.batch_max_jobs
        self.submit_attempts = cfg.submit_attempts
        self.archive_limits = ArchiveLimits(
            max_bytes=cfg.output_archive_max_bytes,
            max_members=cfg.output_archive_max_members,
            max_ratio=cfg.output_archive_max_ratio,
        )
        self._registry_settings(cfg, "BOINC project")
        verify: bool | str = True
        if cfg.insecure:
            verify = False
        elif cfg.ca_bundle:
            verify = str(cfg.ca_bundle)
        # The client holds the connection pool, the MD5 cache and the submission state
        # (staging lock, retry bookkeeping) for every project; it serves ``loop``.
        self.client = BoincClient(
            timeout=cfg.timeout,
            verify=verify,
            retries=cfg.retries,
            lease_seconds=self.lease_seconds,
        )
        self._bridge = LoopBridge(loop)
        log.debug(
            "the boinc driver runs on %s",
            "an event loop of its own" if self._bridge.own_loop else "the server's event loop",
        )
        # All below is the loop's (touched by coroutines on it only).
        self.planner = BatchPlanner(self.batch_window_s, self.batch_max_jobs)
        self._queued: dict[str, asyncio.Future[None]] = {}  # done once its submission ended
        self._wake = asyncio.Event()  # a group is due earlier than the flusher sleeps
        self._flusher: asyncio.Task[None] | None = None
        self._job_locks = KeyedLock()  # one status or cancel at a time per job
        self._template_locks = KeyedLock()
        self._templates: dict[tuple[str, str], tuple[float, Templates]] = {}
        self._where: dict[str, _Place] = {}  # submitted jobs, as bulk status asks them
        self._bulk_state: dict[str, str] = {}  # DONE or ERROR, from the latest bulk query
        self.owners = Owners(self.state_dir / "owners")
        self.owners_dir = self.owners.dir
        recovering = self.owners.adopt(self.store.queued())
        self.owners.forget_dead()
        if recovering:
            self._bridge.start(self._recover(recovering))

    # ---- plumbing -----------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the driver's coroutines on its loop and wait for the result: the one
        way the blocking methods cross into the loop."""
        return self._bridge.run(coro)

    def _no_answer(self) -> str:
        return f"the BOINC project did not answer in {self.rpc_timeout:g} s"

    async def _rpc(
        self, call: Coroutine[Any, Any, T], passing: tuple[type[BoincError], ...] = ()
    ) -> T:
        """Await one of the client's calls (at most ``rpc_timeout``); its failure as a
        :class:`DriverError`, but for errors of the ``passing`` types (raised as they are,
        for the caller to act on)."""
        try:
            async with asyncio.timeout(self.rpc_timeout):
                return await call
        except TimeoutError:
            raise DriverError(self._no_answer()) from None
        except passing:
            raise
        except BoincError as exc:
            raise _driver_error(exc) from None

    def _project(self, url: str | None, auth_file: str | None) -> Project:
        url, auth_file = self._resolve(url, auth_file)
        return Project(url=url, authenticator=_read_authenticator(auth_file))

    def _resolve(self, url: str | None, auth_file: str | None) -> tuple[str, str]:
        """The project URL (ending in /) and authenticator file a job uses."""
        url = url or self.settings.project_url
        auth_file = auth_file or (
            str(self.settings.authenticator_file) if self.settings.authenticator_file else None
        )
        if not url or not auth_file:
            raise _NoProject(
                "no BOINC project: set project_url and authenticator_file in the boinc "
                "driver's configuration, or BoincProjectUrl/BoincAuthenticatorFile in the job"
            )
        try:
            url = http_url(url, "BOINC project URL")
        except ConfigError as exc:
            raise DriverError(str(exc)) from None
        url = url if url.endswith("/") else f"{url}/"
        return url, auth_file

    def _project_of(self, rec: JobRecord) -> Project:
        return self._project(rec.project_url, rec.authenticator_file)

    async def _templates_for(self, project: Project, app: str) -> Templates:
        """The application's templates, asked at most once per ``TEMPLATE_TTL_S``."""
        key = (project.url, app)
        async with self._template_locks.hold(key):
            cached = self._templates.get(key)
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]
            templates = await self._rpc(self.client.get_templates(app, project=project))
            self._templates[key] = (time.monotonic() + TEMPLATE_TTL_S, templates)
            return templates

    # ---- submission ---------------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> str:
        rec, project, key = self._new_record(spec)
        return self._call(self._queue(rec, project, key))

    def _new_record(self, spec: JobSpec) -> tuple[JobRecord, Project, GroupKey]:
        """The job checked as far as it can be locally, as a record to queue."""
        refuse_requests(spec, "BOINC")
        if not spec.workdir:
            raise DriverError("BOINC jobs need Iwd: outputs are fetched into it")
        workdir = Path(spec.workdir)
        url_opt = spec.options.get("project_url")
        auth_opt = spec.options.get("authenticator_file")
        url, auth_file = self._resolve(url_opt, auth_opt)
        project = Project(url=url, authenticator=_read_authenticator(auth_file))
        # HTCondor sends Cmd as a path (Iwd joined with the executable): the app is its name
        app = os.path.basename(spec.executable.rstrip("/")) or spec.executable
        rec = JobRecord(
            job=f"blah-{uuid.uuid4().hex[:16]}",
            app=app,
            workdir=str(workdir),
            args=list(spec.arguments),
            inputs=_job_inputs(spec, workdir),
            memory=spec.memory_mb * 1e6 if spec.memory_mb else None,
            delay=float(spec.runtime_s) if spec.runtime_s else None,
            project_url=url_opt,
            authenticator_file=auth_opt,
            stdout=spec.stdout,
            stderr=spec.stderr,
            transfer_output=list(spec.transfer_output),
            priority=_int_option(spec, "priority"),
            target_host=_int_option(spec, "target_host") or 0,
            target_user=_int_option(spec, "target_user") or 0,
            replication=_replication(spec),
        )
        try:
            check_job(rec.boinc_job())
        except StagingError as exc:
            raise DriverError(str(exc)) from None
        return rec, project, GroupKey(url, auth_file, app, rec.memory, rec.delay)

    async def _queue(self, rec: JobRecord, project: Project, key: GroupKey) -> str:
        """Check the job against its application, then queue it in its group (or, with no
        batch window, submit it alone now)."""
        templates = await self._templates_for(project, rec.app)
        if len(rec.inputs) != templates.n_inputs:
            raise DriverError(
                f"the job has {len(rec.inputs)} input files but application {rec.app} takes "
                f"{templates.n_inputs}"
            )
        now = asyncio.get_running_loop().time()
        if self.batch_window_s <= 0:
            return await self._submit_alone(self.planner.alone(key, project, rec, now))
        group = self.planner.group_for(key, project, now)
        rec.batch = group.batch
        self._enqueue(rec)
        self.planner.add(key, rec, now)
        if group.due <= now:
            self._wake.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = self._bridge.task(self._flush())
        log.info("queued BOINC job %s (app %s) for batch %s", rec.job, rec.app, group.batch)
        return rec.job

    def _enqueue(self, rec: JobRecord) -> None:
        """Record the job as queued (found by the next process if this one dies)."""
        self.store.queue(rec, self.owners.me)
        self._queued[rec.job] = asyncio.get_running_loop().create_future()

    def _settle(self, jobs: Iterable[str]) -> None:
        """The jobs' submission has ended (whatever its outcome)."""
        for job in jobs:
            waiter = self._queued.pop(job, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def _submit_alone(self, group: Group) -> str:
        """Submit a job as a batch of its own before answering; a job not submitted is
        forgotten (its id was never given out)."""
        (rec,) = group.jobs
        self._enqueue(rec)
        try:
            await self._submit_group(group)
        finally:
            if rec.state is not JobState.SUBMITTED:
                self.store.forget(rec.job)
        if rec.final is not None:
            raise DriverError(rec.final.hold_reason or "the job was not submitted")
        return rec.job

    async def _flush(self) -> None:
        """Start each group's submission when it is due; end when none is left."""
        while (due := self.planner.next_due()) is not None:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(due):
                    await self._wake.wait()
            for group in self.planner.pop_due(asyncio.get_running_loop().time()):
                self._bridge.task(self._submit_group(group))

    async def _submit_group(self, group: Group) -> None:
        """Submit a group's jobs as one batch; hold them all with the reason if it fails.
        Cancelled (the driver stops): the jobs stay queued for the next process."""
        try:
            await self._submit_checked(group)
        except Exception as exc:  # never leave a job queued forever
            log.exception("submitting batch %s failed", group.batch)
            for rec in group.jobs:
                if rec.queued:
                    self.store.hold(rec, f"BOINC submission failed: {type(exc).__name__}: {exc}")
        finally:
            self._settle(rec.job for rec in group.jobs)

    async def _submit_checked(self, group: Group) -> None:
        ok = await asyncio.to_thread(self._ready_jobs, group)
        if not ok:
            return
        names = [rec.job for rec in ok]
        req = SubmitRequest(
            project=group.project,
            batch=group.batch,
            app=group.app,
            jobs=tuple(rec.boinc_job() for rec in ok),
            params=group.params,
        )
        error = await self._submit_with_retries(req, names)
        if error is None:
            await self._mark_submitted(ok)
            log.info("submitted BOINC batch %s: %d jobs", group.batch, len(ok))
            return
        reason = f"BOINC submission failed: {error}"
        log.warning("batch %s (%d jobs): %s", group.batch, len(ok), reason)
        for rec in ok:
            self.store.hold(rec, reason)
        self.store.drop_batch(group.batch)

    # The file work of a submission runs in a worker thread, off the loop: the records of a
    # group being submitted are that submission's alone (a cancel waits for it to end).

    def _ready_jobs(self, group: Group) -> list[JobRecord]:
        """Hold the jobs whose inputs went missing; record the batch of the others."""
        ok = []
        for rec in group.jobs:
            try:
                check_job(rec.boinc_job(with_args=False))
            except StagingError as exc:
                self.store.hold(rec, str(exc))
                continue
            ok.append(rec)
        if ok:
            first = ok[0]
            names = [rec.job for rec in ok]
            batch = BatchRecord(group.batch, first.project_url, first.authenticator_file, names)
            self.store.save_batch(batch)
        return ok

    async def _mark_submitted(self, recs: Sequence[JobRecord]) -> None:
        await asyncio.to_thread(self._record_submitted, recs)
        for rec in recs:
            self._where[rec.job] = _Place.of(rec)

    def _record_submitted(self, recs: Sequence[JobRecord]) -> None:
        """Track the jobs in the status registry (its locks are the worker threads'), then
        record them submitted: a job seen submitted is one the next bulk query asks about."""
        self._track([rec.job for rec in recs])
        for rec in recs:
            self.store.mark_submitted(rec)

    def _track(self, jobs: Sequence[str]) -> None:
        registry = self.registry
        if registry is not None:
            for job in jobs:
                registry.track(job)

    async def _submit_with_retries(self, req: SubmitRequest, names: Sequence[str]) -> str | None:
        """Submit; retry transient failures (after checking the batch did not get in).
        None on success, else the error."""
        error = ""
        for attempt in range(self.submit_attempts):
            if attempt:
                await asyncio.sleep(min(30.0, 2.0 * 2 ** (attempt - 1)))
                try:
                    if await self._batch_has(req.project, req.batch, names):
                        return None
                except DriverError as exc:
                    error = str(exc)
                    continue
            error, retry = await self._try_submit(req)
            if not error or not retry:
                return error or None
            log.info("submitting batch %s failed (%s): attempt %d", req.batch, error, attempt + 1)
        return error

    async def _try_submit(self, req: SubmitRequest) -> tuple[str, bool]:
        """Submit once: ("", _) on success, else the error and whether to retry."""
        try:
            async with asyncio.timeout(self.rpc_timeout):
                await self.client.submit_request(req)
            return "", False
        except TimeoutError:
            return self._no_answer(), True
        except RpcError as exc:
            return str(exc), exc.retryable
        except BoincError as exc:  # StagingError, OutputError: retrying cannot help
            return str(exc), False

    async def _batch_has(
        self,
        project: Project,
        batch: str,
        names: Sequence[str],
        passing: tuple[type[BoincError], ...] = (),
    ) -> bool:
        """Whether the project has ``batch`` with all ``names`` in it (False: no such
        batch, or one without them); the client's errors of the ``passing`` types are
        raised as they are."""
        try:
            states = await self._rpc(
                self.client.query_batch2([batch], project=project), (NoSuchBatch, *passing)
            )
        except NoSuchBatch as exc:
            if exc.batch != batch:
                raise _driver_error(exc) from None
            return False
        have = {name for name, _ in states.batches[0]}
        return all(n in have for n in names)

    # ---- recovery of the jobs a dead process left queued --------------------------------------

    async def _recover(self, jobs: set[str]) -> None:
        """Mark those whose batch the project has (with them) submitted, submit the others
        again in a new batch."""
        loop = asyncio.get_running_loop()
        for job in jobs:
            self._queued.setdefault(job, loop.create_future())
        try:
            for batch, recs in self._recoverable(sorted(jobs)).items():
                await self._recover_batch(batch, recs)
        except Exception:
            log.exception("recovering queued BOINC jobs failed")
        else:
            self.owners.release_adopted()
        finally:
            self._settle(jobs)  # (those left queued: a cancel no longer waits for them)

    def _recoverable(self, jobs: Sequence[str]) -> dict[str, list[JobRecord]]:
        """The records still queued, by batch; the other markers are dropped."""
        by_batch: dict[str, list[JobRecord]] = {}
        for job in jobs:
            try:
                rec = self.store.load(job)
            except DriverError as exc:
                log.warning("%s", exc)
                rec = None
            if rec is None or not rec.queued or rec.batch is None:
                self.store.unqueue(job)
                self._settle([job])
                continue
            by_batch.setdefault(rec.batch, []).append(rec)
        return by_batch

    async def _recover_batch(self, batch: str, recs: list[JobRecord]) -> None:
        found = await self._find_batch(batch, recs)
        if found is None:
            return
        project, there = found
        if there:
            log.info("batch %s of %d queued jobs was submitted before a restart", batch, len(recs))
            await self._mark_submitted(recs)
            self._settle(r.job for r in recs)
            return
        group = Group(new_batch_name(), project, recs[0].app, recs[0].params, 0.0, recs)
        log.info("submitting %d jobs queued before a restart in batch %s", len(recs), group.batch)
        self.store.drop_batch(batch)
        for rec in recs:
            rec.batch = group.batch
            self.store.save(rec)
        await self._submit_group(group)

    async def _find_batch(self, batch: str, recs: list[JobRecord]) -> tuple[Project, bool] | None:
        """The jobs' project and whether it has their batch with them; None when the
        project cannot be addressed (the jobs are held)."""
        names = [r.job for r in recs]
        attempt = 0
        while True:
            attempt += 1
            try:
                project = self._project_of(recs[0])
                there = await self._batch_has(project, batch, names, (BadAuthenticator,))
                return project, there
            except (_NoProject, BadAuthenticator) as exc:
                text = str(exc) if isinstance(exc, DriverError) else str(_driver_error(exc))
                for rec in recs:
                    self.store.hold(rec, f"BOINC submission failed: {text}")
                self._settle(names)
                return None
            except DriverError as exc:
                log.warning("batch %s of queued jobs: %s (retrying)", batch, exc)
                await asyncio.sleep(min(60.0, 2.0 * attempt))

    # ---- status -------------------------------------------------------------------------------

    def status(self, native_id: str) -> JobInfo:
        # The loop writes records, each in one rename: read here, a thread may (and the
        # gridmanager's polls of finished and queued jobs need not wait for the loop).
        info = record_answer(self.store.load(native_id))
        if info is not None:
            return info
        registry = self.registry
        if registry is None:
            return self.query_status(native_id)
        return registry.status(native_id)

    def bulk_status(self, native_ids: Sequence[str]) -> Mapping[str, JobInfo]:
        """States of queued and running jobs from one query_batch2 per project (naming every
        batch of the jobs); DONE and ERROR jobs are left out (the per-job path fetches their
        outputs or failure details)."""
        return self._call(self._bulk_status(native_ids))

    async def _bulk_status(self, jobs: Sequence[str]) -> dict[str, JobInfo]:
        found: dict[str, JobInfo] = {}
        errors: list[str] = []
        for (url, auth_file), batches in self._by_project(jobs).items():
            try:
                found.update(await self._bulk_one(self._project(url, auth_file), batches))
            except DriverError as exc:
                errors.append(str(exc))
        if errors and not found:
            raise DriverError(errors[0])
        return found

    def _by_project(
        self, jobs: Sequence[str]
    ) -> dict[tuple[str | None, str | None], dict[str, list[str]]]:
        """The submitted, unfinished jobs by project and batch."""
        projects: dict[tuple[str | None, str | None], dict[str, list[str]]] = {}
        for job in jobs:
            place = self._where.get(job) or self._place_of(job)
            if place is not None:
                batches = projects.setdefault((place.url, place.authenticator_file), {})
                batches.setdefault(place.batch, []).append(job)
        return projects

    def _place_of(self, job: str) -> _Place | None:
        try:
            rec = self.store.load(job)
        except DriverError:
            return None
        if rec is None or rec.final is not None or rec.state is JobState.QUEUED:
            return None
        place = self._where[job] = _Place.of(rec)
        return place

    async def _bulk_one(
        self, project: Project, batches: Mapping[str, list[str]]
    ) -> dict[str, JobInfo]:
        names = sorted(batches)
        while names:
            try:
                call = self.client.query_batch2(names, project=project)
                replies = (await self._rpc(call, (NoSuchBatch,))).batches
                break
            except NoSuchBatch as exc:
                if exc.batch not in names:
                    raise _driver_error(exc) from None
                names.remove(exc.batch)  # its jobs are asked one by one
        else:
            return {}
        found: dict[str, JobInfo] = {}
        for job, state in (pair for jobs in replies for pair in jobs):
            if state in UNFINISHED:
                found[job] = UNFINISHED[state]
            elif state in ("DONE", "ERROR"):
                self._bulk_state[job] = state
        return found

    def query_status(self, native_id: str) -> JobInfo:
        """One job's state, asked of the project for its batch alone (outputs are fetched
        before a DONE job is reported COMPLETED)."""
        return self._call(self._query_status(native_id))

    async def _query_status(self, job: str) -> JobInfo:
        async with self._job_locks.hold(job):
            rec = self.store.load(job)
            known = record_answer(rec)
            if known is not None:
                return known
            assert rec is not None
            project = self._project_of(rec)
            state = self._bulk_state.pop(job, "") or await self._state_of(rec, project)
            if state is None:
                gone = JobInfo(JobStatus.COMPLETED, exit_reason="the BOINC batch no longer exists")
                return await self._finish(rec, gone)
            return await self._answer(rec, project, state)

    async def _state_of(self, rec: JobRecord, project: Project) -> str | None:
        """The job's state in query_batch2 of its batch ("" when missing); None when the
        project has no such batch."""
        assert rec.batch is not None
        try:
            call = self.client.query_batch2([rec.batch], project=project)
            batches = (await self._rpc(call, (NoSuchBatch,))).batches
        except NoSuchBatch as exc:
            if exc.batch != rec.batch:
                raise _driver_error(exc) from None
            return None
        return dict(batches[0]).get(rec.job, "")

    async def _answer(self, rec: JobRecord, project: Project, state: str) -> JobInfo:
        if state in UNFINISHED:
            return UNFINISHED[state]
        if state == "DONE":
            return await self._completed(rec, project)
        if state == "ERROR":
            return await self._failed(rec, project)
        raise DriverError(f"BOINC job {rec.job}: unexpected status {state or 'missing'!r}")

    async def _completed(self, rec: JobRecord, project: Project) -> JobInfo:
        """Fetch a DONE job's outputs, then call it COMPLETED.

        The outputs land in a directory of the job's own first, so that Out gets this job's
        first output even while jobs sharing the Iwd (a ``queue N``) fetch theirs; then they
        are moved into the Iwd, each file in one rename.
        """
        workdir = Path(rec.workdir)
        output_names = (await self._templates_for(project, rec.app)).output_names
        stage = Path(tempfile.mkdtemp(prefix=f".{rec.job}-", dir=workdir))
        try:
            fetch = FetchRequest(
                project=project,
                job=rec.job,
                iwd=str(stage),
                stderr_file=str(job_path(workdir, rec.stderr)) if rec.stderr else os.devnull,
                mode="SOME" if rec.transfer_output else "ALL",
                specs=tuple((n, n) for n in rec.transfer_output),
                limits=self.archive_limits,
            )
            for name in output_names:
                check_output_name(name)
            done = await self._rpc(self.client.fetch_request(fetch, output_names), (UnsafeOutput,))
            stdout = job_path(workdir, rec.stdout) if rec.stdout else None
            first = output_names[0] if output_names else None
            await asyncio.to_thread(deliver_outputs, stage, workdir, stdout, first)
        except UnsafeOutput as exc:
            # The server's outputs are refused for good: the job is held, saying why.
            log.warning("job %s: outputs refused: %s", rec.job, exc)
            reason = f"BOINC job outputs refused: {exc}"
            return await self._finish(rec, JobInfo(JobStatus.HELD, hold_reason=reason))
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        final = JobInfo(
            JobStatus.COMPLETED,
            exit_code=done.exit_status,
            wallclock_s=done.elapsed_time,
            user_cpu_s=done.cpu_time,
        )
        return await self._finish(rec, final)

    async def _failed(self, rec: JobRecord, project: Project) -> JobInfo:
        """A job BOINC ended in ERROR: COMPLETED with the failed instance's exit status, and
        what is known of the failure in its Err file."""
        if rec.cancelled:
            return await self._finish(rec, JobInfo(JobStatus.REMOVED))
        done, detail, problems = await self._failure_facts(rec, project)
        exit_status, reason = describe_failure(done, detail, problems)
        write_err(rec, reason, done.stderr if done else "")
        final = JobInfo(
            JobStatus.COMPLETED,
            exit_code=exit_status or 1,
            exit_reason=reason,
            wallclock_s=done.elapsed_time if done else None,
            user_cpu_s=done.cpu_time if done else None,
        )
        return await self._finish(rec, final)

    async def _failure_facts(
        self, rec: JobRecord, project: Project
    ) -> tuple[CompletedJob | None, JobDetail | None, list[str]]:
        """What the project says of a failed job.

        query_completed_job gives the failed instance's stderr where it works; a stock PHP 8
        server answers it with HTTP 500 for any job without a canonical instance, so the
        exit status and the workunit's error come from query_batch's job details.
        """
        done: CompletedJob | None = None
        problems: list[str] = []
        try:
            done = await self._rpc(self.client.query_completed_job(rec.job, project=project))
        except DriverError as exc:
            problems.append(str(exc))
        detail: JobDetail | None = None
        if done is None or not done.exit_status:
            assert rec.batch is not None
            try:
                reply = await self._rpc(self.client.query_batch(rec.batch, project=project))
                detail = next((d for d in reply.jobs if d.name == rec.job), None)
            except DriverError as exc:
                problems.append(f"job details: {exc}")
        return done, detail, problems

    async def _finish(self, rec: JobRecord, final: JobInfo) -> JobInfo:
        """Record the final state; retire the batch once all its jobs are final (best
        effort: it expires anyway)."""
        rec.final = final
        self.store.save(rec)
        self._where.pop(rec.job, None)
        self._bulk_state.pop(rec.job, None)
        if self.store.last_of_batch(rec):
            assert rec.batch is not None
            try:
                project = self._project_of(rec)
                await self._rpc(self.client.retire_batch(rec.batch, project=project))
                log.info("retired BOINC batch %s", rec.batch)
            except DriverError as exc:
                log.warning("retiring batch %s failed: %s", rec.batch, exc)
            self.store.drop_batch(rec.batch)
        return final

    # ---- other requests -----------------------------------------------------------------------

    def cancel(self, native_id: str) -> None:
        if not self._call(self._cancel(native_id)):
            return
        registry = self.registry
        if registry is not None:
            registry.invalidate(native_id)

    async def _cancel(self, job: str) -> bool:
        """Abort the job; False when there was nothing to abort."""
        async with self._job_locks.hold(job):
            rec = self.store.load(job)
            if rec is not None and rec.queued:
                # Submitted first (it is in a batch with others), then aborted.
                rec = await self._await_submission(job)
            if rec is None:
                return False
            if rec.final is not None:
                if rec.final.status is JobStatus.HELD:
                    rec.final = JobInfo(JobStatus.REMOVED)
                    self.store.save(rec)
                return False
            with contextlib.suppress(NoSuchJob):  # over already, or never made it
                call = self.client.abort_jobs([job], project=self._project_of(rec))
                await self._rpc(call, (NoSuchJob,))
            rec.cancelled = True
            await self._finish(rec, JobInfo(JobStatus.REMOVED))
            return True

    async def _await_submission(self, job: str) -> JobRecord | None:
        """Submit the queued job's group now and wait until it is; its record then."""
        waiter = self._queued.get(job)
        if waiter is not None:
            if self.planner.hurry(job, asyncio.get_running_loop().time()):
                self._wake.set()
            try:
                async with asyncio.timeout(self.rpc_timeout):
                    await asyncio.shield(waiter)
            except TimeoutError:
                raise DriverError(f"BOINC job {job} is still being submitted") from None
        rec = self.store.load(job)
        if rec is not None and rec.queued:
            raise DriverError(f"BOINC job {job} is still being submitted")
        return rec

    def _abandon_queue(self) -> None:
        """Drop the groups not yet submitted, as if this process had died (for tests):
        their jobs stay queued on disk, for the next process."""

        async def clear() -> None:
            self.planner.clear()

        self._call(clear())

    async def aclose(self) -> None:
        """Stop: cancel the BOINC calls still waiting (their requests fail) and leave the
        jobs still queued, durable, to the next process on this state directory."""
        await self._bridge.aclose(self.client.aclose)

    def hold(self, native_id: str) -> None:
        raise DriverError("BOINC jobs cannot be held: a volunteer may be running them")

    def resume(self, native_id: str) -> None:
        raise DriverError("BOINC jobs cannot be held, so there is nothing to resume")

    def ping(self) -> None:
        """Ping the configured project. With none configured each job names its own
        (BoincProjectUrl), so there is nothing to check: the answer is "up". A failed
        BLAH_PING would mark the resource down and keep every such job idle for good."""
        if not self.settings.project_url and not self.settings.authenticator_file:
            return
        project = self._project(None, None)
        self._call(self._rpc(self.client.ping(project=project)))


def _int_option(spec: JobSpec, key: str) -> int | None:
    """An integer option of the submit ad (BoincPriority, BoincTargetHost, BoincTargetUser)."""
    text = spec.options.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise DriverError(f"{key} must be an integer, not {text!r}") from None
    if key != "priority" and value < 0:
        raise DriverError(f"{key} must be a database id (0 or more), not {value}")
    return value


def _replication(spec: JobSpec) -> dict[str, int]:
    """The replication and quorum options of the submit ad, checked as BOINC would."""
    values = {}
    for key in REPLICATION_ATTRIBUTES:
        value = _int_option(spec, key)
        if value is not None:
            values[key] = value
    try:
        JobOptions(**replication_kwargs(values))
    except ValueError as exc:
        text = str(exc)
        for key, attr in REPLICATION_ATTRIBUTES.items():
            text = text.replace(key, attr)
        raise DriverError(text) from None
    return values
