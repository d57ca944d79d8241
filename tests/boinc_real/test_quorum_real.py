"""A quorum of 2 completing on the REAL BOINC 8.3 server: two volunteer hosts (the bundle's
client and `.ci/boinc-second-volunteer.sh`'s) each run an instance of the job, the validator
agrees them and the job is DONE with its output; submitted through BoincClient's replication
options and through blahpd's +BoincMinQuorum / +BoincTargetNresults."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from conftest import REQUIRE
from live_services import unavailable
from test_blahpd_real import ad

from gahp_boinc import Job, JobOptions, SyncBoincClient
from gahp_core.testing import GahpClient

START = "bash .ci/boinc-second-volunteer.sh"


def _two_hosts(real_boinc) -> None:
    """Skip (fail under GAHP_REQUIRE_BOINC_SERVER=1) unless two hosts asked for work lately."""
    rows = real_boinc.sql("SELECT id FROM host WHERE rpc_time > UNIX_TIMESTAMP() - 600 ORDER BY id")
    if len(rows) < 2:
        unavailable(REQUIRE, f"{len(rows)} volunteer host(s) active; start a second: `{START}`")


def _instances(real_boinc, job: str) -> list[dict[str, str]]:
    return real_boinc.sql(
        "SELECT r.hostid, r.outcome, r.validate_state, w.canonical_resultid = r.id AS canonical"
        f" FROM result r JOIN workunit w ON w.id = r.workunitid WHERE w.name = '{job}'"
    )


def _blah_done(blah: GahpClient, jobid: str) -> str | None:
    """The final status ad of a BLAH job, or None while it runs."""
    st = blah.call("BLAH_JOB_STATUS", jobid, timeout=120)
    assert st[0] == "0", st
    assert "JobStatus = 3" not in st[3] and "JobStatus = 5" not in st[3], st
    return st[3] if "JobStatus = 4" in st[3] else None


def test_a_quorum_of_two_completes_on_two_volunteers(real_boinc, tmp_path: Path):
    """Through BoincClient (JobOptions) and blahpd (+BoincMinQuorum, +BoincTargetNresults),
    at once: each job's two instances run on the two hosts and agree."""
    _two_hosts(real_boinc)
    tag = f"q2{int(time.time() * 1000) % 10**9}"
    (tmp_path / "in.txt").write_text(f"quorum {tag}\n")
    job = Job(
        f"{tag}_0",
        ["--cpu_time", "1"],
        [tmp_path / "in.txt"],
        options=JobOptions(min_quorum=2, target_nresults=2),
    )
    blah_dir = tmp_path / "blah"
    blah_dir.mkdir()
    (blah_dir / "in.txt").write_text("blah quorum\n")
    blah = GahpClient(
        [sys.executable, "-m", "gahp_blah", "--config", str(real_boinc.blahpd_config(blah_dir))]
    )
    try:
        with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
            c.submit(tag, real_boinc.app, [job])
            res = blah.call(
                "BLAH_JOB_SUBMIT",
                ad(
                    Cmd=f"{blah_dir}/{real_boinc.app}",
                    Iwd=str(blah_dir),
                    gridtype="boinc",
                    Arguments="--cpu_time 1",
                    In="in.txt",
                    Out="result.txt",
                    BoincMinQuorum=2,
                    BoincTargetNresults=2,
                ),
                timeout=300,
            )
            assert res[0] == "0", res
            try:
                states = c.wait(tag, interval=2, timeout=real_boinc.job_deadline)
                assert states == {job.name: "DONE"}, (states, _instances(real_boinc, job.name))
                c.fetch_output(job.name, tmp_path, files={"out": "out.txt"})
            finally:
                c.abort_batch(tag)
                c.retire(tag)
        deadline = time.monotonic() + real_boinc.job_deadline
        while (final := _blah_done(blah, res[2])) is None:
            assert time.monotonic() < deadline, "the blahpd job did not end in time"
            time.sleep(2)
        assert "ExitCode = 0" in final, final
    finally:
        blah.close()
    assert (tmp_path / "out.txt").read_text() == f"QUORUM {tag.upper()}\n"
    assert (blah_dir / "result.txt").read_text() == "BLAH QUORUM\n"
    for name in (job.name, res[2].rsplit("/", 1)[-1]):
        done = _instances(real_boinc, name)
        assert len(done) == 2, done
        assert {r["outcome"] for r in done} == {"1"}, done  # both succeeded
        assert len({r["hostid"] for r in done}) == 2, done  # on two hosts
        assert {r["validate_state"] for r in done} == {"1"}, done  # both valid
        assert sorted(r["canonical"] for r in done) == ["0", "1"], done
