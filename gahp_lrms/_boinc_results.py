"""The end of a boinc job: a DONE job's outputs fetched into its Iwd, a failed job's
failure described, the final state recorded, the batch retired once all its jobs are final."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from gahp_boinc import (
    ArchiveLimits,
    CompletedJob,
    FetchRequest,
    JobDetail,
    Project,
    UnsafeOutput,
    check_output_name,
)
from gahp_lrms._boinc_outcome import deliver_outputs, describe_failure, job_path, write_err
from gahp_lrms._boinc_project import Projects
from gahp_lrms._boinc_store import JobRecord, JobStore
from gahp_lrms.model import DriverError, JobInfo, JobStatus

log = logging.getLogger("gahp.lrms.boinc")


class Results:
    """Final states of jobs: fetched, described, recorded. ``on_final(job)`` is told of
    each job recorded final."""

    def __init__(
        self,
        projects: Projects,
        store: JobStore,
        limits: ArchiveLimits,
        on_final: Callable[[str], None],
    ) -> None:
        self.projects = projects
        self.store = store
        self.limits = limits
        self.on_final = on_final

    async def completed(self, rec: JobRecord, project: Project) -> JobInfo:
        """Fetch a DONE job's outputs, then call it COMPLETED.

        The outputs land in a directory of the job's own first, so that Out gets this job's
        first output even while jobs sharing the Iwd (a ``queue N``) fetch theirs; then they
        are moved into the Iwd, each file in one rename.
        """
        workdir = Path(rec.workdir)
        output_names = (await self.projects.templates(project, rec.app)).output_names
        stage = Path(tempfile.mkdtemp(prefix=f".{rec.job}-", dir=workdir))
        try:
            fetch = FetchRequest(
                project=project,
                job=rec.job,
                iwd=str(stage),
                stderr_file=str(job_path(workdir, rec.stderr)) if rec.stderr else os.devnull,
                mode="SOME" if rec.transfer_output else "ALL",
                specs=tuple((n, n) for n in rec.transfer_output),
                limits=self.limits,
            )
            for name in output_names:
                check_output_name(name)
            call = self.projects.client.fetch_request(fetch, output_names)
            done = await self.projects.rpc(call, (UnsafeOutput,))
            stdout = job_path(workdir, rec.stdout) if rec.stdout else None
            first = output_names[0] if output_names else None
            await asyncio.to_thread(deliver_outputs, stage, workdir, stdout, first)
        except UnsafeOutput as exc:
            # The server's outputs are refused for good: the job is held, saying why.
            log.warning("job %s: outputs refused: %s", rec.job, exc)
            reason = f"BOINC job outputs refused: {exc}"
            return await self.finish(rec, JobInfo(JobStatus.HELD, hold_reason=reason))
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        final = JobInfo(
            JobStatus.COMPLETED,
            exit_code=done.exit_status,
            wallclock_s=done.elapsed_time,
            user_cpu_s=done.cpu_time,
        )
        return await self.finish(rec, final)

    async def failed(self, rec: JobRecord, project: Project) -> JobInfo:
        """A job BOINC ended in ERROR: COMPLETED with the failed instance's exit status, and
        what is known of the failure in its Err file."""
        if rec.cancelled:
            return await self.finish(rec, JobInfo(JobStatus.REMOVED))
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
        return await self.finish(rec, final)

    async def _failure_facts(
        self, rec: JobRecord, project: Project
    ) -> tuple[CompletedJob | None, JobDetail | None, list[str]]:
        """What the project says of a failed job.

        query_completed_job gives the failed instance's stderr where it works; a stock PHP 8
        server answers it with HTTP 500 for any job without a canonical instance, so the
        exit status and the workunit's error come from query_batch's job details.
        """
        client = self.projects.client
        done: CompletedJob | None = None
        problems: list[str] = []
        try:
            done = await self.projects.rpc(client.query_completed_job(rec.job, project=project))
        except DriverError as exc:
            problems.append(str(exc))
        detail: JobDetail | None = None
        if done is None or not done.exit_status:
            assert rec.batch is not None
            try:
                reply = await self.projects.rpc(client.query_batch(rec.batch, project=project))
                detail = next((d for d in reply.jobs if d.name == rec.job), None)
            except DriverError as exc:
                problems.append(f"job details: {exc}")
        return done, detail, problems

    async def finish(self, rec: JobRecord, final: JobInfo) -> JobInfo:
        """Record the final state; retire the batch once all its jobs are final (best
        effort: it expires anyway)."""
        rec.final = final
        self.store.save(rec)
        self.on_final(rec.job)
        if self.store.last_of_batch(rec):
            assert rec.batch is not None
            try:
                project = self.projects.project_of(rec)
                await self.projects.rpc(
                    self.projects.client.retire_batch(rec.batch, project=project)
                )
                log.info("retired BOINC batch %s", rec.batch)
            except DriverError as exc:
                log.warning("retiring batch %s failed: %s", rec.batch, exc)
            self.store.drop_batch(rec.batch)
        return final
