"""blahpd's ``boinc`` job driver (``grid_resource = batch boinc``) on the REAL BOINC 8.3 server
(`.ci/boinc-server-up.sh`): submit, status, outputs, a job failing on the volunteer with its
real exit status and an Err file, cancel. Jobs are submitted up front and run concurrently."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import classad2
import pytest

from gahp_core.testing import GahpClient

BLAHPD = [sys.executable, "-m", "gahp_blah"]
COMPLETED, REMOVED = 4, 3


def ad(**attrs: object) -> str:
    parts = []
    for k, v in attrs.items():
        v = '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(v, str) else v
        parts.append(f"{k} = {v}")
    return "[ " + "; ".join(parts) + " ]"


@dataclass
class Jobs:
    blah: GahpClient
    log: Path
    work: Path
    ids: dict[str, str] = field(default_factory=dict)  # role -> BLAH job id
    submits: dict[str, list[str]] = field(default_factory=dict)
    seen: dict[str, set[int]] = field(default_factory=dict)  # role -> statuses seen
    final: dict[str, dict] = field(default_factory=dict)  # role -> final status ad

    def status(self, jobid: str) -> tuple[int, dict]:
        res = self.blah.call("BLAH_JOB_STATUS", jobid, timeout=120)
        assert len(res) == 4 and res[0] == "0", res
        parsed = classad2.ClassAd(res[3])
        return int(res[2]), {k: parsed[k] for k in parsed}


@pytest.fixture(scope="module")
def jobs(real_boinc, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real blahpd")
    conf = real_boinc.blahpd_config(tmp)
    work = tmp / "work dir"
    work.mkdir()
    stamp = f"{time.time():.6f}"
    (work / "in file.txt").write_text(f"hello {stamp[-8:]}\n")  # <= 30 characters
    (work / "long.txt").write_text(f"an input longer than thirty characters {stamp}\n")
    log = tmp / "blah.log"
    blah = GahpClient([*BLAHPD, "--config", str(conf), "--log", str(log), "--log-level", "DEBUG"])
    j = Jobs(blah=blah, log=log, work=work)
    specs = {
        "ok": {
            "Arguments": "--cpu_time 1",
            "In": "in file.txt",
            "Out": "result.txt",
            "Err": "stderr.txt",
        },
        "fail": {"Arguments": "--early_exit --cpu_time 1", "In": "long.txt", "Err": "failed.err"},
        "cancel": {"Arguments": "--cpu_time 1", "In": "in file.txt"},
    }
    for role, extra in specs.items():
        res = blah.call(
            "BLAH_JOB_SUBMIT",
            ad(Cmd=f"{work}/{real_boinc.app}", Iwd=str(work), gridtype="boinc", **extra),
            timeout=300,
        )
        j.submits[role] = res
        if res[0] == "0":
            j.ids[role] = res[2]
    if "cancel" in j.ids:
        j.submits["cancel_result"] = blah.call("BLAH_JOB_CANCEL", j.ids["cancel"], timeout=120)
    yield j
    for role, jobid in j.ids.items():  # a failed run leaves no work for the shared volunteer
        if role not in j.final:
            blah.call("BLAH_JOB_CANCEL", jobid, timeout=120)
    blah.close()


@pytest.fixture(scope="module")
def final(jobs, real_boinc):
    """Poll every job's status until all are final (deadline-bounded)."""
    deadline = time.monotonic() + real_boinc.job_deadline
    pending = {r for r in jobs.ids}
    while pending:
        for role in sorted(pending):
            st, info = jobs.status(jobs.ids[role])
            jobs.seen.setdefault(role, set()).add(st)
            if st in (COMPLETED, REMOVED):
                jobs.final[role] = {"JobStatus": st, **info}
                pending.discard(role)
        assert time.monotonic() < deadline, (
            f"not final in {real_boinc.job_deadline:g} s: {pending} {jobs.seen};"
            f" {real_boinc.volunteer_backlog({boinc_job(jobs.ids[r]) for r in pending})}"
        )
        if pending:
            time.sleep(3)
    return jobs.final


def boinc_job(jobid: str) -> str:
    """The BOINC job name of a BLAH job id (boinc/<date>/<name>)."""
    return jobid.rsplit("/", 1)[-1]


def test_submissions_are_accepted(jobs):
    for role in ("ok", "fail", "cancel"):
        res = jobs.submits[role]
        assert res[0] == "0" and res[2].startswith("boinc/") and " " not in res[2], res


def test_a_job_completes_with_its_outputs(jobs, final, real_boinc):
    info = final["ok"]
    assert info["JobStatus"] == COMPLETED and info["ExitCode"] == 0, info
    assert info["RemoteWallClockTime"] > 0
    want = (jobs.work / "in file.txt").read_text().upper()
    assert (jobs.work / "out").read_text() == want
    assert (jobs.work / "result.txt").read_text() == want
    assert "<stderr_txt>" in (jobs.work / "stderr.txt").read_text()
    assert jobs.seen["ok"] - {COMPLETED} <= {1, 2}  # IDLE or RUNNING before
    batch = real_boinc.one(
        "SELECT b.state FROM batch b JOIN workunit w ON w.batch=b.id"
        f" WHERE w.name='{boinc_job(jobs.ids['ok'])}'"
    )
    assert batch["state"] == "4"  # retired once its outputs were collected


def test_a_job_failing_on_the_volunteer_gives_its_exit_status(jobs, final, real_boinc):
    info = final["fail"]
    assert info["JobStatus"] == COMPLETED and info["ExitCode"] == 246, info
    assert "246" in info["ExitReason"], info
    row = real_boinc.one(
        "SELECT r.exit_status FROM result r JOIN workunit w ON r.workunitid=w.id"
        f" WHERE w.name='{boinc_job(jobs.ids['fail'])}'"
    )
    assert row["exit_status"] == "246"
    err = (jobs.work / "failed.err").read_text()
    assert "exit status 246" in err, err


def test_cancel_removes_the_job(jobs, final, real_boinc):
    assert jobs.submits["cancel_result"] == ["0", "No error"]
    assert final["cancel"]["JobStatus"] == REMOVED
    wu = real_boinc.one(
        f"SELECT error_mask FROM workunit WHERE name='{boinc_job(jobs.ids['cancel'])}'"
    )
    assert int(wu["error_mask"]) & 16, wu  # cancelled on the server


def test_hold_is_refused_and_the_authenticator_never_logged(jobs, final, real_boinc):
    res = jobs.blah.call("BLAH_JOB_HOLD", jobs.ids["ok"])
    assert res[0] != "0" and "cannot be held" in res[1], res
    assert jobs.blah.call("BLAH_PING", "boinc", timeout=60) == ["0", "No error"]
    assert real_boinc.auth not in jobs.log.read_text()
