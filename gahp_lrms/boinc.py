"""The ``boinc`` job driver: a BOINC project as a batch system, for blahpd.

HTCondor 10 dropped its ``boinc`` grid type but still speaks BLAH (``grid_resource =
batch boinc``); this driver maps the BLAH job model onto BOINC's with gahp_boinc's RPC
client and MD5 staging:

- one BLAH job is one BOINC job in a batch of its own; Cmd names the BOINC application
  (its last path component: HTCondor sends the executable joined to Iwd);
- In and TransferInput are the job's input files, in that order (staged by MD5);
- when BOINC says DONE the outputs are fetched into Iwd (TransferOutput: just those;
  otherwise all), Out receives the first output file and Err the job's stderr, and only
  then is the job COMPLETED (ExitCode, RemoteWallClockTime, RemoteUserCpu);
- a failed job (BOINC ERROR) is COMPLETED with the failed instance's exit status as ExitCode
  (1 when the server does not say), an ExitReason, and what is known of the failure in Err;
  not HELD: BOINC cannot run it again, so there is nothing to release;
- cancel aborts the job (REMOVED); hold and resume are refused (BOINC cannot pause a job);
- the batch is retired once its job is final and its outputs collected.

What the driver knows of each job is kept under ``state_dir`` (never the authenticator),
so ids stay valid across blahpd restarts, after the batch is retired too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gahp_boinc.outputs import FetchRequest, OutputError, fetch_output
from gahp_boinc.replies import RpcError
from gahp_boinc.rpc import BoincRpc, CompletedJob, JobDetail, JobParams, Project
from gahp_boinc.staging import Md5Cache, StagingError
from gahp_boinc.submit import JobSpec as BoincJob
from gahp_boinc.submit import SubmitRequest, SubmitState, submit
from gahp_core.config import ConfigError, read_secret_file
from gahp_lrms.base import Driver
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus

log = logging.getLogger("gahp.lrms.boinc")

T = TypeVar("T")


def _in(workdir: Path, name: str) -> Path:
    """A job file: absolute as given, else relative to the job's Iwd."""
    path = Path(name)
    return path if path.is_absolute() else workdir / path


def _read_authenticator(path: str) -> str:
    try:
        return read_secret_file(path, "BOINC authenticator")
    except ConfigError as exc:
        raise DriverError(str(exc)) from None


class BoincDriver(Driver):
    """Jobs on a BOINC project through its remote-submission RPCs."""

    name = "boinc"
    config_keys = frozenset(
        {
            "project_url",
            "authenticator_file",
            "timeout",
            "retries",
            "ca_bundle",
            "insecure",
            "lease_seconds",
            "rpc_timeout",
        }
    )

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        self.jobs_dir = self.state_dir / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        verify: bool | str = True
        if config.get("insecure"):
            verify = False
        elif config.get("ca_bundle"):
            verify = str(config["ca_bundle"])
        self.lease_seconds = float(config.get("lease_seconds", 7 * 24 * 3600))
        self.rpc_timeout = float(config.get("rpc_timeout", 280))
        self.md5 = Md5Cache()
        self.submit_state = SubmitState()  # shared staging lock and retry bookkeeping
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="boinc-driver-loop", daemon=True
        )
        self._thread.start()
        self.rpc = BoincRpc(
            BoincRpc.make_client(float(config.get("timeout", 60)), verify),
            max_tries=1 + int(config.get("retries", 4)),
        )
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # ---- plumbing ---------------------------------------------------------------------------

    def _job_lock(self, native_id: str) -> threading.Lock:
        """One status or cancel at a time per job (outputs are fetched once)."""
        with self._locks_guard:
            return self._locks.setdefault(native_id, threading.Lock())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(self.rpc_timeout)
        except TimeoutError:
            fut.cancel()
            raise DriverError(
                f"the BOINC project did not answer in {self.rpc_timeout:g} s"
            ) from None
        except (RpcError, StagingError, OutputError) as exc:
            raise DriverError(str(exc)) from None

    async def _in_worker(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _project(self, url: str | None, auth_file: str | None) -> Project:
        url = url or self.config.get("project_url")
        auth_file = auth_file or self.config.get("authenticator_file")
        if not url or not auth_file:
            raise DriverError(
                "no BOINC project: set project_url and authenticator_file in the boinc "
                "driver's configuration, or BoincProjectUrl/BoincAuthenticatorFile in the job"
            )
        if not str(url).startswith(("http://", "https://")):
            raise DriverError(f"BOINC project URL must start with http:// or https://: {url}")
        url = str(url) if str(url).endswith("/") else f"{url}/"
        return Project(url=url, authenticator=_read_authenticator(str(auth_file)))

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

    def _save(self, rec: dict[str, Any]) -> None:
        path = self._record_path(rec["job"])
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(rec, fh)
        os.replace(tmp, path)

    def _project_of(self, rec: dict[str, Any]) -> Project:
        return self._project(rec.get("project_url"), rec.get("authenticator_file"))

    # ---- the Driver interface ---------------------------------------------------------------

    def submit(self, spec: JobSpec) -> str:
        if not spec.workdir:
            raise DriverError("BOINC jobs need Iwd: outputs are fetched into it")
        workdir = Path(spec.workdir)
        project = self._project(
            spec.options.get("project_url"), spec.options.get("authenticator_file")
        )
        inputs = []
        for name in ((spec.stdin,) if spec.stdin and spec.stdin != os.devnull else ()) + tuple(
            spec.transfer_input
        ):
            path = Path(name) if os.path.isabs(name) else workdir / name
            inputs.append((str(path), path.name))
        job = f"blah-{uuid.uuid4().hex[:16]}"
        batch = f"{job}-batch"
        params = JobParams(
            rsc_memory_bound=spec.memory_mb * 1e6 if spec.memory_mb else None,
            delay_bound=float(spec.runtime_s) if spec.runtime_s else None,
        )
        # HTCondor sends Cmd as a path (Iwd joined with the executable): the app is its name
        app = os.path.basename(spec.executable.rstrip("/")) or spec.executable
        req = SubmitRequest(
            project=project,
            batch=batch,
            app=app,
            jobs=(BoincJob(name=job, args=spec.arguments, inputs=tuple(inputs)),),
            params=params,
        )
        self._run(
            submit(self.rpc, req, self.md5, self._in_worker, self.lease_seconds, self.submit_state)
        )
        self._save(
            {
                "job": job,
                "batch": batch,
                "app": app,
                "project_url": spec.options.get("project_url"),
                "authenticator_file": spec.options.get("authenticator_file"),
                "workdir": str(workdir),
                "stdout": spec.stdout,
                "stderr": spec.stderr,
                "transfer_output": list(spec.transfer_output),
                "cancelled": False,
                "final": None,
            }
        )
        log.info("submitted BOINC job %s (app %s) in batch %s", job, app, batch)
        return job

    def status(self, native_id: str) -> JobInfo:
        with self._job_lock(native_id):
            rec = self._load(native_id)
            if rec is None:
                return JobInfo(
                    JobStatus.COMPLETED,
                    exit_reason="job unknown to this server (exit status unknown)",
                )
            if rec["final"]:
                return _info(rec["final"])
            project = self._project_of(rec)
            try:
                _, batches = self._run(self.rpc.query_batch2(project, [rec["batch"]], "0"))
            except DriverError as exc:
                if str(exc).endswith(f"no batch named {rec['batch']}"):
                    return self._finish(
                        rec,
                        {
                            "status": int(JobStatus.COMPLETED),
                            "exit_reason": "the BOINC batch no longer exists",
                        },
                    )
                raise
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
            done = self._run(fetch_output(self.rpc, fetch))
            if rec["stdout"]:
                templates = self._run(self.rpc.get_templates(project, job_name=rec["job"]))
                first = stage / templates.output_names[0] if templates.output_names else None
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
            done = self._run(self.rpc.query_completed_job(project, rec["job"]))
        except DriverError as exc:
            problems.append(str(exc))
        detail: JobDetail | None = None
        if done is None or not done.exit_status:
            try:
                details = self._run(self.rpc.query_batch_details(project, rec["batch"]))
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
        """Record the final state, then retire the batch (best effort: it expires anyway)."""
        rec["final"] = final
        self._save(rec)
        try:
            self._run(self.rpc.retire_batch(self._project_of(rec), rec["batch"]))
        except DriverError as exc:
            log.warning("retiring batch %s failed: %s", rec["batch"], exc)
        return _info(final)

    def cancel(self, native_id: str) -> None:
        with self._job_lock(native_id):
            rec = self._load(native_id)
            if rec is None or rec["final"]:
                return
            try:
                self._run(self.rpc.abort_jobs(self._project_of(rec), [native_id]))
            except DriverError as exc:
                if "no job" not in str(exc):
                    raise
            rec["cancelled"] = True
            self._finish(rec, {"status": int(JobStatus.REMOVED)})

    def hold(self, native_id: str) -> None:
        raise DriverError("BOINC jobs cannot be held: a volunteer may be running them")

    def resume(self, native_id: str) -> None:
        raise DriverError("BOINC jobs cannot be held, so there is nothing to resume")

    def ping(self) -> None:
        self._run(self.rpc.ping(self._project(None, None)))


def _info(final: Mapping[str, Any]) -> JobInfo:
    return JobInfo(
        status=JobStatus(final["status"]),
        exit_code=final.get("exit_code"),
        exit_reason=final.get("exit_reason"),
        wallclock_s=final.get("wallclock_s"),
        user_cpu_s=final.get("user_cpu_s"),
    )
