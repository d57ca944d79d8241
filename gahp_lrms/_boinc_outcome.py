"""What the boinc driver answers of a job, and what it leaves in the job's directory: the
record's own answer, query_batch2's states, a failed job's exit status and reason, the
fetched outputs moved into the Iwd, the Err file of a failure."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from gahp_boinc import CompletedJob, JobDetail
from gahp_lrms._boinc_store import JobRecord, JobState
from gahp_lrms.model import JobInfo, JobStatus

log = logging.getLogger("gahp.lrms.boinc")


def job_path(workdir: Path, name: str) -> Path:
    """A job file: absolute as given, else relative to the job's Iwd."""
    path = Path(name)
    return path if path.is_absolute() else workdir / path


UNFINISHED = {
    "UNSENT": JobInfo(JobStatus.IDLE),
    "QUEUED": JobInfo(JobStatus.IDLE),
    "IN_PROGRESS": JobInfo(JobStatus.RUNNING),
}
"""query_batch2's states of unfinished jobs, as answered."""


def record_answer(rec: JobRecord | None) -> JobInfo | None:
    """What a job's record alone says: unknown, final, or IDLE while queued; None when the
    project must be asked."""
    if rec is None:
        return JobInfo(
            JobStatus.COMPLETED, exit_reason="job unknown to this server (exit status unknown)"
        )
    if rec.final is not None:
        return rec.final
    return JobInfo(JobStatus.IDLE) if rec.state is JobState.QUEUED else None


def describe_failure(
    done: CompletedJob | None, detail: JobDetail | None, problems: Sequence[str]
) -> tuple[int | None, str]:
    """A failed job's exit status and ExitReason, from what query_completed_job (``done``)
    and query_batch (``detail``) said, and the ``problems`` asking them."""
    exit_status = (done.exit_status if done else 0) or (detail.exit_status if detail else None)
    error = _failure_error(done, detail)
    reason = "BOINC job failed"
    if exit_status:
        reason += f" with exit status {exit_status}"
    if error:
        reason += f" ({error})"
    elif problems and not exit_status:
        reason += f": {problems[0]}"
    return exit_status, reason


def _failure_error(done: CompletedJob | None, detail: JobDetail | None) -> str:
    """The workunit's error in words, else the instance's error mask; "" when neither."""
    if detail is not None and detail.error:
        return detail.error
    return f"error mask {done.error_mask}" if done is not None and done.error_mask else ""


def deliver_outputs(stage: Path, workdir: Path, stdout: Path | None, first: str | None) -> None:
    """Move fetched outputs from ``stage`` into the Iwd, each file in one rename; Out gets a
    copy of the ``first`` output."""
    if stdout is not None and first is not None and (stage / first).is_file():
        shutil.copyfile(stage / first, stdout)
    for path in sorted(p for p in stage.rglob("*") if p.is_file()):
        dest = workdir / path.relative_to(stage)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)


def write_err(rec: JobRecord, reason: str, stderr: str) -> None:
    """The job's Err file: the failed instance's stderr when the server gave it, else (and
    after it) one line saying how the job failed."""
    if not rec.stderr or rec.stderr == os.devnull:
        return
    err = job_path(Path(rec.workdir), rec.stderr)
    text = stderr if stderr.endswith("\n") or not stderr else stderr + "\n"
    try:
        err.write_text(f"{text}{reason} (job {rec.job})\n")
    except OSError as exc:
        log.warning("cannot write the Err file %s of job %s: %s", err, rec.job, exc)
