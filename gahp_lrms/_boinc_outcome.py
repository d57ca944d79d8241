"""What the boinc driver answers of a job, and what it leaves in the job's directory: the
record's own answer, query_batch2's states, a failed job's exit status and reason, the
fetched outputs moved into the Iwd, the Err file of a failure."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from gahp_boinc import CompletedJob, JobDetail, UnsafeOutput, check_output_name, open_inside
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
    copy of the ``first`` output.

    ``first`` comes from the server: it must be a plain file name, and only a regular file
    inside ``stage`` is read (never through a link); links and other non-files in ``stage``
    are left there. :class:`~gahp_boinc.UnsafeOutput` otherwise.
    """
    root = stage.resolve()
    if stdout is not None and first is not None:
        fd = open_inside(root, check_output_name(first))
        if fd is not None:
            _copy_to(fd, stdout)
    for dirpath, _dirs, files in os.walk(root):  # never into a linked directory
        for name in sorted(files):
            path = Path(dirpath, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                log.warning("output %s is not a regular file: not delivered", path)
                continue
            dest = workdir / path.relative_to(root)
            if not dest.parent.resolve().is_relative_to(workdir.resolve()):
                raise UnsafeOutput(f"output {dest} would land outside {workdir}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, dest)


def _copy_to(fd: int, dest: Path) -> None:
    """Copy the open file ``fd`` (closed here) to ``dest``, as :func:`_write_new` does."""
    with open(fd, "rb") as src:
        _write_new(dest, lambda fh: shutil.copyfileobj(src, fh))


def _write_new(dest: Path, write: Callable[[BinaryIO], object]) -> None:
    """``dest`` written by ``write`` into a new temporary file beside it (mode 0644 less
    the umask, never through a planted link) and renamed over it."""
    tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}-{random.getrandbits(32):08x}")
    try:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(out, "wb") as fh:
            write(fh)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_err(rec: JobRecord, reason: str, stderr: str) -> None:
    """The job's Err file: the failed instance's stderr when the server gave it, else (and
    after it) one line saying how the job failed."""
    if not rec.stderr or rec.stderr == os.devnull:
        return
    err = job_path(Path(rec.workdir), rec.stderr)
    text = stderr if stderr.endswith("\n") or not stderr else stderr + "\n"
    data = f"{text}{reason} (job {rec.job})\n".encode("utf-8", "replace")
    try:
        _write_new(err, lambda fh: fh.write(data))
    except OSError as exc:
        log.warning("cannot write the Err file %s of job %s: %s", err, rec.job, exc)
