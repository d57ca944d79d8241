"""The ``boinc`` job driver: a BOINC project as a batch system, for blahpd.

HTCondor 10 dropped its ``boinc`` grid type but still speaks BLAH (``grid_resource =
batch boinc``); this driver maps the BLAH job model onto BOINC's with gahp_boinc's
:class:`~gahp_boinc.BoincClient` and its MD5 staging:

- one BLAH job is one BOINC job; Cmd names the BOINC application (its last path component:
  HTCondor sends the executable joined to Iwd);
- submissions that arrive close together for the same project, account, application and
  job parameters go into one BOINC batch: submit checks the job (inputs readable, their
  number as the application's input template wants), records it as *queued* and returns at
  once; a flusher thread submits each group after ``batch_window_s`` seconds (or once it
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

The driver's methods block (blahpd calls them from its worker pool); the BOINC client's
coroutines run on blahpd's event loop (``loop=``), so blahpd keeps one loop and one
connection pool; a driver made without one runs them on a loop of its own. At shutdown
(:meth:`BoincDriver.aclose`) the calls still waiting are cancelled and the jobs still
queued are left for the next process, which submits them.

What the driver knows of each job is kept under ``state_dir`` (never the authenticator),
so ids stay valid across blahpd restarts, after the batch is retired too; queued jobs found
at start are submitted unless the project already has their batch with them (never twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import attrs

from gahp_boinc import (
    BadAuthenticator,
    BoincError,
    BoincJob,
    CompletedJob,
    FetchRequest,
    JobDetail,
    JobParams,
    NoSuchBatch,
    NoSuchJob,
    Project,
    RpcError,
    StagingError,
    SubmitRequest,
    SyncBoincClient,
    Templates,
    check_job,
)
from gahp_core import ConfigError, error_text, http_url, read_secret_file
from gahp_lrms.base import Driver
from gahp_lrms.config import BoincDriverConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.registry import RegistryHolder

log = logging.getLogger("gahp.lrms.boinc")

T = TypeVar("T")
P = ParamSpec("P")

TEMPLATE_TTL_S = 60.0
"""Seconds an application's templates are trusted when checking submissions."""
QUEUED, SUBMITTED, HELD_STATE = "queued", "submitted", "held"


def _in(workdir: Path, name: str) -> Path:
    """A job file: absolute as given, else relative to the job's Iwd."""
    path = Path(name)
    return path if path.is_absolute() else workdir / path


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


def _new_batch_name() -> str:
    return f"blahb-{uuid.uuid4().hex[:16]}"


@attrs.define
class _Group:
    """Queued jobs that go into one BOINC batch."""

    batch: str
    project: Project
    app: str
    params: JobParams
    due: float  # time.monotonic() when it is submitted
    jobs: list[dict[str, Any]] = attrs.field(factory=list)


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
        self.jobs_dir = self.state_dir / "jobs"
        self.queued_dir = self.state_dir / "queued"
        self.batches_dir = self.state_dir / "batches"
        for d in (self.jobs_dir, self.queued_dir, self.batches_dir):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        cfg = self.settings
        verify: bool | str = True
        if cfg.insecure:
            verify = False
        elif cfg.ca_bundle:
            verify = str(cfg.ca_bundle)
        self.lease_seconds = cfg.lease_seconds
        self.rpc_timeout = cfg.rpc_timeout
        self.batch_window_s = cfg.batch_window_s
        self.batch_max_jobs = cfg.batch_max_jobs
        self.submit_attempts = cfg.submit_attempts
        self._registry_settings(cfg, "BOINC project")
        # The driver's methods block (blahpd calls them from its worker threads): they wait
        # for the client's coroutines on ``loop`` (blahpd's), or on a loop of the client's
        # own. The client holds the connection pool, the MD5 cache and the submission state
        # (staging lock, retry bookkeeping) for every project.
        self.boinc = SyncBoincClient(
            timeout=cfg.timeout,
            verify=verify,
            retries=cfg.retries,
            lease_seconds=self.lease_seconds,
            call_timeout=self.rpc_timeout,
            loop=loop,
        )
        self.client = self.boinc.client
        log.debug(
            "BOINC requests run on %s",
            "the server's event loop" if loop is not None else "an event loop of their own",
        )
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # queued jobs and their groups
        self._cond = threading.Condition()
        self._groups: dict[tuple[Any, ...], _Group] = {}
        self._queued: set[str] = set()
        self._flusher: threading.Thread | None = None
        self._closing = False
        self._submitters = ThreadPoolExecutor(4, thread_name_prefix="boinc-batch")
        # application templates, per (project URL, app): (expiry, templates)
        self._templates: dict[tuple[str, str], tuple[float, Templates]] = {}
        self._template_locks: dict[tuple[str, str], threading.Lock] = {}
        # batches: unfinished jobs of each (loaded from the batch record on first need)
        self._batch_lock = threading.Lock()
        self._pending: dict[str, set[str]] = {}
        # status: where each submitted job is, and what the latest bulk query said of it
        self._where: dict[str, tuple[str | None, str | None, str]] = {}
        self._bulk_state: dict[str, str] = {}
        # This process owns the jobs it queues while it holds a lock on owners/<id>; jobs
        # queued by a process that is gone (its lock free) are taken over: answered IDLE,
        # cancels wait for them, and they are submitted (or found on the project).
        self.owners_dir = self.state_dir / "owners"
        self.owners_dir.mkdir(exist_ok=True, mode=0o700)
        self._owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._owner_fd = self._lock_owner(self._owner, create=True)
        self._adopted: dict[str, int] = {}  # owner id -> fd of its lock, held until recovered
        self._recovering = self._orphans()
        self._queued.update(self._recovering)
        self._forget_dead_owners()
        if self._recovering:
            self._start_flusher()

    # ---- plumbing ---------------------------------------------------------------------------

    def _job_lock(self, native_id: str) -> threading.Lock:
        """One status or cancel at a time per job (outputs are fetched once)."""
        with self._locks_guard:
            return self._locks.setdefault(native_id, threading.Lock())

    def _run(
        self,
        method: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Call one of the (blocking) client's methods; its failure as a
        :class:`DriverError`."""
        return self._run_passing((), method, *args, **kwargs)

    def _run_passing(
        self,
        passing: tuple[type[BoincError], ...],
        method: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`_run`, but the client's errors of the ``passing`` types are raised as
        they are (for the caller to act on)."""
        try:
            return method(*args, **kwargs)
        except TimeoutError:
            raise DriverError(
                f"the BOINC project did not answer in {self.rpc_timeout:g} s"
            ) from None
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

    def _record_path(self, native_id: str) -> Path:
        if not native_id.startswith("blah-") or not all(
            c.isalnum() or c in "-_" for c in native_id
        ):
            raise DriverError(f"malformed BOINC job id {native_id!r}")
        return self.jobs_dir / f"{native_id}.json"

    def _load(self, native_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._record_path(native_id).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DriverError(f"cannot read the record of BOINC job {native_id}: {exc}") from None

    @staticmethod
    def _write(path: Path, data: Mapping[str, Any]) -> None:
        tmp = path.with_name(f"{path.name}.tmp-{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)

    def _save(self, rec: dict[str, Any]) -> None:
        self._write(self._record_path(rec["job"]), rec)

    def _project_of(self, rec: Mapping[str, Any]) -> Project:
        return self._project(rec.get("project_url"), rec.get("authenticator_file"))

    def _templates_for(self, project: Project, app: str) -> Templates:
        """The application's templates, asked at most once per ``TEMPLATE_TTL_S``."""
        key = (project.url, app)
        with self._locks_guard:
            lock = self._template_locks.setdefault(key, threading.Lock())
        with lock:
            cached = self._templates.get(key)
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]
            templates = self._run(self.boinc.get_templates, app, project=project)
            self._templates[key] = (time.monotonic() + TEMPLATE_TTL_S, templates)
            return templates

    # ---- submission -------------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> str:
        if not spec.workdir:
            raise DriverError("BOINC jobs need Iwd: outputs are fetched into it")
        workdir = Path(spec.workdir)
        url_opt = spec.options.get("project_url")
        auth_opt = spec.options.get("authenticator_file")
        url, auth_file = self._resolve(url_opt, auth_opt)
        project = self._project(url_opt, auth_opt)
        inputs = []
        for name in ((spec.stdin,) if spec.stdin and spec.stdin != os.devnull else ()) + tuple(
            spec.transfer_input
        ):
            path = Path(name) if os.path.isabs(name) else workdir / name
            inputs.append((str(path), path.name))
        # HTCondor sends Cmd as a path (Iwd joined with the executable): the app is its name
        app = os.path.basename(spec.executable.rstrip("/")) or spec.executable
        try:
            check_job(BoincJob(name="", args=tuple(spec.arguments), inputs=tuple(inputs)))
        except StagingError as exc:
            raise DriverError(str(exc)) from None
        templates = self._templates_for(project, app)
        if len(inputs) != templates.n_inputs:
            raise DriverError(
                f"the job has {len(inputs)} input files but application {app} takes "
                f"{templates.n_inputs}"
            )
        params = JobParams(
            rsc_memory_bound=spec.memory_mb * 1e6 if spec.memory_mb else None,
            delay_bound=float(spec.runtime_s) if spec.runtime_s else None,
        )
        job = f"blah-{uuid.uuid4().hex[:16]}"
        rec: dict[str, Any] = {
            "job": job,
            "batch": None,
            "state": QUEUED,
            "app": app,
            "args": list(spec.arguments),
            "inputs": [list(i) for i in inputs],
            "params": {"memory": params.rsc_memory_bound, "delay": params.delay_bound},
            "project_url": url_opt,
            "authenticator_file": auth_opt,
            "workdir": str(workdir),
            "stdout": spec.stdout,
            "stderr": spec.stderr,
            "transfer_output": list(spec.transfer_output),
            "cancelled": False,
            "final": None,
        }
        if self.batch_window_s <= 0:  # one batch per job, submitted now
            alone = _Group(_new_batch_name(), project, app, params, 0.0, [rec])
            rec["batch"] = alone.batch
            with self._cond:
                self._queued.add(job)
            self._save(rec)
            self._mark_queued(job)  # found by the next process if this one dies meanwhile
            self._submit_group(alone)
            rec = self._load(job) or rec
            if rec["state"] != SUBMITTED:
                self._forget(job)
                if not rec.get("final"):
                    raise DriverError("the job was not submitted: blahpd is stopping")
                raise DriverError(rec["final"]["hold_reason"])
            return job
        key = (url, auth_file, app, attrs.astuple(params))
        with self._cond:
            group = self._groups.get(key)
            if group is None:
                group = _Group(
                    _new_batch_name(), project, app, params, time.monotonic() + self.batch_window_s
                )
                self._groups[key] = group
            rec["batch"] = group.batch
            self._save(rec)
            self._mark_queued(job)
            group.jobs.append(rec)
            self._queued.add(job)
            if len(group.jobs) >= self.batch_max_jobs:
                group.due = 0.0
            self._cond.notify_all()
        self._start_flusher()
        log.info("queued BOINC job %s (app %s) for batch %s", job, app, group.batch)
        return job

    def _mark_queued(self, job: str) -> None:
        fd = os.open(self.queued_dir / job, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, self._owner.encode())
        finally:
            os.close(fd)

    def _lock_owner(self, owner: str, create: bool = False) -> int | None:
        """An fd holding the lock of ``owner``, or None when its process holds it."""
        fd = os.open(self.owners_dir / owner, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if create else fcntl.LOCK_NB))
        except OSError:
            os.close(fd)
            return None
        return fd

    def _orphans(self) -> set[str]:
        """Queued jobs whose process is gone (their owner's lock is free): now ours."""
        found = set()
        for marker in self.queued_dir.iterdir():
            if "." in marker.name:
                continue
            try:
                owner = marker.read_text().strip()
            except OSError:
                continue
            if owner == self._owner:
                continue
            if owner and owner not in self._adopted:
                if not all(c.isalnum() or c == "-" for c in owner):
                    continue
                fd = self._lock_owner(owner)
                if fd is None:
                    continue  # a live blahpd on this state directory submits it
                self._adopted[owner] = fd
            found.add(marker.name)
        return found

    def _forget_dead_owners(self, min_age_s: float = 300.0) -> None:
        """Remove the lock files of processes gone long ago (not of one just starting)."""
        now = time.time()
        for path in self.owners_dir.iterdir():
            owner = path.name
            if owner == self._owner or owner in self._adopted:
                continue
            try:
                if now - path.stat().st_mtime < min_age_s:
                    continue
            except OSError:
                continue
            fd = self._lock_owner(owner)
            if fd is not None:
                with contextlib.suppress(OSError):
                    path.unlink()
                os.close(fd)

    def _release_adopted(self) -> None:
        """The orphans are recovered: drop the lock files of their dead owners."""
        for owner, fd in self._adopted.items():
            with contextlib.suppress(OSError):
                (self.owners_dir / owner).unlink()
            os.close(fd)
        self._adopted.clear()

    def _unmark_queued(self, job: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.queued_dir / job).unlink()

    def _forget(self, job: str) -> None:
        """Drop the record of a job whose synchronous submission failed."""
        for path in (self._record_path(job), self.queued_dir / job):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _start_flusher(self) -> None:
        with self._cond:
            if self._flusher is not None:
                return
            self._flusher = threading.Thread(
                target=self._flush_loop, name="boinc-batch-flusher", daemon=True
            )
            self._flusher.start()

    def _flush_loop(self) -> None:
        """Submit each group when due (and, beside, the jobs a previous process left
        queued)."""
        if self._recovering:
            self._submitters.submit(self._recover)
        while True:
            with self._cond:
                if self._closing:
                    return
                now = time.monotonic()
                due = [g for g in self._groups.values() if g.due <= now]
                if not due:
                    nxt = min((g.due for g in self._groups.values()), default=None)
                    self._cond.wait(None if nxt is None else max(0.0, nxt - now))
                    continue
                for key in [k for k, g in self._groups.items() if g.due <= now]:
                    del self._groups[key]
            for group in due:
                try:
                    self._submitters.submit(self._submit_group, group)
                except RuntimeError:  # shut down meanwhile: the jobs stay queued, durable
                    return

    def _submit_group(self, group: _Group) -> None:
        """Submit a group's jobs as one batch; hold them all with the reason if it fails."""
        try:
            ok: list[dict[str, Any]] = []
            for rec in group.jobs:
                try:
                    check_job(
                        BoincJob(
                            name=rec["job"],
                            args=(),
                            inputs=tuple((s, n) for s, n in rec["inputs"]),
                        )
                    )
                except StagingError as exc:
                    self._hold(rec, str(exc))
                    continue
                ok.append(rec)
            if not ok:
                return
            names = [rec["job"] for rec in ok]
            first = ok[0]
            self._write(
                self.batches_dir / f"{group.batch}.json",
                {
                    "batch": group.batch,
                    "project_url": first["project_url"],
                    "authenticator_file": first["authenticator_file"],
                    "jobs": names,
                },
            )
            req = SubmitRequest(
                project=group.project,
                batch=group.batch,
                app=group.app,
                jobs=tuple(
                    BoincJob(
                        name=rec["job"],
                        args=tuple(rec["args"]),
                        inputs=tuple((s, n) for s, n in rec["inputs"]),
                    )
                    for rec in ok
                ),
                params=group.params,
            )
            error = self._submit_with_retries(req, names)
            if error is not None and self._closing:
                log.info("batch %s left queued for the next process: stopping", group.batch)
                return
            if error is None:
                for rec in ok:
                    rec["state"] = SUBMITTED
                    self._save(rec)
                    self._unmark_queued(rec["job"])
                    self._where[rec["job"]] = (
                        rec["project_url"],
                        rec["authenticator_file"],
                        group.batch,
                    )
                registry = self.registry
                if registry is not None:
                    for name in names:
                        registry.track(name)
                log.info("submitted BOINC batch %s: %d jobs", group.batch, len(ok))
            else:
                reason = f"BOINC submission failed: {error}"
                log.warning("batch %s (%d jobs): %s", group.batch, len(ok), reason)
                for rec in ok:
                    self._hold(rec, reason)
                self._drop_batch_record(group.batch)
        except Exception as exc:  # never leave a job queued forever
            if self._closing:
                return
            log.exception("submitting batch %s failed", group.batch)
            for rec in group.jobs:
                if rec.get("state") == QUEUED:
                    self._hold(rec, f"BOINC submission failed: {type(exc).__name__}: {exc}")
        finally:
            with self._cond:
                self._queued.difference_update(rec["job"] for rec in group.jobs)
                self._cond.notify_all()

    def _submit_with_retries(self, req: SubmitRequest, names: Sequence[str]) -> str | None:
        """Submit; retry transient failures (after checking the batch did not get in).
        None on success, else the error."""
        error = ""
        for attempt in range(self.submit_attempts):
            if attempt:
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._closing, min(30.0, 2.0 * 2 ** (attempt - 1))
                    )
                if self._closing:
                    return error
                try:
                    if self._batch_has(req.project, req.batch, names):
                        return None
                except DriverError as exc:
                    error = str(exc)
                    continue
            try:
                self.boinc.submit_request(req)
                return None
            except TimeoutError:
                error = f"the BOINC project did not answer in {self.rpc_timeout:g} s"
            except RpcError as exc:
                error = str(exc)
                if not exc.retryable:
                    return error
            except BoincError as exc:  # StagingError, OutputError: retrying cannot help
                return str(exc)
            log.info("submitting batch %s failed (%s): attempt %d", req.batch, error, attempt + 1)
        return error

    def _batch_has(
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
            batches = self._run_passing(
                (NoSuchBatch, *passing), self.boinc.query_batch2, [batch], project=project
            ).batches
        except NoSuchBatch as exc:
            if exc.batch != batch:
                raise _driver_error(exc) from None
            return False
        have = {name for name, _ in batches[0]}
        return all(n in have for n in names)

    def _hold(self, rec: dict[str, Any], reason: str) -> None:
        rec["state"] = HELD_STATE
        rec["final"] = {"status": int(JobStatus.HELD), "hold_reason": reason}
        self._save(rec)
        self._unmark_queued(rec["job"])

    def _drop_batch_record(self, batch: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.batches_dir / f"{batch}.json").unlink()

    def _recover(self) -> None:
        """Jobs a previous process queued: mark those whose batch the project has (with
        them) submitted, submit the others again in a new batch."""
        try:
            self._recover_all()
        except Exception:
            log.exception("recovering queued BOINC jobs failed")
        else:
            self._release_adopted()

    def _recover_all(self) -> None:
        by_batch: dict[str, list[dict[str, Any]]] = {}
        for name in sorted(self._recovering):
            try:
                rec = self._load(name)
            except DriverError as exc:
                log.warning("%s", exc)
                rec = None
            if rec is None or rec.get("state") != QUEUED or rec.get("final"):
                self._unmark_queued(name)
                with self._cond:
                    self._queued.discard(name)
                    self._cond.notify_all()
                continue
            by_batch.setdefault(rec["batch"], []).append(rec)
        for batch, recs in by_batch.items():
            self._recover_batch(batch, recs)

    def _recover_batch(self, batch: str, recs: list[dict[str, Any]]) -> None:
        names = [r["job"] for r in recs]
        attempt = 0
        while True:
            attempt += 1
            try:
                project = self._project_of(recs[0])
                found = self._batch_has(project, batch, names, passing=(BadAuthenticator,))
                break
            except (_NoProject, BadAuthenticator) as exc:
                text = str(exc) if isinstance(exc, DriverError) else str(_driver_error(exc))
                for rec in recs:
                    self._hold(rec, f"BOINC submission failed: {text}")
                with self._cond:
                    self._queued.difference_update(names)
                    self._cond.notify_all()
                return
            except DriverError as exc:
                log.warning("batch %s of queued jobs: %s (retrying)", batch, exc)
                with self._cond:
                    self._cond.wait_for(lambda: self._closing, min(60.0, 2.0 * attempt))
                if self._closing:
                    return
        if found:
            log.info("batch %s of %d queued jobs was submitted before a restart", batch, len(recs))
            for rec in recs:
                rec["state"] = SUBMITTED
                self._save(rec)
                self._unmark_queued(rec["job"])
            registry = self.registry
            if registry is not None:
                for name in names:
                    registry.track(name)
            with self._cond:
                self._queued.difference_update(names)
                self._cond.notify_all()
            return
        new = _new_batch_name()
        log.info("submitting %d jobs queued before a restart in batch %s", len(recs), new)
        self._drop_batch_record(batch)
        for rec in recs:
            rec["batch"] = new
            self._save(rec)
        params = JobParams(
            rsc_memory_bound=recs[0]["params"].get("memory"),
            delay_bound=recs[0]["params"].get("delay"),
        )
        group = _Group(new, project, recs[0]["app"], params, 0.0, recs)
        self._submit_group(group)

    # ---- status -----------------------------------------------------------------------------

    def status(self, native_id: str) -> JobInfo:
        with self._job_lock(native_id):
            rec = self._load(native_id)
            if rec is None or rec["final"]:
                return self._answer_from(rec)
            if rec.get("state") == QUEUED:
                return JobInfo(JobStatus.IDLE)
        registry = self.registry
        if registry is None:
            return self.query_status(native_id)
        return registry.status(native_id)

    @staticmethod
    def _answer_from(rec: Mapping[str, Any] | None) -> JobInfo:
        if rec is None:
            return JobInfo(
                JobStatus.COMPLETED,
                exit_reason="job unknown to this server (exit status unknown)",
            )
        return _info(rec["final"])

    def bulk_status(self, native_ids: Sequence[str]) -> Mapping[str, JobInfo]:
        """States of queued and running jobs from one query_batch2 per project (naming every
        batch of the jobs); DONE and ERROR jobs are left out (the per-job path fetches their
        outputs or failure details)."""
        projects: dict[tuple[str | None, str | None], dict[str, list[str]]] = {}
        for job in native_ids:
            where = self._where.get(job)
            if where is None:
                try:
                    rec = self._load(job)
                except DriverError:
                    continue
                if rec is None or rec["final"] or rec.get("state") == QUEUED:
                    continue
                where = (rec.get("project_url"), rec.get("authenticator_file"), rec["batch"])
                self._where[job] = where
            projects.setdefault(where[:2], {}).setdefault(where[2], []).append(job)
        found: dict[str, JobInfo] = {}
        errors: list[str] = []
        for (url, auth_file), batches in projects.items():
            try:
                found.update(self._bulk_one(self._project(url, auth_file), batches))
            except DriverError as exc:
                errors.append(str(exc))
        if errors and not found:
            raise DriverError(errors[0])
        return found

    def _bulk_one(self, project: Project, batches: Mapping[str, list[str]]) -> dict[str, JobInfo]:
        names = sorted(batches)
        found: dict[str, JobInfo] = {}
        while names:
            try:
                replies = self._run_passing(
                    (NoSuchBatch,), self.boinc.query_batch2, names, project=project
                ).batches
                break
            except NoSuchBatch as exc:
                if exc.batch not in names:
                    raise _driver_error(exc) from None
                names.remove(exc.batch)  # its jobs are asked one by one
        else:
            return found
        for jobs in replies:
            for job, state in jobs:
                if state in ("UNSENT", "QUEUED"):
                    found[job] = JobInfo(JobStatus.IDLE)
                elif state == "IN_PROGRESS":
                    found[job] = JobInfo(JobStatus.RUNNING)
                elif state in ("DONE", "ERROR"):
                    self._bulk_state[job] = state
        return found

    def query_status(self, native_id: str) -> JobInfo:
        """One job's state, asked of the project for its batch alone (outputs are fetched
        before a DONE job is reported COMPLETED)."""
        with self._job_lock(native_id):
            rec = self._load(native_id)
            if rec is None or rec["final"]:
                return self._answer_from(rec)
            if rec.get("state") == QUEUED:
                return JobInfo(JobStatus.IDLE)
            project = self._project_of(rec)
            state = self._bulk_state.pop(native_id, "")
            if not state:
                try:
                    batches = self._run_passing(
                        (NoSuchBatch,), self.boinc.query_batch2, [rec["batch"]], project=project
                    ).batches
                except NoSuchBatch as exc:
                    if exc.batch != rec["batch"]:
                        raise _driver_error(exc) from None
                    return self._finish(
                        rec,
                        {
                            "status": int(JobStatus.COMPLETED),
                            "exit_reason": "the BOINC batch no longer exists",
                        },
                    )
                state = dict(batches[0]).get(native_id, "")
            if state in ("UNSENT", "QUEUED"):
                return JobInfo(JobStatus.IDLE)
            if state == "IN_PROGRESS":
                return JobInfo(JobStatus.RUNNING)
            if state == "DONE":
                return self._completed(rec, project)
            if state == "ERROR":
                return self._failed(rec, project)
            raise DriverError(f"BOINC job {native_id}: unexpected status {state or 'missing'!r}")

    def _completed(self, rec: dict[str, Any], project: Project) -> JobInfo:
        """Fetch a DONE job's outputs, then call it COMPLETED.

        The outputs land in a directory of the job's own first, so that Out gets this job's
        first output even while jobs sharing the Iwd (a ``queue N``) fetch theirs; then they
        are moved into the Iwd, each file in one rename.
        """
        workdir = Path(rec["workdir"])
        wanted = rec["transfer_output"]
        output_names = self._templates_for(project, rec["app"]).output_names
        stage = Path(tempfile.mkdtemp(prefix=f".{rec['job']}-", dir=workdir))
        try:
            fetch = FetchRequest(
                project=project,
                job=rec["job"],
                iwd=str(stage),
                stderr_file=str(_in(workdir, rec["stderr"])) if rec["stderr"] else os.devnull,
                mode="SOME" if wanted else "ALL",
                specs=tuple((n, n) for n in wanted),
            )
            done = self._run(self.boinc.fetch_request, fetch, output_names)
            if rec["stdout"]:
                first = stage / output_names[0] if output_names else None
                if first is not None and first.is_file():
                    shutil.copyfile(first, _in(workdir, rec["stdout"]))
            for path in sorted(p for p in stage.rglob("*") if p.is_file()):
                dest = workdir / path.relative_to(stage)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, dest)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        return self._finish(
            rec,
            {
                "status": int(JobStatus.COMPLETED),
                "exit_code": done.exit_status,
                "wallclock_s": done.elapsed_time,
                "user_cpu_s": done.cpu_time,
            },
        )

    def _failed(self, rec: dict[str, Any], project: Project) -> JobInfo:
        """A job BOINC ended in ERROR: COMPLETED with the failed instance's exit status, and
        what is known of the failure in its Err file.

        query_completed_job gives the failed instance's stderr where it works; a stock PHP 8
        server answers it with HTTP 500 for any job without a canonical instance, so the
        exit status and the workunit's error come from query_batch's job details.
        """
        if rec["cancelled"]:
            return self._finish(rec, {"status": int(JobStatus.REMOVED)})
        done: CompletedJob | None = None
        problems: list[str] = []
        try:
            done = self._run(self.boinc.query_completed_job, rec["job"], project=project)
        except DriverError as exc:
            problems.append(str(exc))
        detail: JobDetail | None = None
        if done is None or not done.exit_status:
            try:
                details = self._run(self.boinc.query_batch, rec["batch"], project=project).jobs
                detail = next((d for d in details if d.name == rec["job"]), None)
            except DriverError as exc:
                problems.append(f"job details: {exc}")
        exit_status = (done.exit_status if done else 0) or (
            detail.exit_status if detail else None
        )
        error = detail.error if detail and detail.error else ""
        if done is not None and done.error_mask and not error:
            error = f"error mask {done.error_mask}"
        reason = "BOINC job failed"
        if exit_status:
            reason += f" with exit status {exit_status}"
        if error:
            reason += f" ({error})"
        elif problems and not exit_status:
            reason += f": {problems[0]}"
        self._write_err(rec, reason, done.stderr if done else "")
        final: dict[str, Any] = {
            "status": int(JobStatus.COMPLETED),
            "exit_code": exit_status or 1,
            "exit_reason": reason,
        }
        if done is not None:
            final["wallclock_s"] = done.elapsed_time
            final["user_cpu_s"] = done.cpu_time
        return self._finish(rec, final)

    def _write_err(self, rec: dict[str, Any], reason: str, stderr: str) -> None:
        """The job's Err file: the failed instance's stderr when the server gave it, else
        (and after it) one line saying how the job failed."""
        if not rec["stderr"] or rec["stderr"] == os.devnull:
            return
        err = _in(Path(rec["workdir"]), rec["stderr"])
        text = stderr if stderr.endswith("\n") or not stderr else stderr + "\n"
        try:
            err.write_text(f"{text}{reason} (job {rec['job']})\n")
        except OSError as exc:
            log.warning("cannot write the Err file %s of job %s: %s", err, rec["job"], exc)

    def _finish(self, rec: dict[str, Any], final: dict[str, Any]) -> JobInfo:
        """Record the final state; retire the batch once all its jobs are final (best
        effort: it expires anyway)."""
        rec["final"] = final
        self._save(rec)
        self._where.pop(rec["job"], None)
        self._bulk_state.pop(rec["job"], None)
        if self._batch_done(rec):
            try:
                self._run(self.boinc.retire_batch, rec["batch"], project=self._project_of(rec))
                log.info("retired BOINC batch %s", rec["batch"])
            except DriverError as exc:
                log.warning("retiring batch %s failed: %s", rec["batch"], exc)
            self._drop_batch_record(rec["batch"])
        return _info(final)

    def _batch_done(self, rec: Mapping[str, Any]) -> bool:
        """Note that ``rec``'s job is final; True once every job of its batch is (for the
        one caller that makes it so)."""
        batch, job = rec["batch"], rec["job"]
        with self._batch_lock:
            pending = self._pending.get(batch)
            if pending is None:
                try:
                    data = json.loads((self.batches_dir / f"{batch}.json").read_text())
                    members = [str(n) for n in data["jobs"]]
                except FileNotFoundError:
                    return True  # a batch of one job (submitted before batches were shared)
                except (OSError, ValueError, KeyError) as exc:
                    log.warning("batch record of %s unreadable (%s): not retiring it", batch, exc)
                    return False
                pending = set()
                for name in members:
                    if name == job:
                        continue
                    try:
                        other = self._load(name)
                    except DriverError:
                        other = None
                    if other is not None and not other["final"]:
                        pending.add(name)
                self._pending[batch] = pending
            pending.discard(job)
            if pending:
                return False
            del self._pending[batch]
            return True

    # ---- other requests ---------------------------------------------------------------------

    def cancel(self, native_id: str) -> None:
        with self._job_lock(native_id):
            rec = self._load(native_id)
            if rec is None:
                return
            if rec.get("state") == QUEUED and not rec["final"]:
                # Submitted first (it is in a batch with others), then aborted.
                self._await_submission(native_id)
                rec = self._load(native_id)
                if rec is None:
                    return
                if rec.get("state") == QUEUED and not rec["final"]:
                    raise DriverError(f"BOINC job {native_id} is still being submitted")
            if rec["final"]:
                if rec["final"]["status"] == int(JobStatus.HELD):
                    rec["final"] = {"status": int(JobStatus.REMOVED)}
                    self._save(rec)
                return
            with contextlib.suppress(NoSuchJob):  # over already, or never made it
                self._run_passing(
                    (NoSuchJob,), self.boinc.abort_jobs, [native_id], project=self._project_of(rec)
                )
            rec["cancelled"] = True
            self._finish(rec, {"status": int(JobStatus.REMOVED)})
        registry = self.registry
        if registry is not None:
            registry.invalidate(native_id)

    def _await_submission(self, native_id: str) -> None:
        """Submit the queued job's group now and wait until it is."""
        deadline = time.monotonic() + self.rpc_timeout
        with self._cond:
            for group in self._groups.values():
                if any(r["job"] == native_id for r in group.jobs):
                    group.due = 0.0
            self._cond.notify_all()
            while native_id in self._queued:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DriverError(f"BOINC job {native_id} is still being submitted")
                self._cond.wait(left)

    async def aclose(self) -> None:
        """Stop: cancel the BOINC calls still waiting (their requests fail) and leave the
        jobs still queued, durable, to the next process on this state directory."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._submitters.shutdown(wait=False, cancel_futures=True)
        await self.boinc.aclose()

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
        self._run(self.boinc.ping, project=self._project(None, None))


def _info(final: Mapping[str, Any]) -> JobInfo:
    return JobInfo(
        status=JobStatus(final["status"]),
        exit_code=final.get("exit_code"),
        exit_reason=final.get("exit_reason"),
        wallclock_s=final.get("wallclock_s"),
        user_cpu_s=final.get("user_cpu_s"),
        hold_reason=final.get("hold_reason"),
    )
