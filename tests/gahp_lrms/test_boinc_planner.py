"""The boinc driver's batch planner: which queued jobs share a batch and when it is due
(pure: no I/O, the clock passed in)."""

from __future__ import annotations

import itertools

import pytest

from gahp_boinc import Project
from gahp_lrms._boinc_planner import (  # private: boinc driver internals as units
    BatchPlanner,
    GroupKey,
)
from gahp_lrms._boinc_store import JobRecord  # private: boinc driver internals as units

PROJECT = Project(url="http://boinc.example/p/", authenticator="a" * 32)
KEY = GroupKey(PROJECT.url, "/auth", "uppercase")


def planner(window: float = 1.0, max_jobs: int = 1000) -> BatchPlanner:
    names = (f"batch-{i}" for i in itertools.count())
    return BatchPlanner(window, max_jobs, new_name=lambda: next(names))


def job(i: int) -> JobRecord:
    return JobRecord(job=f"blah-{i:016x}", app="uppercase", workdir="/w")


def queue(p: BatchPlanner, key: GroupKey, rec: JobRecord, now: float):
    p.group_for(key, PROJECT, now)
    return p.add(key, rec, now)


def test_jobs_of_one_key_within_the_window_share_a_batch_due_a_window_after_the_first():
    p = planner(window=2.0)
    recs = [job(i) for i in range(3)]
    times = (10.0, 10.5, 11.9)
    groups = {id(queue(p, KEY, rec, now)) for rec, now in zip(recs, times, strict=True)}
    assert len(groups) == 1 and len(p) == 1
    assert {rec.batch for rec in recs} == {"batch-0"}
    assert p.next_due() == 12.0
    assert p.pop_due(11.99) == []
    (group,) = p.pop_due(12.0)
    assert group.batch == "batch-0" and group.jobs == recs and group.app == "uppercase"
    assert p.pop_due(100.0) == [] and p.next_due() is None  # handed out once


@pytest.mark.parametrize(
    "other",
    [
        GroupKey("http://other.example/p/", "/auth", "uppercase"),
        GroupKey(PROJECT.url, "/other-auth", "uppercase"),
        GroupKey(PROJECT.url, "/auth", "lowercase"),
        GroupKey(PROJECT.url, "/auth", "uppercase", memory=1e9),
        GroupKey(PROJECT.url, "/auth", "uppercase", delay=3600.0),
    ],
)
def test_another_project_account_app_or_parameters_is_another_batch(other):
    p = planner()
    a, b = job(1), job(2)
    queue(p, KEY, a, 0.0)
    queue(p, other, b, 0.5)
    assert a.batch != b.batch and len(p) == 2
    first, second = p.pop_due(5.0)
    assert (first.jobs, second.jobs) == ([a], [b])
    assert second.params.rsc_memory_bound == other.memory
    assert second.params.delay_bound == other.delay


def test_a_full_group_is_due_at_once_and_the_next_job_opens_another():
    p = planner(window=60.0, max_jobs=2)
    recs = [job(i) for i in range(3)]
    queue(p, KEY, recs[0], 0.0)
    assert p.next_due() == 60.0
    full = queue(p, KEY, recs[1], 1.0)
    assert full.due == 1.0 and p.next_due() == 1.0
    queue(p, KEY, recs[2], 2.0)  # not into the full group
    assert recs[2].batch != recs[1].batch == recs[0].batch
    assert [g.jobs for g in p.pop_due(2.0)] == [recs[:2]]
    assert p.next_due() == 62.0


def test_hurry_makes_the_group_of_a_job_due_now():
    p = planner(window=60.0)
    a, b = job(1), job(2)
    queue(p, KEY, a, 0.0)
    queue(p, GroupKey(PROJECT.url, "/auth", "other"), b, 0.0)
    assert p.hurry(b.job, 5.0)
    assert [g.jobs for g in p.pop_due(5.0)] == [[b]]
    assert not p.hurry(b.job, 6.0)  # handed out: no longer planned
    assert not p.hurry("blah-unknown", 6.0)
    assert p.next_due() == 60.0


def test_a_job_alone_is_its_own_batch_not_kept():
    p = planner(window=0.0)
    rec = job(1)
    group = p.alone(KEY, PROJECT, rec, 3.0)
    assert group.jobs == [rec] and rec.batch == group.batch and group.due == 3.0
    assert len(p) == 0 and p.pop_due(10.0) == []


def test_clear_forgets_every_group():
    p = planner(max_jobs=1)
    queue(p, KEY, job(1), 0.0)  # full: ready
    queue(p, GroupKey(PROJECT.url, "/auth", "other"), job(2), 0.0)
    assert len(p) == 2
    p.clear()
    assert len(p) == 0 and p.pop_due(100.0) == [] and p.next_due() is None
