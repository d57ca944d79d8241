"""blahpd's boinc driver puts submissions that arrive close together for the same project,
app and owner into one BOINC batch, with each job's outcome its own (against the emulator)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import classad2
import pytest
from blah_helpers import ad_string as ad

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient, wait_for

BLAHPD = [sys.executable, "-m", "gahp_blah"]
IDLE, RUNNING, REMOVED, COMPLETED, HELD = 1, 2, 3, 4, 5



def pipelined(c: GahpClient, command: str, args: list[str], inflight: int = 50
              ) -> list[list[str]]:
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


class Blah:
    def __init__(
        self, tmp: Path, emulator: EmulatorServer, window: float = 2.0, interval: float = 1.0
    ) -> None:
        auth = tmp / "authenticator"
        auth.write_text(emulator.authenticator + "\n")
        self.conf = tmp / "blah.toml"
        self.conf.write_text(
            f'state_dir = "{tmp / "state"}"\n'
            f'[driver.boinc]\nproject_url = "{emulator.url}"\nauthenticator_file = "{auth}"\n'
            f"retries = 1\nbatch_window_s = {window}\nstatus_interval = {interval}\n"
        )
        self.log = tmp / "blah.log"
        self.work = tmp / "work"
        self.work.mkdir(exist_ok=True)
        self.start()

    def start(self) -> None:
        self.c = GahpClient([*BLAHPD, "--config", str(self.conf), "--log", str(self.log),
                             "--log-level", "DEBUG"])

    def kill_and_restart(self) -> None:
        self.c.proc.send_signal(signal.SIGKILL)
        self.c.close()
        self.start()

    def inputs(self, n: int) -> None:
        for i in range(n):
            (self.work / f"in.{i}").write_text(f"job {i}\n")

    def job(self, i: int, **extra: object) -> str:
        return ad(Cmd=f"{self.work}/uppercase", Iwd=str(self.work), In=f"in.{i}",
                  Out=f"res.{i}", gridtype="boinc", **extra)

    def submit_all(self, ads: list[str]) -> list[str]:
        res = pipelined(self.c, "BLAH_JOB_SUBMIT", ads)
        assert all(r[0] == "0" for r in res), res
        return [r[2] for r in res]

    def status(self, jobid: str) -> tuple[int, dict]:
        res = self.c.call("BLAH_JOB_STATUS", jobid, timeout=60)
        assert len(res) == 4 and res[0] == "0", res
        parsed = classad2.ClassAd(res[3])
        return int(res[2]), {k: parsed[k] for k in parsed}

    def wait(self, jobid: str, *states: int, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            st, info = self.status(jobid)
            if st in states:
                return info
            assert time.monotonic() < deadline, (st, info)
            time.sleep(0.2)


@pytest.fixture
def blah(tmp_path, emulator):
    b = Blah(tmp_path, emulator)
    yield b
    b.c.close()


def batches(emulator: EmulatorServer) -> list[dict]:
    return [dict(r) for r in emulator.store.all("SELECT * FROM batch ORDER BY id")]


def workunits(emulator: EmulatorServer) -> dict[str, dict]:
    return {r["name"]: dict(r) for r in emulator.store.all("SELECT * FROM workunit")}


def native(jobid: str) -> str:
    return jobid.rsplit("/", 1)[-1]


def test_concurrent_submits_go_into_one_batch_each_outcome_its_own(blah, emulator):
    n = 40
    blah.inputs(n)
    emulator.reset_stats()
    ids = blah.submit_all([blah.job(i) for i in range(n)])
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
        assert (blah.work / f"res.{i}").read_text() == f"JOB {i}\n"
    assert batches(emulator)[0]["state"] == 4  # retired once all are final


def test_cancel_aborts_one_job_and_the_batch_is_retired_only_when_all_are_final(
    blah, emulator
):
    blah.inputs(3)
    emulator.pause_volunteer()
    ids = blah.submit_all([blah.job(i) for i in range(3)])
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
    assert (blah.work / "res.0").read_text() == "JOB 0\n"
    assert (blah.work / "res.2").read_text() == "JOB 2\n"
    assert not (blah.work / "res.1").exists()
    assert batches(emulator)[0]["state"] == 4
    assert blah.status(ids[1])[0] == REMOVED


def test_a_bad_job_fails_alone(blah, emulator):
    blah.inputs(3)
    (blah.work / "extra").write_text("x\n")
    ads = [
        blah.job(0),
        ad(Cmd="uppercase", Iwd=str(blah.work), In="missing", gridtype="boinc"),
        blah.job(1),
        ad(Cmd="uppercase", Iwd=str(blah.work), In="in.2", TransferInput="extra",
           gridtype="boinc"),
        blah.job(2),
    ]
    res = pipelined(blah.c, "BLAH_JOB_SUBMIT", ads)
    assert res[1][0] != "0" and "missing" in res[1][1] and res[1][2] == "N/A", res[1]
    assert res[3][0] != "0" and "2 input files" in res[3][1], res[3]
    good = [res[i][2] for i in (0, 2, 4)]
    assert all(res[i][0] == "0" for i in (0, 2, 4)), res
    for i, jobid in enumerate(good):
        assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
        assert (blah.work / f"res.{i}").read_text() == f"JOB {i}\n"
    assert len(batches(emulator)) == 1 and len(workunits(emulator)) == 3


def test_a_refused_group_holds_exactly_its_jobs_with_the_reason(blah, emulator):
    blah.inputs(4)
    emulator.inject_fault("http500", 1, rpc="submit_batch")  # the first group to get there
    ads = [blah.job(i) for i in range(2)] + [
        ad(Cmd="fail", Iwd=str(blah.work), In=f"in.{i}", gridtype="boinc") for i in (2, 3)
    ]
    ids = blah.submit_all(ads)
    states = {}
    for jobid in ids:
        deadline = time.monotonic() + 60
        while True:
            st, info = blah.status(jobid)
            if st in (HELD, COMPLETED):
                states[jobid] = (st, info)
                break
            assert time.monotonic() < deadline, (st, info)
            time.sleep(0.2)
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
def test_a_transient_failure_is_retried_into_the_same_batch(blah, emulator, fault):
    """Also when submit_batch went through and only its reply was lost: never twice."""
    blah.inputs(3)
    emulator.inject_fault(fault, 1, rpc="submit_batch")
    ids = blah.submit_all([blah.job(i) for i in range(3)])
    for jobid in ids:
        assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
    assert len(batches(emulator)) == 1 and len(workunits(emulator)) == 3


def test_jobs_naming_another_project_go_into_their_own_batch(blah, emulator, tmp_path):
    with EmulatorServer(state_dir=tmp_path / "other", port=0, job_delay=0.1) as other:
        auth = tmp_path / "other.auth"
        auth.write_text(other.authenticator + "\n")
        blah.inputs(4)
        ads = [blah.job(i) for i in range(2)] + [
            blah.job(i, BoincProjectUrl=other.url, BoincAuthenticatorFile=str(auth))
            for i in (2, 3)
        ]
        ids = blah.submit_all(ads)
        for i, jobid in enumerate(ids):
            assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
            assert (blah.work / f"res.{i}").read_text() == f"JOB {i}\n"
        assert set(workunits(emulator)) == {native(j) for j in ids[:2]}
        assert set(workunits(other)) == {native(j) for j in ids[2:]}
        assert len(batches(emulator)) == 1 == len(batches(other))


def test_restart_with_queued_jobs_submits_them_exactly_once(tmp_path, emulator):
    blah = Blah(tmp_path, emulator, window=60)
    try:
        blah.inputs(5)
        ids = blah.submit_all([blah.job(i) for i in range(5)])
        assert all(blah.status(j)[0] == IDLE for j in ids)
        time.sleep(0.5)
        assert workunits(emulator) == {}  # still queued in blahpd
        blah.kill_and_restart()  # kill -9 between submit and flush
        for i, jobid in enumerate(ids):
            assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
            assert (blah.work / f"res.{i}").read_text() == f"JOB {i}\n"
        assert set(workunits(emulator)) == {native(j) for j in ids}
        assert len(batches(emulator)) == 1
        blah.kill_and_restart()
        assert all(blah.status(j)[0] == COMPLETED for j in ids)
        time.sleep(1)
        assert len(workunits(emulator)) == 5 and len(batches(emulator)) == 1
    finally:
        blah.c.close()


def test_status_of_many_jobs_is_one_request_per_project(tmp_path, emulator):
    blah = Blah(tmp_path, emulator, interval=60)
    try:
        n = 30
        blah.inputs(n)
        emulator.pause_volunteer()
        ads = [blah.job(i) for i in range(n // 2)] + [
            ad(Cmd="fail", Iwd=str(blah.work), In=f"in.{i}", gridtype="boinc")
            for i in range(n // 2, n)
        ]
        ids = blah.submit_all(ads)
        wait_for(lambda: len(workunits(emulator)) == n)
        assert len(batches(emulator)) == 2
        time.sleep(0.5)  # the jobs are marked submitted just after they reach the project
        emulator.reset_stats()
        res = pipelined(blah.c, "BLAH_JOB_STATUS", ids)
        assert all(r[0] == "0" and r[2] == str(IDLE) for r in res), res
        assert emulator.stats.get("query_batch2") == 1 and emulator.stats["requests"] == 1, (
            emulator.stats
        )
    finally:
        blah.c.close()


def test_window_zero_is_a_batch_per_job_on_the_project_when_submit_returns(tmp_path, emulator):
    blah = Blah(tmp_path, emulator, window=0)
    try:
        blah.inputs(3)
        ids = blah.submit_all([blah.job(i) for i in range(3)])
        assert set(workunits(emulator)) == {native(j) for j in ids}  # no waiting
        assert len(batches(emulator)) == 3
        emulator.inject_fault("http500", 1, rpc="submit_batch")
        res = blah.c.call("BLAH_JOB_SUBMIT", blah.job(0), timeout=60)
        assert res[0] != "0" and "HTTP 500" in res[1] and res[2] == "N/A", res
        for jobid in ids:
            assert blah.wait(jobid, COMPLETED)["ExitCode"] == 0
        assert all(b["state"] == 4 for b in batches(emulator) if b["njobs"])
    finally:
        blah.c.close()


def test_quit_during_a_submission_leaves_its_jobs_to_the_next_blahpd(tmp_path, emulator):
    """The driver's BOINC requests run on blahpd's event loop; QUIT cancels those still
    waiting, so blahpd stops at once (not after rpc_timeout, 280 s), and the jobs of the
    cancelled submission are neither held nor lost: the next blahpd finds them on the
    project (or submits them), each once."""
    blah = Blah(tmp_path, emulator, window=0.2)
    try:
        blah.inputs(3)
        emulator.inject_fault("delay", 1, rpc="submit_batch", seconds=5)
        ids = blah.submit_all([blah.job(i) for i in range(3)])
        wait_for(lambda: emulator.stats.get("submit_batch"))  # the submission is waiting
        assert blah.c.quit(timeout=60) == 0
        log = blah.log.read_text()
        assert "BOINC requests run on the server's event loop" in log
        assert "left queued for the next process" in log
        # the project still ends the request it was given (as PHP does)
        wait_for(lambda: len(workunits(emulator)) == 3)
        blah.start()
        for i, jobid in enumerate(ids):
            info = blah.wait(jobid, COMPLETED, HELD)
            assert "HoldReason" not in info, info
            assert info["ExitCode"] == 0, info
            assert (blah.work / f"res.{i}").read_text() == f"JOB {i}\n"
        assert set(workunits(emulator)) == {native(j) for j in ids}
        assert len(batches(emulator)) == 1
    finally:
        blah.c.close()
