"""blahpd's boinc driver against a hostile project (the emulator's answers spoiled on
purpose): an output name that is a path must never be read, a zip bomb never unpacked.
The job is held with the reason; nothing of the server's outputs is left in its Iwd."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from blah_helpers import COMPLETED, HELD, Blah, boinc_config

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import wait_for


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "project", port=0, job_delay=0.1) as srv:
        srv.pause_volunteer()
        yield srv


@pytest.fixture
def blah(tmp_path, emulator):
    conf = boinc_config(tmp_path, emulator.url, emulator.authenticator, batch_window_s=0.1)
    with Blah("--config", conf, "--log", tmp_path / "blah.log") as b:
        yield b


@pytest.fixture
def work(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text("hello boinc\n")
    return work


def submitted_job(emulator: EmulatorServer) -> str:
    """The name of the one job the project has, once it has it."""
    rows = wait_for(lambda: emulator.store.all("SELECT name FROM workunit"), 30, "the job")
    return rows[0]["name"]


def test_the_servers_output_name_is_never_read_as_a_path(tmp_path, emulator, blah, work):
    # reproduction 7: DONE, then canonical_resultid 0, and an absolute output name: the
    # driver copied the victim's 0600 key into the job's Out file, 0644
    key = tmp_path / "victim" / "id_rsa"
    key.parent.mkdir()
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    key.chmod(0o600)
    emulator.tamper.template_outputs["uppercase"] = (str(key),)
    jobid = blah.submit_ok(
        Cmd="uppercase", Iwd=str(work), In="in.txt", Out="job.out", Err="job.err", gridtype="boinc"
    )
    emulator.tamper.no_canonical.add(submitted_job(emulator))
    emulator.resume_volunteer()
    info = blah.wait(jobid, HELD, COMPLETED)
    assert info["JobStatus"] == HELD, info
    assert "unsafe output file name" in info["HoldReason"], info
    assert not (work / "job.out").exists()
    assert sorted(p.name for p in work.iterdir()) == ["in.txt"]
    assert blah.status(jobid)[0] == HELD  # final: the record answers from now on


def test_a_zip_bomb_holds_the_job_and_leaves_nothing(emulator, blah, work):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(10_001):  # the default limit: 10,000 entries
            z.writestr(f"d/{i}", b"")
    jobid = blah.submit_ok(
        Cmd="zipper", Iwd=str(work), In="in.txt", Out="job.out", gridtype="boinc"
    )
    emulator.tamper.output_bytes[submitted_job(emulator)] = buf.getvalue()
    emulator.resume_volunteer()
    info = blah.wait(jobid, HELD, COMPLETED)
    assert info["JobStatus"] == HELD, info
    assert "10001 entries, more than the limit of 10000" in info["HoldReason"], info
    assert sorted(p.name for p in work.iterdir()) == ["in.txt"]
