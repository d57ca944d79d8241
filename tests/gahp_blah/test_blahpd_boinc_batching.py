"""blahpd's boinc driver puts submissions that arrive close together for the same project,
app and owner into one BOINC batch, with each job's outcome its own (against the emulator)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from blah_helpers import COMPLETED, HELD, IDLE, REMOVED, Blah, boinc_config
from blah_helpers import ad_string as ad

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient, wait_for


def pipelined(c: GahpClient, command: str, args: list[str], inflight: int = 50) -> list[list[str]]:
    """One ``command`` per argument, at most ``inflight`` unanswered (as the gridmanager
    sends them); the results in the order of ``args``."""
    results: dict[str, list[str]] = {}
    order: list[str] = []
    pending: set[str] = set()
    todo = list(args)
    deadline = time.monotonic() + 120
    while todo or pending:
        sent = []
        while todo and len(pending) + len(sent) < inflight:
            rid = c.reqid()
            sent.append(rid)
            order.append(rid)
            c.send(command, rid, todo.pop(0))
        for rid in sent:
            assert c.read_line(timeout=60) == "S"
            pending.add(rid)
        got = c.results(timeout=60)
        for fields in got:
            results[fields[0]] = fields[1:]
            pending.discard(fields[0])
        assert time.monotonic() < deadline, pending
        if not got:
            time.sleep(0.01)
    return [results[rid] for rid in order]


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.1) as srv:
        yield srv


def start_blah(
    tmp: Path, emulator: EmulatorServer, window: float = 2.0, interval: float = 1.0
) -> Blah:
    conf = boinc_config(
        tmp, emulator.url, emulator.authenticator, batch_window_s=window, status_interval=interval
    )
    return Blah("--config", conf)


@pytest.fixture
def work(tmp_path) -> Path:
    path = tmp_path / "work"
    path.mkdir(exist_ok=True)
    return path


def inputs(work: Path, n: int) -> None:
    for i in range(n):
        (work / f"in.{i}").write_text(f"job {i}\n")


def job_attrs(work: Path, i: int, **extra: object) -> dict[str, object]:
    return dict(
        Cmd=f"{work}/uppercase",
        Iwd=str(work),
        In=f"in.{i}",
        Out=f"res.{i}",
        gridtype="boinc",
        **extra,
    )


def job(work: Path, i: int, **extra: object) -> str:
    return ad(**job_attrs(work, i, **extra))


def submit_all(blah: Blah, ads: list[str]) -> list[str]:
    res = pipelined(blah.c, "BLAH_JOB_SUBMIT", ads)
    assert all(r[0] == "0" for r in res), res
    return [r[2] for r in res]


@pytest.fixture
def blah(tmp_path, emulator, work):
    with start_blah(tmp_path, emulator) as b:
        yield b


def batches(emulator: EmulatorServer) -> list[dict]:
    return [dict(r) for r in emulator.store.all("SELECT * FROM batch ORDER BY id")]


def workunits(emulator: EmulatorServer) -> dict[str, dict]:
    return {r["name"]: dict(r) for r in emulator.store.all("SELECT * FROM workunit")}


def native(jobid: str) -> str:
    return jobid.rsplit("/", 1)[-1]


def test_concurrent_submits_go_into_one_batch_each_outcome_its_own(blah, emulator, work):
    n = 40
    inputs(work, n)
    emulator.reset_stats()
    ids = submit_all(blah, [job(work, i) for i in range(n)])
    wait_for(lambda: len(workunits(emulator)) == n)
    assert len(batches(emulator)) == 1, batches(emulator)
    wus = workunits(emulator)
    assert {native(j) for j in ids} == set(wus)
    # get_templates (check, then submit), create_batch, query_files, upload_files (2 chunks
    # of at most 20 files), submit_batch: 7 requests for 40 jobs
    requests = emulator.stats["requests"]
    assert requests <= 8, emulator.stats
    for i, jobid in enumerate(ids):
        info = blah.wait(jobid, COMPLETED)
        assert info["ExitCode"] == 0, info
        assert (work / f"res.{i}").read_text() == f"JOB {i}\n"
    assert batches(emulator)[0]["state"] == 4  # retired once all are final


def test_cancel_aborts_one_job_and_the_batch_is_retired_only_when_all_are_final(
    blah, emulator, work
):
    inputs(work, 3)
    emulator.pause_volunteer()
    ids = submit_all(blah, [job(work, i) for i in range(3)])
    assert blah.status(ids[1])[0] == IDLE
    assert blah.c.call("BLAH_JOB_CANCEL", ids[1], timeout=60) == ["0", "No error"]
    assert blah.status(ids[1])[0] == REMOVED
    (batch,) = batches(emulator)
    assert batch["njobs"] == 3 and batch["state"] != 4  # its other jobs are still to run
    wus = workunits(emulator)
    assert wus[native(ids[1])]["error_mask"] & 16  # aborted on the server
    assert wus[native(ids[0])]["status"] == "UNSENT" == wus[native(ids[2])]["status"]
    emulator.resume_volunteer()
    blah.wait(ids[0], COMPLETED)
    assert batches(emulator)[0]["state"] != 4  # ids[2] is not final yet (or not collected)
    info = blah.wait(ids[2], COMPLETED)
    assert info["ExitCode"] == 0
    assert (work / "res.0").read_text() == "JOB 0\n"
    assert (work / "res.2").read_text() == "JOB 2\n"
    assert not (work / "res.1").exists()
    assert batches(emulator)[0]["state"] == 4
    assert blah.status(ids[1])[0] == REMOVED


def test_a_bad_job_fails_alone(blah, emulator, work):
    inputs(work, 3)
    (work / "extra").write_text("x\n")
    ads = [
        job(work, 0),
        ad(Cmd="uppercase", Iwd=str(work), In="missing", gridtype="boinc"),
        job(work, 1),
        ad(Cmd="uppercase", Iwd=str(work), In="in.2", TransferInput="extra", gridtype="boinc"),
        job(work, 2),
    ]
    res = pipelined(blah.c, "BLAH_JOB_SUBMIT", ads)
    assert res[1][0] != "0" and "missing" in res[1][1] and res[1][2] == "N/A", res[1]
    assert res[3][0] != "0" and "2 input files" in res[3][1], res[3]
    good = [res[i][2] for i in (0, 2, 4)]
    assert all(res[i][0] == "0" for i in (0, 2, 4)), res
    for i, jobid in enumerate(good):
        assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
        assert (work / f"res.{i}").read_text() == f"JOB {i}\n"
    assert len(batches(emulator)) == 1 and len(workunits(emulator)) == 3


def test_a_refused_group_holds_exactly_its_jobs_with_the_reason(blah, emulator, work):
    inputs(work, 4)
    emulator.inject_fault("http500", 1, rpc="submit_batch")  # the first group to get there
    ads = [job(work, i) for i in range(2)] + [
        ad(Cmd="fail", Iwd=str(work), In=f"in.{i}", gridtype="boinc") for i in (2, 3)
    ]
    ids = submit_all(blah, ads)
    for jobid in ids:
        blah.wait(jobid, HELD, COMPLETED)
    states = {jobid: blah.status(jobid) for jobid in ids}  # final: they stay
    held = {j for j, (st, _) in states.items() if st == HELD}
    assert held in ({ids[0], ids[1]}, {ids[2], ids[3]}), states
    for jobid in held:
        reason = states[jobid][1]["HoldReason"]
        assert "submission failed" in reason and "HTTP 500" in reason, reason
    assert len(workunits(emulator)) == 2  # the other group ran
    # a held job is final: cancelling it removes it
    jobid = sorted(held)[0]
    assert blah.c.call("BLAH_JOB_CANCEL", jobid, timeout=60) == ["0", "No error"]
    assert blah.status(jobid)[0] == REMOVED


@pytest.mark.parametrize("fault", ["http503", "reset_after"])
def test_a_transient_failure_is_retried_into_the_same_batch(blah, emulator, fault, work):
    """Also when submit_batch went through and only its reply was lost: never twice."""
    inputs(work, 3)
    emulator.inject_fault(fault, 1, rpc="submit_batch")
    ids = submit_all(blah, [job(work, i) for i in range(3)])
    for jobid in ids:
        assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
    assert len(batches(emulator)) == 1 and len(workunits(emulator)) == 3


def test_jobs_naming_another_project_go_into_their_own_batch(blah, emulator, tmp_path, work):
    with EmulatorServer(state_dir=tmp_path / "other", port=0, job_delay=0.1) as other:
        auth = tmp_path / "other.auth"
        auth.write_text(other.authenticator + "\n")
        inputs(work, 4)
        ads = [job(work, i) for i in range(2)] + [
            job(work, i, BoincProjectUrl=other.url, BoincAuthenticatorFile=str(auth))
            for i in (2, 3)
        ]
        ids = submit_all(blah, ads)
        for i, jobid in enumerate(ids):
            assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
            assert (work / f"res.{i}").read_text() == f"JOB {i}\n"
        assert set(workunits(emulator)) == {native(j) for j in ids[:2]}
        assert set(workunits(other)) == {native(j) for j in ids[2:]}
        assert len(batches(emulator)) == 1 == len(batches(other))


def test_restart_with_queued_jobs_submits_them_exactly_once(tmp_path, emulator, work):
    blah = start_blah(tmp_path, emulator, window=60)
    try:
        inputs(work, 5)
        ids = submit_all(blah, [job(work, i) for i in range(5)])
        assert all(blah.status(j)[0] == IDLE for j in ids)
        blah.c.proc.kill()  # kill -9 between submit and flush
        blah.c.proc.wait(10)
        assert workunits(emulator) == {}  # dead with its jobs still queued
        emulator.reset_stats()
        blah.restart()
        for i, jobid in enumerate(ids):
            assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
            assert (work / f"res.{i}").read_text() == f"JOB {i}\n"
        assert emulator.stats.get("submit_batch") == 1, emulator.stats  # by the new one
        assert set(workunits(emulator)) == {native(j) for j in ids}
        assert len(batches(emulator)) == 1
        # Again, with nothing queued: nothing is submitted again. The witness: a later job,
        # submitted at once (window 0), runs to the end meanwhile.
        boinc_config(tmp_path, emulator.url, emulator.authenticator, batch_window_s=0)
        blah.restart()
        assert all(blah.status(j)[0] == COMPLETED for j in ids)
        inputs(work, 6)
        later = blah.submit_ok(**job_attrs(work, 5))
        assert blah.wait(later, COMPLETED)["ExitCode"] == 0
        assert set(workunits(emulator)) == {native(j) for j in [*ids, later]}
        assert len(batches(emulator)) == 2
    finally:
        blah.close()


def test_status_of_many_jobs_is_one_request_per_project(tmp_path, emulator, work):
    blah = start_blah(tmp_path, emulator, interval=60)
    try:
        n = 30
        inputs(work, n)
        emulator.pause_volunteer()
        ads = [job(work, i) for i in range(n // 2)] + [
            ad(Cmd="fail", Iwd=str(work), In=f"in.{i}", gridtype="boinc") for i in range(n // 2, n)
        ]
        ids = submit_all(blah, ads)
        wait_for(lambda: len(workunits(emulator)) == n)
        assert len(batches(emulator)) == 2
        # the jobs are marked submitted just after they reach the project
        wait_for(lambda: not any((tmp_path / "state" / "boinc" / "queued").iterdir()))
        emulator.reset_stats()
        res = pipelined(blah.c, "BLAH_JOB_STATUS", ids)
        assert all(r[0] == "0" and r[2] == str(IDLE) for r in res), res
        assert emulator.stats.get("query_batch2") == 1 and emulator.stats["requests"] == 1, (
            emulator.stats
        )
    finally:
        blah.close()


def test_window_zero_is_a_batch_per_job_on_the_project_when_submit_returns(
    tmp_path, emulator, work
):
    blah = start_blah(tmp_path, emulator, window=0)
    try:
        inputs(work, 3)
        ids = submit_all(blah, [job(work, i) for i in range(3)])
        assert set(workunits(emulator)) == {native(j) for j in ids}  # no waiting
        assert len(batches(emulator)) == 3
        emulator.inject_fault("http500", 1, rpc="submit_batch")
        res = blah.c.call("BLAH_JOB_SUBMIT", job(work, 0), timeout=60)
        assert res[0] != "0" and "HTTP 500" in res[1] and res[2] == "N/A", res
        for jobid in ids:
            assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
        assert all(b["state"] == 4 for b in batches(emulator) if b["njobs"])
    finally:
        blah.close()


def test_quit_during_a_submission_leaves_its_jobs_to_the_next_blahpd(tmp_path, emulator, work):
    """The driver's BOINC requests run on blahpd's event loop; QUIT cancels those still
    waiting, so blahpd stops at once (not after rpc_timeout, 280 s), and the jobs of the
    cancelled submission are neither held nor lost: the next blahpd finds them on the
    project (or submits them), each once."""
    blah = start_blah(tmp_path, emulator, window=0.2)
    try:
        inputs(work, 3)
        emulator.inject_fault("delay", 1, rpc="submit_batch", seconds=10)
        ids = submit_all(blah, [job(work, i) for i in range(3)])
        wait_for(lambda: emulator.stats.get("submit_batch"))  # the submission is waiting
        assert blah.c.quit(timeout=60) == 0
        assert workunits(emulator) == {}  # blahpd is gone before the project answered
        # the project still ends the request it was given (as PHP does)
        wait_for(lambda: len(workunits(emulator)) == 3)
        blah.restart()
        for i, jobid in enumerate(ids):
            info = blah.wait(jobid, COMPLETED, HELD)
            assert "HoldReason" not in info, info
            assert info["ExitCode"] == 0, info
            assert (work / f"res.{i}").read_text() == f"JOB {i}\n"
        assert set(workunits(emulator)) == {native(j) for j in ids}
        assert len(batches(emulator)) == 1
    finally:
        blah.close()
