"""What the boinc driver answers of a job from its record alone, and how it words a failed
job's outcome from what the project said (pure functions)."""

from __future__ import annotations

import pytest

from gahp_boinc import CompletedJob, JobDetail, UnsafeOutput
from gahp_lrms import JobInfo, JobStatus
from gahp_lrms._boinc_outcome import (  # private: boinc driver internals as units
    deliver_outputs,
    describe_failure,
    record_answer,
    write_err,
)
from gahp_lrms._boinc_store import JobRecord, JobState  # private: boinc driver internals as units


def rec(**kw: object) -> JobRecord:
    return JobRecord(job="blah-0000000000000001", app="a", workdir="/w", batch="b", **kw)


def test_the_record_answers_unknown_final_and_queued_jobs_and_no_other():
    unknown = record_answer(None)
    assert unknown is not None and unknown.status is JobStatus.COMPLETED
    assert unknown.exit_code is None and "unknown" in (unknown.exit_reason or "")
    final = JobInfo(JobStatus.HELD, hold_reason="refused")
    assert record_answer(rec(state=JobState.HELD, final=final)) is final
    assert record_answer(rec(state=JobState.QUEUED)) == JobInfo(JobStatus.IDLE)
    assert record_answer(rec(state=JobState.SUBMITTED)) is None


def done(exit_status: int = 0, error_mask: int = 0) -> CompletedJob:
    return CompletedJob(
        exit_status=exit_status, elapsed_time=2.0, cpu_time=1.0, stderr="", error_mask=error_mask
    )


def detail(exit_status: int | None = None, error: str = "") -> JobDetail:
    return JobDetail(
        name="blah-0000000000000001", status="error", exit_status=exit_status, error=error
    )


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ((done(7), None, []), (7, "BOINC job failed with exit status 7")),
        # no exit status from the instance: the workunit's, and its error in words
        (
            (done(0, error_mask=4), detail(3, "too_many_errors"), []),
            (3, "BOINC job failed with exit status 3 (too_many_errors)"),
        ),
        ((done(0, error_mask=4), detail(None), []), (None, "BOINC job failed (error mask 4)")),
        # query_completed_job refused (HTTP 500 on PHP 8): query_batch's details alone
        ((None, detail(139), ["HTTP 500"]), (139, "BOINC job failed with exit status 139")),
        ((None, None, ["HTTP 500", "job details: down"]), (None, "BOINC job failed: HTTP 500")),
    ],
)
def test_a_failed_jobs_exit_status_and_reason(facts, expected):
    assert describe_failure(*facts) == expected


def test_outputs_move_into_the_iwd_and_out_gets_the_first(tmp_path):
    stage, work = tmp_path / "stage", tmp_path / "work"
    (stage / "sub").mkdir(parents=True)
    work.mkdir()
    (stage / "result").write_text("first\n")
    (stage / "sub" / "more").write_text("second\n")
    deliver_outputs(stage, work, work / "job.out", "result")
    assert (work / "job.out").read_text() == "first\n"
    assert (work / "result").read_text() == "first\n"
    assert (work / "sub" / "more").read_text() == "second\n"
    assert not any(p.is_file() for p in stage.rglob("*"))


def _victim(tmp_path):
    """A stage with a result, the Iwd, and the user's 0600 private key beside them."""
    stage, work = tmp_path / "stage", tmp_path / "work"
    stage.mkdir()
    work.mkdir()
    (stage / "result").write_text("result\n")
    key = tmp_path / "id_rsa"
    key.write_text("PRIVATE KEY\n")
    key.chmod(0o600)
    return stage, work, key


def test_an_absolute_first_output_name_is_refused_not_copied_to_out(tmp_path):
    # reproduction 7: the server's output name was used as a path, and the key copied
    stage, work, key = _victim(tmp_path)
    with pytest.raises(UnsafeOutput, match="unsafe output file name"):
        deliver_outputs(stage, work, work / "job.out", str(key))
    assert not (work / "job.out").exists()


@pytest.mark.parametrize("first", ["../id_rsa", "..", ""])
def test_a_first_output_name_leading_out_of_the_stage_is_refused(tmp_path, first):
    stage, work, _key = _victim(tmp_path)
    with pytest.raises(UnsafeOutput):
        deliver_outputs(stage, work, work / "job.out", first)
    assert not (work / "job.out").exists()


def test_a_link_planted_in_the_stage_is_not_followed(tmp_path):
    stage, work, key = _victim(tmp_path)
    (stage / "out").symlink_to(key)
    (stage / "other").symlink_to(key)
    with pytest.raises(UnsafeOutput, match="symbolic link"):
        deliver_outputs(stage, work, work / "job.out", "out")
    assert not (work / "job.out").exists()
    deliver_outputs(stage, work, work / "job.out", "result")
    assert (work / "job.out").read_text() == "result\n"
    # the links are left in the stage (removed with it), never moved into the Iwd
    assert sorted(p.name for p in work.iterdir()) == ["job.out", "result"]


def test_out_is_written_without_following_a_link_at_its_path(tmp_path):
    stage, work, key = _victim(tmp_path)
    (work / "job.out").symlink_to(key)
    deliver_outputs(stage, work, work / "job.out", "result")
    assert key.read_text() == "PRIVATE KEY\n"
    assert not (work / "job.out").is_symlink()
    assert (work / "job.out").read_text() == "result\n"
    assert (work / "job.out").stat().st_mode & 0o022 == 0


def test_the_err_file_is_written_without_following_a_link_at_its_path(tmp_path):
    _stage, work, key = _victim(tmp_path)
    (work / "job.err").symlink_to(key)
    failed = JobRecord(job="blah-0000000000000001", app="a", workdir=str(work), stderr="job.err")
    write_err(failed, "BOINC job failed with exit status 3", "")
    assert key.read_text() == "PRIVATE KEY\n"
    assert not (work / "job.err").is_symlink()
    assert (work / "job.err").read_text().startswith("BOINC job failed with exit status 3")


def test_the_err_file_has_the_instances_stderr_then_the_reason(tmp_path):
    failed = JobRecord(
        job="blah-0000000000000001", app="a", workdir=str(tmp_path), stderr="job.err"
    )
    write_err(failed, "BOINC job failed with exit status 3", "Traceback\nValueError")
    assert (tmp_path / "job.err").read_text() == (
        "Traceback\nValueError\nBOINC job failed with exit status 3 (job blah-0000000000000001)\n"
    )
    write_err(
        JobRecord(job="blah-0000000000000002", app="a", workdir=str(tmp_path), stderr="/dev/null"),
        "x",
        "",
    )  # nothing to write
