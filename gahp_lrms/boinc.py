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

The driver is asynchronous (a :class:`~gahp_lrms.base.Driver`): its methods are coroutines
on the caller's event loop (blahpd's), as are the BOINC client's requests, the batching,
retries and recovery, and the job records (one loop orders all of it: no thread of its
own, no thread locks; bulk file work runs in worker threads). At shutdown
(:meth:`BoincDriver.aclose`) the driver's tasks are cancelled, its connections closed, and
the jobs still queued are left for the next process, which submits them.

The parts: :mod:`gahp_lrms._boinc_project` (which project a job uses, the client's calls
bounded in time), :mod:`gahp_lrms._boinc_submitter` (queued jobs into batches, submitted;
recovery), :mod:`gahp_lrms._boinc_planner` (which jobs share a batch, and when it is due),
:mod:`gahp_lrms._boinc_status` (the bulk and per-job status queries),
:mod:`gahp_lrms._boinc_results` (outputs fetched, failures described, batches retired),
:mod:`gahp_lrms._boinc_store` (the records), :mod:`gahp_lrms._boinc_owners` (which process
submits the queued jobs), :mod:`gahp_lrms._boinc_outcome` (what is answered of a job and
left in its directory) and :mod:`gahp_lrms._boinc_loop` (background tasks, per-key locks).

What the driver knows of each job is kept under ``state_dir`` (never the authenticator),
so ids stay valid across blahpd restarts, after the batch is retired too; queued jobs found
at start (taken over at the first request) are submitted unless the project already has
their batch with them (never twice).
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gahp_boinc import ArchiveLimits, JobOptions, NoSuchJob, Project, StagingError, check_job
from gahp_lrms._boinc_loop import KeyedLock, Tasks
from gahp_lrms._boinc_outcome import record_answer
from gahp_lrms._boinc_owners import Owners
from gahp_lrms._boinc_planner import GroupKey
from gahp_lrms._boinc_project import Projects, read_authenticator
from gahp_lrms._boinc_results import Results
from gahp_lrms._boinc_status import StatusQueries
from gahp_lrms._boinc_store import REPLICATION_ATTRIBUTES, JobRecord, JobStore, replication_kwargs
from gahp_lrms._boinc_submitter import Submitter
from gahp_lrms.base import Driver
from gahp_lrms.config import BoincDriverConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus, refuse_requests
from gahp_lrms.registry import DriverRegistry

log = logging.getLogger("gahp.lrms.boinc")


def _job_inputs(spec: JobSpec, workdir: Path) -> list[tuple[str, str]]:
    """(path, name) of the job's input files: In, then TransferInput."""
    names = (spec.stdin,) if spec.stdin and spec.stdin != os.devnull else ()
    paths = [Path(n) if os.path.isabs(n) else workdir / n for n in (*names, *spec.transfer_input)]
    return [(str(p), p.name) for p in paths]


class BoincDriver(Driver):
    """Jobs on a BOINC project through its remote-submission RPCs: the requests, each
    handed to the part that does it (see the module documentation)."""

    name = "boinc"
    config_class = BoincDriverConfig
    settings: BoincDriverConfig

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        cfg = self.settings
        self.store = JobStore(self.state_dir)
        self.jobs_dir, self.queued_dir = self.store.jobs_dir, self.store.queued_dir
        self.batches_dir = self.store.batches_dir
        self.batch_window_s = cfg.batch_window_s
        self.projects = Projects(cfg)
        self.client = self.projects.client
        self.tasks = Tasks()
        self.job_locks = KeyedLock()  # one status or cancel at a time per job
        limits = ArchiveLimits(
            max_bytes=cfg.output_archive_max_bytes,
            max_members=cfg.output_archive_max_members,
            max_ratio=cfg.output_archive_max_ratio,
        )
        self.results = Results(self.projects, self.store, limits, self._final)
        self.queries = StatusQueries(self.projects, self.store, self.results, self.job_locks)
        self.statuses = DriverRegistry(
            cfg,
            "BOINC project",
            self.state_dir / "status-registry.jsonl",
            self.queries.bulk,
            self.queries.one,
        )
        self.owners = Owners(self.state_dir / "owners")
        self.owners_dir = self.owners.dir
        self.submitter = Submitter(
            cfg, self.projects, self.store, self.owners, self.tasks, self._submitted
        )
        self._recovering: set[str] | None = self.owners.adopt(self.store.queued())
        self.owners.forget_dead()

    def _submitted(self, recs: Sequence[JobRecord]) -> None:
        """Jobs in their batch: tracked, so that the next bulk query asks about them."""
        for rec in recs:
            self.statuses.track(rec.job)
        self.queries.submitted(recs)

    def _final(self, job: str) -> None:
        self.queries.final(job)

    def _serving(self) -> None:
        """Before each request: refused once stopped; the jobs a dead process left queued
        taken over (at the first request, on the caller's loop)."""
        self.tasks.check_open()
        if self._recovering is not None:
            jobs, self._recovering = self._recovering, None
            if jobs:
                self.tasks.start(self.submitter.recover(jobs))

    # ---- the requests -------------------------------------------------------------------------

    async def submit(self, spec: JobSpec) -> str:
        self._serving()
        rec, project, key = self._new_record(spec)
        return await self.submitter.queue(rec, project, key)

    def _new_record(self, spec: JobSpec) -> tuple[JobRecord, Project, GroupKey]:
        """The job checked as far as it can be locally, as a record to queue."""
        refuse_requests(spec, "BOINC")
        if not spec.workdir:
            raise DriverError("BOINC jobs need Iwd: outputs are fetched into it")
        workdir = Path(spec.workdir)
        url_opt = spec.options.get("project_url")
        auth_opt = spec.options.get("authenticator_file")
        url, auth_file = self.projects.resolve(url_opt, auth_opt)
        project = Project(url=url, authenticator=read_authenticator(auth_file))
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

    async def status(self, native_id: str) -> JobInfo:
        self._serving()
        # A final, held or queued job is answered from its record (one small file).
        info = record_answer(self.store.load(native_id))
        if info is not None:
            return info
        return await self.statuses.status(native_id)

    async def cancel(self, native_id: str) -> None:
        self._serving()
        if await self._cancel(native_id):
            self.statuses.invalidate(native_id)

    async def _cancel(self, job: str) -> bool:
        """Abort the job; False when there was nothing to abort."""
        async with self.job_locks.hold(job):
            rec = self.store.load(job)
            if rec is not None and rec.queued:
                # Submitted first (it is in a batch with others), then aborted.
                rec = await self.submitter.wait_submitted(job)
            if rec is None:
                return False
            if rec.final is not None:
                if rec.final.status is JobStatus.HELD:
                    rec.final = JobInfo(JobStatus.REMOVED)
                    self.store.save(rec)
                return False
            with contextlib.suppress(NoSuchJob):  # over already, or never made it
                call = self.client.abort_jobs([job], project=self.projects.project_of(rec))
                await self.projects.rpc(call, (NoSuchJob,))
            rec.cancelled = True
            await self.results.finish(rec, JobInfo(JobStatus.REMOVED))
            return True

    async def hold(self, native_id: str) -> None:
        raise DriverError("BOINC jobs cannot be held: a volunteer may be running them")

    async def resume(self, native_id: str) -> None:
        raise DriverError("BOINC jobs cannot be held, so there is nothing to resume")

    async def ping(self) -> None:
        """Ping the configured project. With none configured each job names its own
        (BoincProjectUrl), so there is nothing to check: the answer is "up". A failed
        BLAH_PING would mark the resource down and keep every such job idle for good."""
        self._serving()
        if not self.settings.project_url and not self.settings.authenticator_file:
            return
        project = self.projects.project(None, None)
        await self.projects.rpc(self.client.ping(project=project))

    async def limit_status_interval(self, seconds: float) -> None:
        self.statuses.limit_interval(seconds)

    async def forget(self, native_id: str) -> None:
        self.statuses.forget(native_id)

    async def aclose(self) -> None:
        """Stop: cancel the driver's tasks (a batch not submitted stays queued, durable, for
        the next process on this state directory) and the BOINC calls still waiting (their
        requests fail)."""
        if self.tasks.closed:
            return
        await self.tasks.aclose()
        await self.statuses.aclose()
        await self.projects.aclose()


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
