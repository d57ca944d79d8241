"""Parsing of the bulk status queries' output (squeue -O, sacct -P for many jobs, qstat -f
for all jobs), and the slurm driver's bulk status on canned command output."""

from __future__ import annotations

import re
from pathlib import Path

from lrms_helpers import SyncDriver, sync_driver

from gahp_lrms import JobStatus
from gahp_lrms.pbs import parse_qstat_full_all
from gahp_lrms.slurm import job_info_from_fields, parse_sacct_rows, parse_squeue

SQUEUE = """\
650|FAILED|NonZeroExitCode|4294901110|0:00|vm|768|
649|PENDING|JobHeldUser|0|0:00|n/a|0|
651|RUNNING|None|4294901109|0:02|vm|0|
656|FAILED|NonZeroExitCode|4294901109|0:00|vm|9|
12_3|PENDING|Priority|4294901100|0:00|n/a|0|
"""


def test_parse_squeue_as_scontrol_fields():
    jobs = parse_squeue(SQUEUE)
    assert sorted(jobs) == ["12_3", "649", "650", "651", "656"]
    assert jobs["650"]["ExitCode"] == "3:0"  # squeue prints the raw wait status
    assert jobs["656"]["ExitCode"] == "0:9"
    assert "BatchHost" not in jobs["649"]
    info = {k: job_info_from_fields(v) for k, v in jobs.items()}
    assert (info["650"].status, info["650"].exit_code) == (JobStatus.COMPLETED, 3)
    assert (info["656"].exit_code, info["656"].exit_signal) == (None, 9)
    assert info["649"].status is JobStatus.HELD
    assert info["651"].status is JobStatus.RUNNING and info["651"].worker_node == "vm"
    assert info["651"].wallclock_s == 2.0
    assert info["12_3"].status is JobStatus.IDLE


def test_parse_sacct_rows_many_jobs_last_row_wins():
    text = (
        "JobID|State|ExitCode|Elapsed|NodeList\n"
        "7|NODE_FAIL|0:0|00:00:01|vm\n"
        "7|COMPLETED|4:0|00:00:05|vm\n"
        "7.batch|COMPLETED|4:0|00:00:05|vm\n"
        "8|CANCELLED|0:15|00:00:00|(null)\n"
    )
    rows = parse_sacct_rows(text)
    assert rows["7"]["ExitCode"] == "4:0" and "7.batch" in rows
    assert job_info_from_fields(rows["8"]).status is JobStatus.REMOVED
    assert parse_sacct_rows("") == {}


def test_parse_qstat_full_all():
    text = (
        "Job Id: 10.host\n    job_state = R\n    exec_host = vm/0\n\n"
        "Job Id: 11.host\n    job_state = Q\n    Job_Name = long\n\tname\n"
    )
    jobs = parse_qstat_full_all(text)
    assert sorted(jobs) == ["10.host", "11.host"]
    assert jobs["10.host"]["job_state"] == "R" and jobs["11.host"]["Job_Name"] == "longname"
    assert parse_qstat_full_all("") == {}


def _fake_bin(tmp_path: Path, scripts: dict[str, str]) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in scripts.items():
        path = bindir / name
        path.write_text(f"#!/bin/sh\necho {name} \"$@\" >> '{tmp_path}/calls'\n{body}\n")
        path.chmod(0o755)
    return bindir


def test_slurm_bulk_status_two_commands_for_any_number_of_jobs(tmp_path):
    rows = "".join(f"{i}|PENDING|JobHeldUser|0|0:00|n/a|0|\\n" for i in range(100, 600))
    bindir = _fake_bin(
        tmp_path,
        {
            "squeue": f"printf '{rows}'",
            "sacct": (
                'case "$*" in *-c*) printf "JobID|State|ExitCode|Elapsed|NodeList\\n'
                '5|COMPLETED|2:0|00:00:03|vm\\n" ;; '
                '*) echo "Slurm accounting storage is disabled" >&2; exit 1 ;; esac'
            ),
        },
    )
    drv = sync_driver("slurm", {"bin_dir": str(bindir)}, tmp_path / "state")
    ids = [str(i) for i in range(100, 600)] + ["5", "6"]
    found = drv.bulk_status(ids)
    assert set(found) == set(ids) - {"6"}  # 6: known nowhere, left to a direct query
    assert all(found[str(i)].status is JobStatus.HELD for i in range(100, 600))
    assert (found["5"].status, found["5"].exit_code) == (JobStatus.COMPLETED, 2)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["squeue", "sacct", "sacct"]
    drv.bulk_status(ids)  # slurmdbd known to be off: not asked again
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[0] for c in calls[3:]] == ["squeue", "sacct"]


def test_a_command_driver_with_its_own_status_keeps_working(tmp_path):
    from gahp_lrms.base import CommandDriver, as_driver
    from gahp_lrms.model import JobInfo

    class Old(CommandDriver):  # a third-party driver written before query_status
        name = "old"
        job_id = re.compile(r"\d+\Z")
        held: set[str] = set()

        def submit(self, spec):
            return "1"

        def status(self, native_id):
            return JobInfo(JobStatus.HELD if native_id in self.held else JobStatus.IDLE)

        def cancel(self, native_id):
            pass

        def hold(self, native_id):
            self._hold_with(native_id, ("true",), None)

        def resume(self, native_id):
            pass

        def ping(self):
            pass

        def _run(self, *argv, **kw):
            self.held.add(argv[-1])

    drv = SyncDriver(as_driver(Old({}, tmp_path)))
    assert drv.statuses.registry is None  # no bulk query: per job
    drv.hold("1")
    assert drv.status("1").status is JobStatus.HELD
