"""The boinc driver's status queries: the bulk one (one query_batch2 per project, naming
every batch of the jobs asked) and the per-job one (its batch alone; a DONE or ERROR job
is handed to :class:`~gahp_lrms._boinc_results.Results` before it is answered). The
driver's :class:`~gahp_lrms.registry.DriverRegistry` is built from the two."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from gahp_boinc import NoSuchBatch, Project
from gahp_lrms._boinc_loop import KeyedLock
from gahp_lrms._boinc_outcome import UNFINISHED, record_answer
from gahp_lrms._boinc_project import Projects, driver_error
from gahp_lrms._boinc_results import Results
from gahp_lrms._boinc_store import JobRecord, JobState, JobStore
from gahp_lrms.model import DriverError, JobInfo, JobStatus


@attrs.frozen
class Place:
    """Where a submitted job is: its project (as the job names it) and batch."""

    url: str | None
    authenticator_file: str | None
    batch: str

    @classmethod
    def of(cls, rec: JobRecord) -> Place:
        assert rec.batch is not None
        return cls(rec.project_url, rec.authenticator_file, rec.batch)


class StatusQueries:
    """The two status queries, and what the bulk one saw that the per-job one uses."""

    def __init__(
        self, projects: Projects, store: JobStore, results: Results, job_locks: KeyedLock
    ) -> None:
        self.projects = projects
        self.store = store
        self.results = results
        self.job_locks = job_locks  # one status or cancel at a time per job
        self._where: dict[str, Place] = {}  # submitted jobs, as bulk status asks them
        self._bulk_state: dict[str, str] = {}  # DONE or ERROR, from the latest bulk query

    def submitted(self, recs: Sequence[JobRecord]) -> None:
        """The jobs are in their batch: bulk status asks about them there."""
        for rec in recs:
            self._where[rec.job] = Place.of(rec)

    def final(self, job: str) -> None:
        """The job's final state is recorded: nothing more to ask."""
        self._where.pop(job, None)
        self._bulk_state.pop(job, None)

    # ---- bulk ---------------------------------------------------------------------------------

    async def bulk(self, jobs: Sequence[str]) -> Mapping[str, JobInfo]:
        """States of queued and running jobs from one query_batch2 per project (naming every
        batch of the jobs); DONE and ERROR jobs are left out (the per-job path fetches their
        outputs or failure details)."""
        found: dict[str, JobInfo] = {}
        errors: list[str] = []
        for (url, auth_file), batches in self._by_project(jobs).items():
            try:
                found.update(await self._bulk_one(self.projects.project(url, auth_file), batches))
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

    def _place_of(self, job: str) -> Place | None:
        try:
            rec = self.store.load(job)
        except DriverError:
            return None
        if rec is None or rec.final is not None or rec.state is JobState.QUEUED:
            return None
        place = self._where[job] = Place.of(rec)
        return place

    async def _bulk_one(
        self, project: Project, batches: Mapping[str, list[str]]
    ) -> dict[str, JobInfo]:
        names = sorted(batches)
        while names:
            try:
                call = self.projects.client.query_batch2(names, project=project)
                replies = (await self.projects.rpc(call, (NoSuchBatch,))).batches
                break
            except NoSuchBatch as exc:
                if exc.batch not in names:
                    raise driver_error(exc) from None
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

    # ---- one job ------------------------------------------------------------------------------

    async def one(self, job: str) -> JobInfo:
        """One job's state, asked of the project for its batch alone (outputs are fetched
        before a DONE job is reported COMPLETED)."""
        async with self.job_locks.hold(job):
            rec = self.store.load(job)
            known = record_answer(rec)
            if known is not None:
                return known
            assert rec is not None
            project = self.projects.project_of(rec)
            state = self._bulk_state.pop(job, "") or await self._state_of(rec, project)
            if state is None:
                gone = JobInfo(JobStatus.COMPLETED, exit_reason="the BOINC batch no longer exists")
                return await self.results.finish(rec, gone)
            return await self._answer(rec, project, state)

    async def _state_of(self, rec: JobRecord, project: Project) -> str | None:
        """The job's state in query_batch2 of its batch ("" when missing); None when the
        project has no such batch."""
        assert rec.batch is not None
        try:
            call = self.projects.client.query_batch2([rec.batch], project=project)
            batches = (await self.projects.rpc(call, (NoSuchBatch,))).batches
        except NoSuchBatch as exc:
            if exc.batch != rec.batch:
                raise driver_error(exc) from None
            return None
        return dict(batches[0]).get(rec.job, "")

    async def _answer(self, rec: JobRecord, project: Project, state: str) -> JobInfo:
        if state in UNFINISHED:
            return UNFINISHED[state]
        if state == "DONE":
            return await self.results.completed(rec, project)
        if state == "ERROR":
            return await self.results.failed(rec, project)
        raise DriverError(f"BOINC job {rec.job}: unexpected status {state or 'missing'!r}")
