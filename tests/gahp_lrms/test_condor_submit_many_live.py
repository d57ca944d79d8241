"""``CondorDriver.submit_many`` on the real HTCondor pool (``bash .ci/htcondor-pool-up.sh``;
skipped without it, failed under ``GAHP_REQUIRE_HTCONDOR_POOL=1``): the processes of a
Ninf-G job are one cluster, one proc each, submitted with one request to the schedd, each
with its own arguments and output files (strings HTCondor's submit language would expand
arrive literally), and the job's own submit commands (``submit:<name>`` options) reach
every proc's ad."""

from __future__ import annotations

import json
import os

import pytest
from live_services import POOL_PYTHON
from lrms_helpers import ECHO_PROGRAM, wait_status
from test_condor_live import pool_ad, schedd  # noqa: F401 (a fixture)

from gahp_lrms import DriverError, JobSpec, JobStatus


def test_one_cluster_a_proc_per_spec(condor_driver, condor_job_dir, schedd):  # noqa: F811
    program = condor_job_dir / "echo.py"
    program.write_text(f"#!{POOL_PYTHON}\n{ECHO_PROGRAM}")
    program.chmod(0o755)
    work = condor_job_dir / "w $(Cluster) 'q'"
    work.mkdir()
    st = condor_job_dir.stat()
    os.chown(work, st.st_uid, st.st_gid)
    specs = [
        JobSpec(
            str(program),
            (f"proc {i}", "$(Process) $$ $(DOLLAR"[: 10 + i]),
            environment={"GAHP_T_EXIT": str(i)},
            stdout=str(work / f"out $(x).{i}"),
            stderr=str(work / f"err.{i}"),
            workdir=str(work),
            name="ninfg-job",
            options={"submit:+NgTag": "4242", "submit:request_memory": "64"},
        )
        for i in range(3)
    ]
    before = condor_driver.schedd_calls.get("submit", 0)
    ids = condor_driver.submit_many(specs)
    assert condor_driver.schedd_calls.get("submit", 0) == before + 1
    clusters = {i.split(".")[0] for i in ids}
    assert len(clusters) == 1 and [i.split(".")[1] for i in ids] == ["0", "1", "2"], ids
    for i, jid in enumerate(ids):
        assert pool_ad(schedd, jid, "NgTag", "RequestMemory") == {
            "NgTag": 4242,
            "RequestMemory": 64,
        }
        info = wait_status(condor_driver, jid, JobStatus.COMPLETED, timeout=90)
        assert info.exit_code == i
        got = json.loads((work / f"out $(x).{i}").read_text())
        assert got["argv"] == list(specs[i].arguments)
        assert got["env"] == {"GAHP_T_EXIT": str(i)}
        assert (work / f"err.{i}").read_text() == "to stderr\n"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("submit:output", "/tmp/x", "the driver's own"),
        ("submit:MY.Out", '"/tmp/x"', "the driver's own"),
        ("submit:a b", "1", "not a submit command name"),
        ("submit:+Tag", "1\nqueue 5", "not one line"),
    ],
)
def test_a_jobs_own_submit_commands_are_checked(condor_driver, condor_job_dir, key, value, reason):
    spec = JobSpec("/bin/true", workdir=str(condor_job_dir), options={key: value})
    before = condor_driver.schedd_calls.get("submit", 0)
    with pytest.raises(DriverError, match=reason):
        condor_driver.submit_many([spec, spec])
    assert condor_driver.schedd_calls.get("submit", 0) == before
