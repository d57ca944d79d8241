"""The boinc driver's submissions: queued jobs grouped into batches, each batch submitted
(retried, never twice), and the jobs a dead process left queued taken over.

A job checked by the driver is queued here (:meth:`Submitter.queue`): recorded as queued
on disk, then put in its group (:class:`~gahp_lrms._boinc_planner.BatchPlanner`); a
flusher task submits each group when it is due. With no batch window the job is submitted
alone before :meth:`~Submitter.queue` returns. Jobs seen submitted are announced to
``on_submitted`` (which tracks them for bulk status) before they are recorded submitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence

from gahp_boinc import (
    BadAuthenticator,
    BoincError,
    NoSuchBatch,
    Project,
    RpcError,
    StagingError,
    SubmitRequest,
    check_job,
)
from gahp_lrms._boinc_loop import Tasks
from gahp_lrms._boinc_owners import Owners
from gahp_lrms._boinc_planner import BatchPlanner, Group, GroupKey, new_batch_name
from gahp_lrms._boinc_project import NoProject, Projects, driver_error
from gahp_lrms._boinc_store import BatchRecord, JobRecord, JobState, JobStore
from gahp_lrms.config import BoincDriverConfig
from gahp_lrms.model import DriverError

log = logging.getLogger("gahp.lrms.boinc")


class Submitter:
    """Batches of queued jobs, submitted by tasks of its own (in ``tasks``)."""

    def __init__(
        self,
        settings: BoincDriverConfig,
        projects: Projects,
        store: JobStore,
        owners: Owners,
        tasks: Tasks,
        on_submitted: Callable[[Sequence[JobRecord]], None],
    ) -> None:
        self.batch_window_s = settings.batch_window_s
        self.submit_attempts = settings.submit_attempts
        self.projects = projects
        self.store = store
        self.owners = owners
        self.tasks = tasks
        self.on_submitted = on_submitted
        self.planner = BatchPlanner(settings.batch_window_s, settings.batch_max_jobs)
        self._queued: dict[str, asyncio.Future[None]] = {}  # done once its submission ended
        self._wake = asyncio.Event()  # a group is due earlier than the flusher sleeps
        self._flusher: asyncio.Task[None] | None = None

    def waiting(self) -> int:
        """Jobs whose submission has not ended (for tests: nothing kept per job after)."""
        return len(self._queued)

    # ---- queueing -----------------------------------------------------------------------------

    async def queue(self, rec: JobRecord, project: Project, key: GroupKey) -> str:
        """Check the job against its application, then queue it in its group (or, with no
        batch window, submit it alone now)."""
        templates = await self.projects.templates(project, rec.app)
        if len(rec.inputs) != templates.n_inputs:
            raise DriverError(
                f"the job has {len(rec.inputs)} input files but application {rec.app} takes "
                f"{templates.n_inputs}"
            )
        self.tasks.check_open()
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
            self._flusher = self.tasks.start(self._flush())
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

    async def wait_submitted(self, job: str) -> JobRecord | None:
        """Submit the queued job's group now and wait until it is; its record then."""
        waiter = self._queued.get(job)
        if waiter is not None:
            if self.planner.hurry(job, asyncio.get_running_loop().time()):
                self._wake.set()
            try:
                async with asyncio.timeout(self.projects.rpc_timeout):
                    await asyncio.shield(waiter)
            except TimeoutError:
                raise DriverError(f"BOINC job {job} is still being submitted") from None
        rec = self.store.load(job)
        if rec is not None and rec.queued:
            raise DriverError(f"BOINC job {job} is still being submitted")
        return rec

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
                self.tasks.start(self._submit_group(group))

    # ---- one batch ----------------------------------------------------------------------------

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
        # The file work runs in a worker thread, off the loop: the records of a group being
        # submitted are that submission's alone (a cancel waits for it to end).
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
        """Announce the jobs (tracked for bulk status), then record them submitted: a job
        seen submitted is one the next bulk query asks about."""
        self.on_submitted(recs)
        await asyncio.to_thread(self._record_submitted, recs)

    def _record_submitted(self, recs: Sequence[JobRecord]) -> None:
        for rec in recs:
            self.store.mark_submitted(rec)

    async def _submit_with_retries(self, req: SubmitRequest, names: Sequence[str]) -> str | None:
        """Submit; retry transient failures (after checking the batch did not get in).
        None on success, else the error."""
        error = ""
        for attempt in range(self.submit_attempts):
            if attempt:
                await asyncio.sleep(min(30.0, 2.0 * 2 ** (attempt - 1)))
                try:
                    if await self.batch_has(req.project, req.batch, names):
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
            async with asyncio.timeout(self.projects.rpc_timeout):
                await self.projects.client.submit_request(req)
            return "", False
        except TimeoutError:
            return self.projects.no_answer(), True
        except RpcError as exc:
            return str(exc), exc.retryable
        except BoincError as exc:  # StagingError, OutputError: retrying cannot help
            return str(exc), False

    async def batch_has(
        self,
        project: Project,
        batch: str,
        names: Sequence[str],
        passing: tuple[type[BoincError], ...] = (),
    ) -> bool:
        """Whether the project has ``batch`` with all ``names`` in it (False: no such
        batch, or one without them); the client's errors of the ``passing`` types are
        raised as they are."""
        call = self.projects.client.query_batch2([batch], project=project)
        try:
            states = await self.projects.rpc(call, (NoSuchBatch, *passing))
        except NoSuchBatch as exc:
            if exc.batch != batch:
                raise driver_error(exc) from None
            return False
        have = {name for name, _ in states.batches[0]}
        return all(n in have for n in names)

    # ---- recovery of the jobs a dead process left queued --------------------------------------

    async def recover(self, jobs: set[str]) -> None:
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
                project = self.projects.project_of(recs[0])
                there = await self.batch_has(project, batch, names, (BadAuthenticator,))
                return project, there
            except (NoProject, BadAuthenticator) as exc:
                text = str(exc) if isinstance(exc, DriverError) else str(driver_error(exc))
                for rec in recs:
                    self.store.hold(rec, f"BOINC submission failed: {text}")
                self._settle(names)
                return None
            except DriverError as exc:
                log.warning("batch %s of queued jobs: %s (retrying)", batch, exc)
                await asyncio.sleep(min(60.0, 2.0 * attempt))
