"""The boinc driver's job and batch records: the JSON of the threaded driver read and
written alike (a state directory survives an upgrade), queue markers, holds, and when a
batch's last job is final."""

from __future__ import annotations

import json

import pytest

from gahp_lrms import DriverError, JobInfo, JobStatus
from gahp_lrms._boinc_store import (  # private: boinc driver internals as units
    BatchRecord,
    JobRecord,
    JobState,
    JobStore,
)

# As the threaded driver (before the asyncio rewrite) wrote them.
OLD_QUEUED = {
    "job": "blah-8a9df57b5036418b",
    "batch": "blahb-454da050ab1344b4",
    "state": "queued",
    "app": "uppercase",
    "args": ["-v", "a b"],
    "inputs": [["/w/in", "in"]],
    "params": {"memory": 100000000.0, "delay": 3600.0},
    "project_url": None,
    "authenticator_file": None,
    "workdir": "/w",
    "stdout": "out",
    "stderr": None,
    "transfer_output": [],
    "cancelled": False,
    "final": None,
}
OLD_DONE = {
    **OLD_QUEUED,
    "state": "submitted",
    "final": {"status": 4, "exit_code": 0, "wallclock_s": 0.116128, "user_cpu_s": 0.114213},
}
OLD_HELD = {
    **OLD_QUEUED,
    "job": "blah-00000000000000ff",
    "state": "held",
    "project_url": "http://other.example/p/",
    "authenticator_file": "/a",
    "stderr": "err",
    "transfer_output": ["o1", "o2"],
    "final": {"status": 5, "hold_reason": "BOINC submission failed: no such app"},
}
OLD_FAILED_CANCELLED = {
    **OLD_QUEUED,
    "job": "blah-00000000000000fe",
    "state": "submitted",
    "cancelled": True,
    "params": {"memory": None, "delay": None},
    "final": {"status": 4, "exit_code": 3, "exit_reason": "BOINC job failed with exit status 3"},
}


@pytest.fixture
def store(tmp_path) -> JobStore:
    return JobStore(tmp_path / "state")


def put(store: JobStore, data: dict) -> None:
    (store.jobs_dir / f"{data['job']}.json").write_text(json.dumps(data))


@pytest.mark.parametrize("old", [OLD_QUEUED, OLD_DONE, OLD_HELD, OLD_FAILED_CANCELLED])
def test_records_of_the_threaded_driver_are_read_and_written_back_alike(store, old):
    put(store, old)
    rec = store.load(old["job"])
    assert rec is not None
    store.save(rec)
    assert json.loads((store.jobs_dir / f"{old['job']}.json").read_text()) == old


def test_what_an_old_record_says(store):
    put(store, OLD_DONE)
    put(store, OLD_HELD)
    done = store.load(OLD_DONE["job"])
    assert done is not None and done.state is JobState.SUBMITTED and not done.queued
    assert done.final == JobInfo(
        JobStatus.COMPLETED, exit_code=0, wallclock_s=0.116128, user_cpu_s=0.114213
    )
    assert done.inputs == [("/w/in", "in")] and done.args == ["-v", "a b"]
    assert (done.params.rsc_memory_bound, done.params.delay_bound) == (1e8, 3600.0)
    job = done.boinc_job()
    assert job.args == ("-v", "a b") and job.inputs == (("/w/in", "in"),)
    assert done.boinc_job(with_args=False).args == ()
    held = store.load(OLD_HELD["job"])
    assert held is not None and held.state is JobState.HELD
    assert held.final == JobInfo(JobStatus.HELD, hold_reason=OLD_HELD["final"]["hold_reason"])
    assert held.transfer_output == ["o1", "o2"] and held.authenticator_file == "/a"


def test_a_queued_job_has_a_marker_naming_its_owner_until_it_is_submitted(store):
    rec = JobRecord.from_json(OLD_QUEUED)
    assert rec.queued
    store.queue(rec, "123-abcd")
    (store.queued_dir / "blah-0000000000000001.tmp-9").write_text("x")  # not a marker
    assert list(store.queued()) == [(rec.job, "123-abcd")]
    assert json.loads(store.path(rec.job).read_text()) == OLD_QUEUED
    store.mark_submitted(rec)
    assert list(store.queued()) == []
    again = store.load(rec.job)
    assert again is not None and again.state is JobState.SUBMITTED and not again.queued


def test_hold_records_the_reason_and_ends_the_queueing(store):
    rec = JobRecord.from_json(OLD_QUEUED)
    store.queue(rec, "me")
    store.hold(rec, "input file in: not readable")
    assert list(store.queued()) == []
    saved = json.loads(store.path(rec.job).read_text())
    assert saved["state"] == "held"
    assert saved["final"] == {
        "status": int(JobStatus.HELD),
        "hold_reason": "input file in: not readable",
    }


def test_forget_leaves_no_trace(store):
    rec = JobRecord.from_json(OLD_QUEUED)
    store.queue(rec, "me")
    store.forget(rec.job)
    assert store.load(rec.job) is None and list(store.queued()) == []


@pytest.mark.parametrize("bad", ["x", "blah-../../etc", "blah-a b", "../blah-1"])
def test_malformed_ids_are_refused(store, bad):
    with pytest.raises(DriverError, match="malformed BOINC job id"):
        store.load(bad)


def test_an_unknown_job_is_none_an_unreadable_one_an_error(store):
    assert store.load("blah-0123456789abcdef") is None
    (store.jobs_dir / "blah-0123456789abcdef.json").write_text("{cut sho")
    with pytest.raises(DriverError, match="cannot read the record of BOINC job"):
        store.load("blah-0123456789abcdef")


def batch_of(store: JobStore, n: int, final: set[int] = frozenset()) -> list[JobRecord]:
    recs = []
    for i in range(n):
        rec = JobRecord(
            job=f"blah-{i:016x}", app="a", workdir="/w", batch="blahb-1", state=JobState.SUBMITTED
        )
        if i in final:
            rec.final = JobInfo(JobStatus.COMPLETED, exit_code=0)
        store.save(rec)
        recs.append(rec)
    store.save_batch(BatchRecord("blahb-1", None, None, [r.job for r in recs]))
    return recs


def test_the_last_job_of_a_batch_to_be_final_is_told_so_once(store):
    recs = batch_of(store, 4, final={2})  # one was final before (another process)
    verdicts = []
    for rec in (recs[1], recs[0], recs[3]):
        rec.final = JobInfo(JobStatus.COMPLETED, exit_code=0)
        store.save(rec)
        verdicts.append(store.last_of_batch(rec))
    assert verdicts == [False, False, True]
    store.drop_batch("blahb-1")
    assert store.batch_members("blahb-1") is None


def test_a_batch_without_a_record_is_done_an_unreadable_one_is_not(store):
    recs = batch_of(store, 2)
    (store.batches_dir / "blahb-1.json").write_text("[")
    assert store.last_of_batch(recs[0]) is False
    (store.batches_dir / "blahb-1.json").unlink()
    assert store.last_of_batch(recs[0]) is True  # a batch of one job, from before batching
