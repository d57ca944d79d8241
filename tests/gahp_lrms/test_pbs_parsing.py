"""PBS Professional's outputs, parsed without a PBS: ``qstat -x -f -F json`` (as OpenPBS
23.06 prints it), its error lines, and qsub options in select syntax."""

from __future__ import annotations

import pytest

from gahp_lrms import DriverError, JobSpec, JobStatus
from gahp_lrms.pbs import (
    info_from_pbspro,
    jobs_by_native_id,
    parse_qstat_json,
    qsub_options,
    unknown_ids,
)

QSTAT_JSON = """{
    "timestamp":1795528145,
    "pbs_version":"23.06.06",
    "pbs_server":"vm",
    "Jobs":{
        "0.vm":{
            "Job_Name":"j.sh",
            "resources_used":{"cput":"00:00:00","ncpus":1,"walltime":"00:01:02"},
            "job_state":"F",
            "exec_host":"vm/0+vm/1",
            "comment":"Job run at Tue Nov 24 at 13:49 on (vm:ncpus=1) and failed",
            "Variable_List":{"PBS_O_WORKDIR":"/tmp/a\tb"},
            "Exit_status":5
        },
        "1.vm":{"Job_Name":"h","job_state":"H","Hold_Types":"u"}
    }
}"""


def test_qstat_json_jobs_and_finished_job():
    jobs = parse_qstat_json(QSTAT_JSON)  # a raw TAB inside a value is accepted
    assert set(jobs) == {"0.vm", "1.vm"}
    info = info_from_pbspro(jobs["0.vm"])
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, 5, None)
    assert (info.worker_node, info.wallclock_s) == ("vm", 62.0)
    assert info.exit_reason == "exited with status 5"
    held = info_from_pbspro(jobs["1.vm"])
    assert held.status is JobStatus.HELD and "Hold_Types u" in held.hold_reason


def test_qstat_json_without_jobs_and_garbage():
    assert parse_qstat_json('{"timestamp":1,"pbs_version":"23.06.06","pbs_server":"vm"}') == {}
    with pytest.raises(DriverError, match="unreadable"):
        parse_qstat_json("qstat: cannot connect to server")


@pytest.mark.parametrize(
    ("exit_status", "code", "signal", "reason"),
    [
        (0, 0, None, None),
        (137, 137, None, "exited with status 137"),
        (265, None, 9, "killed by signal 9"),
        (271, None, 15, "killed by signal 15"),
        (-1, None, None, "PBS could not run the job, or ended it (Exit_status -1)"),
    ],
)
def test_exit_status_meanings(exit_status, code, signal, reason):
    info = info_from_pbspro({"job_state": "F", "Exit_status": exit_status})
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, code, signal)
    assert info.exit_reason == reason


def test_states():
    for state, want in (
        ("Q", JobStatus.IDLE),
        ("W", JobStatus.IDLE),
        ("R", JobStatus.RUNNING),
        ("E", JobStatus.RUNNING),
        ("S", JobStatus.HELD),
        ("X", JobStatus.COMPLETED),
    ):
        assert info_from_pbspro({"job_state": state}).status is want
    finished = info_from_pbspro({"job_state": "F", "comment": "Job deleted"})
    assert finished.exit_code is None and "Job deleted" in finished.exit_reason
    for state in ("Q", "R", "F"):  # whatever PBS shows, a job the driver deleted is REMOVED
        assert info_from_pbspro({"job_state": state}, cancelled=True).status is JobStatus.REMOVED
    with pytest.raises(DriverError, match="unexpected PBS job state"):
        info_from_pbspro({"job_state": "?"})


def test_unknown_ids_from_error_lines():
    text = "qstat: Unknown Job Id 9.vm\nqstat: illegally formed job identifier: 9.nosuchhost\n"
    assert unknown_ids(text) == {"9.vm", "9.nosuchhost"}
    assert unknown_ids("") == set()
    assert unknown_ids("qstat: Unknown Job Id 9.vm\nConnection refused\n") is None


def test_select_syntax():
    """NodeNumber = 2, SMPGranularity = 1: two chunks of one CPU (the Torque form
    ``-l nodes=2:ppn=1 -l ncpus=1`` is refused by PBS Professional)."""
    spec = JobSpec("/bin/x", nodes=2, cpus_per_node=1, memory_mb=1001, runtime_s=3661)
    opts = qsub_options(spec, flavor="pbspro")
    resources = [opts[i + 1] for i, o in enumerate(opts) if o == "-l"]
    assert resources == ["select=2:ncpus=1:mem=501mb", "walltime=01:01:01"]
    assert opts[0] == "-f"
    counted = qsub_options(JobSpec("/bin/x", count=3), flavor="pbspro")
    assert "select=1:ncpus=3" in counted
    assert qsub_options(JobSpec("/bin/x", name="9lives"), flavor="pbspro")[1:3] == ["-N", "j9lives"]


def test_bare_numbers_find_their_jobs():
    """The C blahp's PBS job ids carry the bare number (``pbs/20261124/0``): it names the
    one job of that number; full ids still match exactly, an ambiguous number nothing."""
    jobs = parse_qstat_json(QSTAT_JSON)
    found = jobs_by_native_id(jobs, ["0", "1.vm", "7", "x"])
    assert found == {"0": jobs["0.vm"], "1.vm": jobs["1.vm"]}
    two_servers = {"5.a": {"job_state": "R"}, "5.b": {"job_state": "Q"}}
    assert jobs_by_native_id(two_servers, ["5"]) == {}


def _pbs_shims(tmp_path, state: str, qdel_rc: int):
    """A PBS Professional whose qstat lists job 7.vm in ``state`` and whose qdel exits
    ``qdel_rc`` (as qdel does for an exiting job: 168, "Request invalid for state of job")."""
    import json

    from lrms_helpers import sync_driver

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = json.dumps({"Jobs": {"7.vm": {"job_state": state, "exec_host": "vm/0"}}})
    (bin_dir / "qstat").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "pbs_version = 23.06.06"; exit 0; fi\n'
        f"echo '{listing}'\n"
    )
    (bin_dir / "qdel").write_text(
        f"#!/bin/sh\necho 'qdel: Request invalid for state of job $1' >&2\nexit {qdel_rc}\n"
    )
    for tool in ("qstat", "qdel"):
        (bin_dir / tool).chmod(0o755)
    return sync_driver(
        "pbs", {"bin_dir": str(bin_dir), "status_registry": False}, tmp_path / "state"
    )


def test_cancel_of_an_exiting_job_is_no_error(tmp_path):
    """qdel refuses a job PBS is finishing (state E, its program ended): the job ends by
    itself, so the cancel is no error (HTCondor would hold the job for it)."""
    _pbs_shims(tmp_path, "E", 168).cancel("7.vm")


def test_cancel_refused_for_a_running_job_is_an_error(tmp_path):
    with pytest.raises(DriverError, match="qdel"):
        _pbs_shims(tmp_path, "R", 168).cancel("7.vm")
