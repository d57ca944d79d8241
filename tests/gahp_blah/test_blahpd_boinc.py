"""blahpd with gridtype "boinc" against the BOINC project emulator: whole job lives."""

from __future__ import annotations

import pytest
from blah_helpers import Blah, boinc_config
from blah_helpers import ad_string as ad

from gahp_boinc.emulator import EmulatorServer


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.2) as srv:
        yield srv


@pytest.fixture
def setup(tmp_path, emulator):
    conf = boinc_config(tmp_path, emulator.url, emulator.authenticator)
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text("hello boinc\n")
    (work / "in2.txt").write_text("second\n")
    return conf, work


@pytest.fixture
def blah(setup, tmp_path):
    with Blah("--config", setup[0], "--log", tmp_path / "blah.log", "--log-level", "DEBUG") as b:
        yield b


def test_whole_job_life_with_outputs_and_a_restart(blah, setup, emulator, tmp_path):
    conf, work = setup
    emulator.pause_volunteer()
    res = blah.c.call(
        "BLAH_JOB_SUBMIT",
        ad(
            Cmd=f"{work}/uppercase",
            Arguments="--repeat 2",
            Iwd=str(work),
            In="in.txt",
            Out="result.txt",
            Err="stderr.txt",
            gridtype="boinc",
        ),
        timeout=60,
    )
    assert res[0] == "0", res
    jobid = res[2]
    assert jobid.startswith("boinc/") and " " not in jobid
    assert blah.status(jobid)[0] == 1  # UNSENT: IDLE
    blah.restart()  # blahpd dies with the job queued
    emulator.resume_volunteer()
    info = blah.wait(jobid, 2, 4)
    info = blah.wait(jobid, 4)
    assert info["ExitCode"] == 0 and info["RemoteWallClockTime"] >= 0
    assert (work / "out").read_text() == "HELLO BOINC\nHELLO BOINC\n"
    assert (work / "result.txt").read_text() == "HELLO BOINC\nHELLO BOINC\n"
    assert "<stderr_txt>" in (work / "stderr.txt").read_text()
    blah.restart()  # the batch is retired: the answer comes from the record
    assert blah.status(jobid)[0] == 4
    assert emulator.authenticator not in (tmp_path / "blah.log").read_text()


def test_transfer_input_and_output(blah, setup):
    conf, work = setup
    res = blah.c.call(
        "BLAH_JOB_SUBMIT",
        ad(
            Cmd="concat",
            Iwd=str(work),
            TransferInput="in.txt, in2.txt",
            TransferOutput="out2",
            gridtype="boinc",
        ),
        timeout=60,
    )
    assert res[0] == "0", res
    blah.wait(res[2], 4)
    assert (work / "out2").read_text() == "second\nhello boinc\n"
    assert not (work / "out1").exists()  # only what TransferOutput names


def test_failed_job_is_completed_with_an_exit_code(blah, setup):
    conf, work = setup
    res = blah.c.call(
        "BLAH_JOB_SUBMIT", ad(Cmd="fail", Iwd=str(work), In="in.txt", gridtype="boinc"), timeout=60
    )
    info = blah.wait(res[2], 4)
    assert info["ExitCode"] != 0 and "BOINC job failed" in info["ExitReason"]


def test_cancel_and_refused_hold(blah, setup, emulator):
    conf, work = setup
    emulator.pause_volunteer()
    jobid = _uppercase(blah, work)[2]
    hold = blah.c.call("BLAH_JOB_HOLD", jobid)
    assert hold[0] != "0" and "cannot be held" in hold[1]
    assert blah.c.call("BLAH_JOB_CANCEL", jobid, timeout=60) == ["0", "No error"]
    assert blah.status(jobid)[0] == 3
    emulator.resume_volunteer()
    assert blah.status(jobid)[0] == 3


def test_errors_are_clear(blah, setup, tmp_path):
    conf, work = setup
    res = blah.c.call(
        "BLAH_JOB_SUBMIT",
        ad(Cmd="no_such_app", Iwd=str(work), In="in.txt", gridtype="boinc"),
        timeout=60,
    )
    assert res[0] != "0" and "no_such_app" in res[1] and res[2] == "N/A"
    res = blah.c.call("BLAH_JOB_SUBMIT", ad(Cmd="uppercase", In="in.txt", gridtype="boinc"))
    assert res[0] != "0" and "Iwd" in res[1]
    res = blah.c.call(
        "BLAH_JOB_SUBMIT",
        ad(
            Cmd="uppercase",
            Iwd=str(work),
            In="in.txt",
            gridtype="boinc",
            BoincProjectUrl="http://127.0.0.1:1/nowhere/",
            BoincAuthenticatorFile=str(tmp_path / "authenticator"),
        ),
        timeout=120,
    )
    assert res[0] != "0" and "cannot reach" in res[1]
    assert blah.c.call("BLAH_JOB_STATUS", "boinc/20260101/blah-0000")[:2] == [
        "0",
        "No error",
    ]  # unknown: a definite answer
    assert blah.c.call("BLAH_PING", "boinc") == ["0", "No error"]


def test_failed_job_gives_the_apps_exit_status_and_an_err_file(blah, setup):
    """The server's query_completed_job fails for a job without a canonical instance (HTTP
    500 on PHP 8, as the emulator does by default): the exit status still comes through."""
    conf, work = setup
    (work / "long.txt").write_text("an input longer than thirty characters\n")
    res = blah.c.call(
        "BLAH_JOB_SUBMIT",
        ad(
            Cmd="worker",
            Arguments="--early_exit",
            Iwd=str(work),
            In="long.txt",
            Err="failed.err",
            gridtype="boinc",
        ),
        timeout=60,
    )
    assert res[0] == "0", res
    info = blah.wait(res[2], 4)
    assert info["ExitCode"] == 246, info
    assert "246" in info["ExitReason"], info
    err = (work / "failed.err").read_text()
    assert "exit status 246" in err and "too_many_total_results" in err, err


def test_replication_attributes_set_the_jobs_quorum_and_survive_a_restart(blah, setup, emulator):
    """+BoincMinQuorum, +BoincTargetNresults (and the max_*_results ones) reach the job's own
    input template: the emulator runs as many instances; a bad combination is refused."""
    conf, work = setup
    emulator.pause_volunteer()
    res = _uppercase(
        blah,
        work,
        BoincMinQuorum=2,
        BoincTargetNresults=2,
        BoincMaxErrorResults=3,
        BoincMaxTotalResults=5,
        BoincMaxSuccessResults=4,
    )
    assert res[0] == "0", res
    blah.restart()  # queued in blahpd's records when it died: the options are kept
    emulator.resume_volunteer()
    info = blah.wait(res[2], 4)
    assert info["ExitCode"] == 0
    job = res[2].rsplit("/", 1)[-1]
    store = emulator.project.store
    row = store.one("SELECT id, min_quorum, target_nresults FROM workunit WHERE name=?", job)
    assert row is not None and (row["min_quorum"], row["target_nresults"]) == (2, 2)
    assert len(store.all("SELECT id FROM result WHERE workunit_id=?", row["id"])) == 2
    bad = _uppercase(blah, work, BoincMaxSuccessResults=6, BoincMaxTotalResults=5)
    assert bad[0] != "0" and "BoincMaxSuccessResults" in bad[1], bad
    assert "BoincMaxTotalResults" in bad[1], bad


def _uppercase(blah: Blah, work, **attributes: object) -> list[str]:
    """``BLAH_JOB_SUBMIT`` of the emulator's ``uppercase`` app on ``work/in.txt``."""
    return blah.c.call(
        "BLAH_JOB_SUBMIT",
        ad(Cmd="uppercase", Iwd=str(work), In="in.txt", gridtype="boinc", **attributes),
        timeout=60,
    )
