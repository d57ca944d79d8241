"""What the boinc driver keeps of its jobs and batches under its state directory.

- ``jobs/<id>.json``: a :class:`JobRecord` (never the authenticator);
- ``queued/<id>``: the job is queued; the file names the process that owns it
  (see :mod:`gahp_lrms._boinc_owners`);
- ``batches/<name>.json``: a :class:`BatchRecord`, the jobs of a batch submitted together.

The JSON is that of the threaded driver before it, so a state directory survives an
upgrade (and a downgrade).
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from gahp_boinc import BoincJob, JobOptions, JobParams
from gahp_core import private_dir, write_private
from gahp_lrms.model import DriverError, JobInfo, JobStatus

log = logging.getLogger("gahp.lrms.boinc")


class JobState(enum.Enum):
    """Where a job is on its way to the project."""

    QUEUED = "queued"  # waiting for its batch to be submitted
    SUBMITTED = "submitted"  # on the project
    HELD = "held"  # refused at submission (``final`` says why)


_FINAL_FIELDS = ("exit_code", "exit_reason", "wallclock_s", "user_cpu_s", "hold_reason")


def final_to_json(info: JobInfo) -> dict[str, Any]:
    """A final state as stored: the status and the fields known."""
    data: dict[str, Any] = {"status": int(info.status)}
    for name in _FINAL_FIELDS:
        value = getattr(info, name)
        if value is not None:
            data[name] = value
    return data


def final_from_json(data: Mapping[str, Any]) -> JobInfo:
    """The inverse of :func:`final_to_json`."""
    return JobInfo(status=JobStatus(data["status"]), **{n: data.get(n) for n in _FINAL_FIELDS})


def _pairs(value: Any) -> list[tuple[str, str]]:
    return [(str(src), str(name)) for src, name in value]


def _opt_int(value: object) -> int | None:
    return None if value is None else int(str(value))


REPLICATION_ATTRIBUTES = {
    "min_quorum": "BoincMinQuorum",
    "target_nresults": "BoincTargetNresults",
    "max_error_results": "BoincMaxErrorResults",
    "max_total_results": "BoincMaxTotalResults",
    "max_success_results": "BoincMaxSuccessResults",
}
"""The submit-ad attribute of each replication option (set in the job's own input template)."""


def replication_kwargs(values: Mapping[str, int]) -> dict[str, Any]:
    """JobOptions keyword arguments of replication values (only the known keys)."""
    return {k: int(v) for k, v in values.items() if k in REPLICATION_ATTRIBUTES}


@attrs.define
class JobRecord:
    """One BLAH job as a BOINC job: what is needed to submit it, fetch its outputs and
    answer its status."""

    job: str
    app: str
    workdir: str
    batch: str | None = None
    state: JobState = JobState.QUEUED
    args: list[str] = attrs.field(factory=list)
    inputs: list[tuple[str, str]] = attrs.field(factory=list, converter=_pairs)
    """(local path, name) of each input file, in the order of the input template."""
    memory: float | None = None
    """rsc_memory_bound (bytes), from RequestMemory; ``delay``: delay_bound (s), from
    BatchRuntime."""
    delay: float | None = None
    project_url: str | None = None
    """As the job named it (None: the configured one); likewise the authenticator file."""
    authenticator_file: str | None = None
    stdout: str | None = None
    """Out (a copy of the first output) and Err, relative to ``workdir`` unless absolute."""
    stderr: str | None = None
    transfer_output: list[str] = attrs.field(factory=list)
    priority: int | None = None
    """BoincPriority; ``target_host``, ``target_user``: BoincTargetHost, BoincTargetUser."""
    target_host: int = 0
    target_user: int = 0
    replication: dict[str, int] = attrs.field(factory=dict)
    """BoincMinQuorum... by their JobOptions names (min_quorum...)."""
    cancelled: bool = False
    final: JobInfo | None = None

    @property
    def queued(self) -> bool:
        """Still waiting for its batch."""
        return self.state is JobState.QUEUED and self.final is None

    @property
    def params(self) -> JobParams:
        return JobParams(rsc_memory_bound=self.memory, delay_bound=self.delay)

    def boinc_job(self, with_args: bool = True) -> BoincJob:
        """The job as submitted (``with_args`` false: to check its inputs only)."""
        args = tuple(self.args) if with_args else ()
        options = JobOptions(
            priority=self.priority,
            target_host=self.target_host,
            target_user=self.target_user,
            **replication_kwargs(self.replication),
        )
        return BoincJob(name=self.job, args=args, inputs=tuple(self.inputs), options=options)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "batch": self.batch,
            "state": self.state.value,
            "app": self.app,
            "args": list(self.args),
            "inputs": [list(i) for i in self.inputs],
            "params": {"memory": self.memory, "delay": self.delay},
            "project_url": self.project_url,
            "authenticator_file": self.authenticator_file,
            "workdir": self.workdir,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "transfer_output": list(self.transfer_output),
            "cancelled": self.cancelled,
            "final": final_to_json(self.final) if self.final is not None else None,
        } | self._options_json()

    def _options_json(self) -> dict[str, Any]:
        """The BOINC options (BoincPriority...) when any is set (records stay as they were
        without)."""
        if (
            self.priority is None
            and not self.target_host
            and not self.target_user
            and not self.replication
        ):
            return {}
        return {
            "options": {
                "priority": self.priority,
                "target_host": self.target_host,
                "target_user": self.target_user,
            }
            | dict(self.replication)
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobRecord:
        params = data.get("params") or {}
        final = data.get("final")
        return cls(
            job=str(data["job"]),
            app=str(data["app"]),
            workdir=str(data["workdir"]),
            batch=data.get("batch"),
            state=JobState(data.get("state", JobState.SUBMITTED.value)),
            args=[str(a) for a in data.get("args", ())],
            inputs=data.get("inputs", ()),
            memory=params.get("memory"),
            delay=params.get("delay"),
            project_url=data.get("project_url"),
            authenticator_file=data.get("authenticator_file"),
            stdout=data.get("stdout"),
            stderr=data.get("stderr"),
            transfer_output=[str(n) for n in data.get("transfer_output", ())],
            priority=_opt_int((data.get("options") or {}).get("priority")),
            target_host=int((data.get("options") or {}).get("target_host") or 0),
            target_user=int((data.get("options") or {}).get("target_user") or 0),
            replication={
                k: int(v)
                for k, v in (data.get("options") or {}).items()
                if k in REPLICATION_ATTRIBUTES and v is not None
            },
            cancelled=bool(data.get("cancelled", False)),
            final=final_from_json(final) if final else None,
        )


@attrs.define
class BatchRecord:
    """A batch as submitted: its jobs and where it is."""

    batch: str
    project_url: str | None
    authenticator_file: str | None
    jobs: list[str]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``data`` in one rename (readers never see half a file)."""
    write_private(path, json.dumps(data).encode(), durable=False)


class JobStore:
    """The job, queue and batch records under ``state_dir``. One event loop writes them
    (no locking), or a worker thread for a coroutine of it that owns the records meanwhile;
    each file is replaced in one rename, so any thread may read a record."""

    def __init__(self, state_dir: Path) -> None:
        self.jobs_dir = state_dir / "jobs"
        self.queued_dir = state_dir / "queued"
        self.batches_dir = state_dir / "batches"
        for d in (self.jobs_dir, self.queued_dir, self.batches_dir):
            private_dir(d)
        # unfinished jobs of each batch (loaded from its record on first need)
        self._pending: dict[str, set[str]] = {}

    # ---- jobs ---------------------------------------------------------------------------------

    def path(self, job: str) -> Path:
        """The record's file; :class:`DriverError` for a malformed id."""
        if not job.startswith("blah-") or not all(c.isalnum() or c in "-_" for c in job):
            raise DriverError(f"malformed BOINC job id {job!r}")
        return self.jobs_dir / f"{job}.json"

    def load(self, job: str) -> JobRecord | None:
        """The job's record; None when there is none."""
        try:
            return JobRecord.from_json(json.loads(self.path(job).read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DriverError(f"cannot read the record of BOINC job {job}: {exc}") from None

    def save(self, rec: JobRecord) -> None:
        write_json(self.path(rec.job), rec.to_json())

    def queue(self, rec: JobRecord, owner: str) -> None:
        """Record a queued job, owned by ``owner``."""
        self.save(rec)
        write_private(self.queued_dir / rec.job, owner.encode(), durable=False)

    def unqueue(self, job: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.queued_dir / job).unlink()

    def queued(self) -> Iterator[tuple[str, str]]:
        """(job, owner) of each queued job (owner "" when unreadable)."""
        for marker in self.queued_dir.iterdir():
            if "." in marker.name:
                continue
            try:
                yield marker.name, marker.read_text().strip()
            except OSError:
                continue

    def forget(self, job: str) -> None:
        """Drop every trace of a job (one whose submission failed before it had an id)."""
        for path in (self.path(job), self.queued_dir / job):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def mark_submitted(self, rec: JobRecord) -> None:
        rec.state = JobState.SUBMITTED
        self.save(rec)
        self.unqueue(rec.job)

    def hold(self, rec: JobRecord, reason: str) -> None:
        """The job was refused: HELD with ``reason``."""
        rec.state = JobState.HELD
        rec.final = JobInfo(JobStatus.HELD, hold_reason=reason)
        self.save(rec)
        self.unqueue(rec.job)

    # ---- batches ------------------------------------------------------------------------------

    def _batch_path(self, batch: str) -> Path:
        return self.batches_dir / f"{batch}.json"

    def save_batch(self, record: BatchRecord) -> None:
        write_json(self._batch_path(record.batch), record.to_json())

    def drop_batch(self, batch: str) -> None:
        self._pending.pop(batch, None)
        with contextlib.suppress(FileNotFoundError):
            self._batch_path(batch).unlink()

    def batch_members(self, batch: str) -> Sequence[str] | None:
        """The jobs of a batch record; None when there is none. :class:`DriverError` when it
        cannot be read."""
        try:
            data = json.loads(self._batch_path(batch).read_text())
            return [str(n) for n in data["jobs"]]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DriverError(f"batch record of {batch} unreadable ({exc})") from None

    def last_of_batch(self, rec: JobRecord) -> bool:
        """Note that ``rec``'s job is final; True once every job of its batch is (for the
        one caller that makes it so)."""
        assert rec.batch is not None
        pending = self._pending.get(rec.batch)
        if pending is None:
            try:
                members = self.batch_members(rec.batch)
            except DriverError as exc:
                log.warning("%s: not retiring it", exc)
                return False
            if members is None:
                return True  # a batch of one job (submitted before batches were shared)
            pending = self._pending[rec.batch] = {
                n for n in members if n != rec.job and self._unfinished(n)
            }
        pending.discard(rec.job)
        if pending:
            return False
        del self._pending[rec.batch]
        return True

    def _unfinished(self, job: str) -> bool:
        try:
            other = self.load(job)
        except DriverError:
            return False
        return other is not None and other.final is None
