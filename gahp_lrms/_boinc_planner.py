"""Which queued BOINC jobs share a batch, and when each batch is submitted.

Pure bookkeeping (no I/O, no clock of its own: callers pass ``now``, in seconds of a
monotonic clock such as the event loop's): jobs with the same :class:`GroupKey` that arrive within
``window_s`` of the first go into one :class:`Group`, due ``window_s`` after it opened or
at once when it has ``max_jobs`` jobs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import attrs

from gahp_boinc import JobParams, Project
from gahp_lrms._boinc_store import JobRecord


def new_batch_name() -> str:
    """A fresh BOINC batch name."""
    return f"blahb-{uuid.uuid4().hex[:16]}"


@attrs.frozen
class GroupKey:
    """What jobs sharing a batch have in common: project URL, authenticator file,
    application and job parameters."""

    url: str
    authenticator_file: str
    app: str
    memory: float | None = None
    delay: float | None = None


@attrs.define(eq=False)
class Group:
    """Queued jobs that go into one BOINC batch, submitted at ``due``."""

    batch: str
    project: Project
    app: str
    params: JobParams
    due: float
    jobs: list[JobRecord] = attrs.field(factory=list)


class BatchPlanner:
    """The open groups of queued jobs, by :class:`GroupKey`."""

    def __init__(
        self,
        window_s: float,
        max_jobs: int,
        new_name: Callable[[], str] = new_batch_name,
    ) -> None:
        self.window_s = window_s
        self.max_jobs = max_jobs
        self.new_name = new_name
        self._open: dict[GroupKey, Group] = {}
        self._ready: list[Group] = []  # full: due at once, closed to further jobs

    def __len__(self) -> int:
        """Groups not yet handed out by :meth:`pop_due`."""
        return len(self._open) + len(self._ready)

    def group_for(self, key: GroupKey, project: Project, now: float) -> Group:
        """The open group for ``key`` (a new one, due ``window_s`` from ``now``, when
        there is none): its batch is the one a job queued now goes into."""
        group = self._open.get(key)
        if group is None:
            params = JobParams(rsc_memory_bound=key.memory, delay_bound=key.delay)
            group = Group(self.new_name(), project, key.app, params, now + self.window_s)
            self._open[key] = group
        return group

    def add(self, key: GroupKey, rec: JobRecord, now: float) -> Group:
        """Put a job into the open group of ``key`` (from :meth:`group_for`); the group is
        due at once when that makes it full."""
        group = self._open[key]
        rec.batch = group.batch
        group.jobs.append(rec)
        if len(group.jobs) >= self.max_jobs:
            del self._open[key]
            group.due = min(group.due, now)
            self._ready.append(group)
        return group

    def alone(self, key: GroupKey, project: Project, rec: JobRecord, now: float) -> Group:
        """A group of ``rec`` alone, due now and not kept (its submitter has it)."""
        params = JobParams(rsc_memory_bound=key.memory, delay_bound=key.delay)
        group = Group(self.new_name(), project, key.app, params, now, [rec])
        rec.batch = group.batch
        return group

    def pop_due(self, now: float) -> list[Group]:
        """The groups due by ``now``, handed out once (closed to further jobs)."""
        due, self._ready = self._ready, []
        for key in [k for k, g in self._open.items() if g.due <= now]:
            due.append(self._open.pop(key))
        return due

    def next_due(self) -> float | None:
        """When the next group is due (None: there is none)."""
        if self._ready:
            return min(g.due for g in self._ready)
        return min((g.due for g in self._open.values()), default=None)

    def hurry(self, job: str, now: float) -> bool:
        """Make the group holding ``job`` due now; False when no group holds it."""
        for group in self._open.values():
            if any(rec.job == job for rec in group.jobs):
                group.due = min(group.due, now)
                return True
        return any(rec.job == job for group in self._ready for rec in group.jobs)

    def clear(self) -> None:
        """Forget every group (their jobs stay queued on disk, for the next process)."""
        self._open.clear()
        self._ready.clear()
