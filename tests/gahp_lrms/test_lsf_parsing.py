# ruff: noqa: E501 (verbatim LSF output)
"""The lsf driver's pure parsers and option builder, on output captured from volclava 2.2
(LSF-compatible; see shared/lsf/README.md): no LSF needed."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest
from lrms_helpers import sync_driver

from gahp_lrms import DriverError, JobSpec, JobStatus
from gahp_lrms.lsf import (
    bsub_options,
    exit_info,
    info_from_bjobs,
    info_from_record,
    join_continuations,
    lsf_job_name,
    lsf_time,
    parse_bjobs_json,
    parse_bjobs_wide,
    parse_bsub,
    parse_lsf_conf,
    split_records,
)
from gahp_lrms.model import FinalStates, JobInfo

# bjobs -a -o "jobid stat exec_host start_time finish_time" -json 1 2 3 4 99999: 3 runs on
# two slots, 4 was suspended with bstop, 2 was held (-H) and killed while pending.
BJOBS_JSON = """{
\t"COMMAND":\t"bjobs",
\t"JOBS":\t5,
\t"RECORDS":\t[{
\t\t\t"JOBID":\t"3",
\t\t\t"STAT":\t"RUN",
\t\t\t"EXEC_HOST":\t"vm",
\t\t\t"START_TIME":\t"11/24-13:57:21",
\t\t\t"FINISH_TIME":\t"-"
\t\t}, {
\t\t\t"JOBID":\t"4",
\t\t\t"STAT":\t"USUSP",
\t\t\t"EXEC_HOST":\t"vm",
\t\t\t"START_TIME":\t"11/24-13:57:21",
\t\t\t"FINISH_TIME":\t"-"
\t\t}, {
\t\t\t"JOBID":\t"1",
\t\t\t"STAT":\t"EXIT",
\t\t\t"EXEC_HOST":\t"vm",
\t\t\t"START_TIME":\t"11/24-13:57:07",
\t\t\t"FINISH_TIME":\t"11/24-13:57:08"
\t\t}, {
\t\t\t"JOBID":\t"2",
\t\t\t"STAT":\t"EXIT",
\t\t\t"EXEC_HOST":\t"   -   ",
\t\t\t"START_TIME":\t"-",
\t\t\t"FINISH_TIME":\t"11/24-13:57:22"
\t\t}, {
\t\t\t"JOBID":\t"99999",
\t\t\t"ERROR":\t"Job <99999> is not found"
\t\t}]
}
"""

# bjobs -a -w (volclava) and the README's example (a blank EXEC_HOST for PSUSP).
BJOBS_WIDE = """JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME
3       gahplsf RUN   normal     vm          vm:vm       sleep 20   Nov 24 13:57
2       gahplsf PSUSP normal     vm             -        sleep 30   Nov 24 13:57
6       gahplsf EXIT  normal     vm          vm          arr[1]     Nov 24 13:57
6       gahplsf EXIT  normal     vm          vm          arr[2]     Nov 24 13:57
61      gahplsf EXIT  normal     vm          vm          trap '' INT TERM; exec sleep 60 Nov 24 14:05
"""
README_WIDE = """JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME
4       lsftest RUN   normal     vm          vm          sleepjob   Nov 24 11:47
5       lsftest PSUSP normal     vm                      heldjob    Nov 24 11:47
3       lsftest EXIT  normal     vm          vm          failjob    Nov 24 11:47
"""

# bjobs -l 1 2 4 5 6: exit 3; killed while held; bkill of a running job; done; an array.
BJOBS_L = """
Job <1>, Job Name <t1>, User <gahplsf>, Project <default>, Status <EXIT>, Queue <normal>, Command <#!/bin/sh;echo hi > /tmp/lsfx/o1; pwd >> /tmp/lsfx/o1; sleep 1; exit 3>
Tue Nov 24 13:57:04: Submitted from host <vm>, CWD </tmp/lsfx>, Output File </dev/null>;

 RUNLIMIT
 1.0 min

 MEMLIMIT
 102400000 K
Tue Nov 24 13:57:07: Started on <vm>, Execution Home </home/gahplsf>, Execution CWD </tmp/lsfx>;
Tue Nov 24 13:57:08: Exited with exit code 3. The CPU time used is 0.0 seconds.

 MEMORY USAGE:
 MAX MEM: 5 Mbytes;  AVG MEM: 5 Mbytes

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
 loadSched   -     -     -     -       -     -    -     -     -      -      -
 loadStop    -     -     -     -       -     -    -     -     -      -      -

 RESOURCE REQUIREMENT DETAILS:
 Combined: select[type == local] order[r15s:pg]
 Effective: select[type == local] order[r15s:pg]
------------------------------------------------------------------------------

Job <2>, User <gahplsf>, Project <default>, Status <EXIT>, Queue <normal>, Command <sleep 30>
Tue Nov 24 13:57:18: Submitted from host <vm> with hold, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:22: Exited

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
 loadSched   -     -     -     -       -     -    -     -     -      -      -
 loadStop    -     -     -     -       -     -    -     -     -      -      -

 RESOURCE REQUIREMENT DETAILS:
 Combined: select[type == local] order[r15s:pg]
 Effective: -
------------------------------------------------------------------------------

Job <6[1]>, Job Name <arr[1]>, User <gahplsf>, Project <default>, Status <EXIT>, Queue <normal>, Command <exit 5>
Tue Nov 24 13:57:28: Submitted from host <vm>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:31: [1] started on <vm>, Execution Home </home/gahplsf>, Execution CWD </tmp/lsfx>;
Tue Nov 24 13:57:31: Exited with exit code 5. The CPU time used is 0.0 seconds.

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
 loadSched   -     -     -     -       -     -    -     -     -      -      -
 loadStop    -     -     -     -       -     -    -     -     -      -      -

 RESOURCE REQUIREMENT DETAILS:
 Combined: select[type == local] order[r15s:pg]
 Effective: select[type == local] order[r15s:pg]
------------------------------------------------------------------------------

Job <6[2]>, Job Name <arr[2]>, User <gahplsf>, Project <default>, Status <EXIT>, Queue <normal>, Command <exit 5>
Tue Nov 24 13:57:28: Submitted from host <vm>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:31: [2] started on <vm>, Execution Home </home/gahplsf>, Execution CWD </tmp/lsfx>;
Tue Nov 24 13:57:31: Exited with exit code 5. The CPU time used is 0.0 seconds.

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
 loadSched   -     -     -     -       -     -    -     -     -      -      -
 loadStop    -     -     -     -       -     -    -     -     -      -      -

 RESOURCE REQUIREMENT DETAILS:
 Combined: select[type == local] order[r15s:pg]
 Effective: select[type == local] order[r15s:pg]
------------------------------------------------------------------------------

Job <5>, Job Name <okjob>, User <gahplsf>, Project <default>, Status <DONE>, Queue <normal>, Command <true>
Tue Nov 24 13:57:28: Submitted from host <vm>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:31: Started on <vm>, Execution Home </home/gahplsf>, Execution CWD </tmp/lsfx>;
Tue Nov 24 13:57:31: Done successfully. The CPU time used is 0.0 seconds.

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
 loadSched   -     -     -     -       -     -    -     -     -      -      -
 loadStop    -     -     -     -       -     -    -     -     -      -      -

 RESOURCE REQUIREMENT DETAILS:
 Combined: select[type == local] order[r15s:pg]
 Effective: select[type == local] order[r15s:pg]
------------------------------------------------------------------------------

Job <4>, User <gahplsf>, Project <default>, Status <EXIT>, Queue <normal>, Command <sleep 30>
Tue Nov 24 13:57:18: Submitted from host <vm>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:21: Started on <vm>, Execution Home </home/gahplsf>, Execution CWD </tmp/lsfx>;
Tue Nov 24 13:57:34: Exited with exit code 130. The CPU time used is 0.0 seconds.

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
 loadSched   -     -     -     -       -     -    -     -     -      -      -
 loadStop    -     -     -     -       -     -    -     -     -      -      -

 RESOURCE REQUIREMENT DETAILS:
 Combined: select[type == local] order[r15s:pg]
 Effective: select[type == local] order[r15s:pg]

"""

# bhist -l 2 4 5 61: lines wrap at 80 columns (continuations indented by 21 spaces); 61
# ignored SIGINT and SIGTERM and was killed by bkill's final SIGKILL.
BHIST_L = """
Job <2>, User <gahplsf>, Project <default>, Command <sleep 30>
Tue Nov 24 13:57:18: Submitted from host <vm> with hold, to Queue <normal>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:22: Signal <KILL> requested by user or administrator <gahplsf>;

Tue Nov 24 13:57:22: Exited;

Summary of time in seconds spent in various states by  Tue Nov 24 13:57:22
  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL
  0        4        0        0        0        0        4
------------------------------------------------------------------------------

Job <4>, User <gahplsf>, Project <default>, Command <sleep 30>
Tue Nov 24 13:57:18: Submitted from host <vm>, to Queue <normal>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:21: Dispatched to <vm>;
Tue Nov 24 13:57:21: Starting (Pid 15117);
Tue Nov 24 13:57:21: Running with execution home </home/gahplsf>, Execution CWD
                     </tmp/lsfx>, Execution Pid <15117>;
Tue Nov 24 13:57:22: Suspended by the user or administrator;
Tue Nov 24 13:57:28: Suspended:  Waiting for re-scheduling after being resumed
                     by user;
Tue Nov 24 13:57:31: Running;
Tue Nov 24 13:57:34: Signal <KILL> requested by user or administrator <gahplsf>
                     ;
Tue Nov 24 13:57:34: Exited with exit code 130. The CPU time used is 0.0 second
                     s;

Summary of time in seconds spent in various states by  Tue Nov 24 13:57:34
  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL
  3        0        4        6        3        0        16
------------------------------------------------------------------------------

Job <5>, Job Name <okjob>, User <gahplsf>, Project <default>, Command <true>
Tue Nov 24 13:57:28: Submitted from host <vm>, to Queue <normal>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 13:57:31: Dispatched to <vm>;
Tue Nov 24 13:57:31: Starting (Pid 16052);
Tue Nov 24 13:57:31: Running with execution home </home/gahplsf>, Execution CWD
                     </tmp/lsfx>, Execution Pid <16052>;
Tue Nov 24 13:57:31: Done successfully. The CPU time used is 0.0 seconds;
Tue Nov 24 13:57:31: Post job process failed;

Summary of time in seconds spent in various states by  Tue Nov 24 13:57:31
  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL
  3        0        0        0        0        0        3
------------------------------------------------------------------------------

Job <61>, User <gahplsf>, Project <default>, Command <trap '' INT TERM; exec sleep 60>
Tue Nov 24 14:05:27: Submitted from host <vm>, to Queue <normal>, CWD </tmp/lsfx>, Output File </dev/null>;
Tue Nov 24 14:05:29: Dispatched to <vm>;
Tue Nov 24 14:05:29: Starting (Pid 2859);
Tue Nov 24 14:05:29: Running with execution home </home/gahplsf>, Execution CWD
                     </tmp/lsfx>, Execution Pid <2859>;
Tue Nov 24 14:05:31: Signal <KILL> requested by user or administrator <gahplsf>
                     ;
Tue Nov 24 14:05:53: Exited by signal 9. The CPU time used is 0.0 seconds;

Summary of time in seconds spent in various states by  Tue Nov 24 14:05:53
  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL
  2        0        24       0        0        0        26

"""

NOW = datetime(2026, 11, 24, 14, 0, 0).timestamp()


def test_parse_bsub():
    assert parse_bsub("Job <12> is submitted to default queue <normal>.\n") == "12"
    assert parse_bsub("Job <7> is submitted to queue <normal>.\n") == "7"
    assert parse_bsub("Job <1> is being terminated\n") is None
    assert parse_bsub("nosuch: No such queue. Job not submitted.\n") is None
    assert parse_bsub("") is None


def test_parse_lsf_conf():
    text = """# written by start.sh for host vm
LSF_SERVERDIR=/opt/volclava/sbin
LSF_BINDIR=/opt/volclava/bin
  LSF_UNIT_FOR_LIMITS = "GB"
LSB_MAILTO=!U
not a setting
"""
    conf = parse_lsf_conf(text)
    assert conf["LSF_BINDIR"] == "/opt/volclava/bin"
    assert conf["LSF_UNIT_FOR_LIMITS"] == "GB"
    assert conf["LSB_MAILTO"] == "!U"
    assert "not a setting" not in conf and len(conf) == 4


def test_parse_bjobs_json_known_and_unknown():
    jobs, missing = parse_bjobs_json(BJOBS_JSON)
    assert list(jobs) == ["3", "4", "1", "2"] and missing == {"99999"}
    assert jobs["3"]["STAT"] == "RUN" and jobs["2"]["EXEC_HOST"] == "   -   "
    only_unknown = (
        '{"COMMAND":"bjobs","JOBS":1,"RECORDS":[{"JOBID":"9","ERROR":"Job <9> is not found"}]}'
    )
    assert parse_bjobs_json(only_unknown) == ({}, {"9"})
    with pytest.raises(ValueError):
        parse_bjobs_json("No unfinished job found")


def test_parse_bjobs_wide():
    jobs = parse_bjobs_wide(BJOBS_WIDE)
    assert list(jobs) == ["3", "2", "6", "61"]  # an array's elements share the JOBID
    assert (jobs["3"]["STAT"], jobs["3"]["EXEC_HOST"], jobs["3"]["JOB_NAME"]) == (
        "RUN",
        "vm:vm",
        "sleep 20",
    )
    assert (jobs["2"]["STAT"], jobs["2"]["EXEC_HOST"]) == ("PSUSP", "-")
    assert jobs["61"]["STAT"] == "EXIT"
    readme = parse_bjobs_wide(README_WIDE)
    assert (readme["5"]["STAT"], readme["5"]["EXEC_HOST"], readme["5"]["QUEUE"]) == (
        "PSUSP",
        "",
        "normal",
    )
    assert readme["5"]["JOB_NAME"] == "heldjob"
    assert parse_bjobs_wide("No job found\n") == {}


def test_states_from_bjobs():
    jobs, _ = parse_bjobs_json(BJOBS_JSON)
    running = info_from_bjobs(jobs["3"], now=NOW)
    assert (running.status, running.worker_node) == (JobStatus.RUNNING, "vm")
    assert running.wallclock_s == pytest.approx(2 * 60 + 39)
    suspended = info_from_bjobs(jobs["4"], now=NOW)
    assert (suspended.status, suspended.hold_reason) == (JobStatus.HELD, "suspended")
    for stat, status, reason in [
        ("PEND", JobStatus.IDLE, None),
        ("PSUSP", JobStatus.HELD, "held"),
        ("SSUSP", JobStatus.HELD, "suspended"),
        ("UNKWN", JobStatus.RUNNING, None),
        ("ZOMBI", JobStatus.RUNNING, None),
    ]:
        info = info_from_bjobs({"STAT": stat, "EXEC_HOST": "2*vm"})
        assert (info.status, info.hold_reason) == (status, reason)
    done = info_from_bjobs({"STAT": "DONE", "EXEC_HOST": "vm:vm"})
    assert (done.status, done.exit_code, done.worker_node) == (JobStatus.COMPLETED, 0, "vm")
    with pytest.raises(DriverError, match="unexpected LSF job state"):
        info_from_bjobs({"STAT": "WEIRD"})
    removed = info_from_bjobs(jobs["3"], cancelled=True, now=NOW)
    assert (removed.status, removed.exit_reason) == (JobStatus.REMOVED, "cancelled")


def test_exit_codes_from_bjobs_l():
    records = split_records(BJOBS_L)
    assert set(records) == {"1", "2", "4", "5", "6[1]", "6[2]"}
    jobs, _ = parse_bjobs_json(BJOBS_JSON)
    failed = info_from_bjobs(jobs["1"], record=records["1"], now=NOW)
    assert (failed.status, failed.exit_code, failed.exit_signal) == (JobStatus.COMPLETED, 3, None)
    assert (failed.wallclock_s, failed.worker_node) == (1.0, "vm")
    pending = info_from_bjobs(jobs["2"], record=records["2"], now=NOW)
    assert (pending.status, pending.exit_code, pending.exit_signal) == (
        JobStatus.COMPLETED,
        None,
        None,
    )
    assert "while pending" in pending.exit_reason and pending.worker_node is None
    killed = info_from_record(records["4"])
    assert (killed.exit_code, killed.exit_signal, killed.worker_node) == (None, 2, "vm")
    assert info_from_record(records["5"]).exit_code == 0
    assert info_from_record(records["6[2]"]).exit_code == 5
    assert info_from_record("Job <9>, Status <RUN>\nTue Nov 24 13:57:21: Started on <vm>") is None
    # EXIT without its long record: completed, exit status unknown.
    unknown = info_from_bjobs(jobs["1"], now=NOW)
    assert (unknown.status, unknown.exit_code) == (JobStatus.COMPLETED, None)


def test_bhist_wrapped_lines():
    joined = join_continuations(BHIST_L)
    assert "Exited with exit code 130. The CPU time used is 0.0 seconds;" in joined
    assert "Signal <KILL> requested by user or administrator <gahplsf>;" in joined
    records = split_records(BHIST_L)
    assert set(records) == {"2", "4", "5", "61"}
    killed = info_from_record(records["4"])
    assert (killed.status, killed.exit_code, killed.exit_signal) == (JobStatus.COMPLETED, None, 2)
    assert killed.worker_node == "vm"
    done = info_from_record(records["5"])  # "Post job process failed" follows every success
    assert (done.status, done.exit_code) == (JobStatus.COMPLETED, 0)
    pending = info_from_record(records["2"])
    assert pending.exit_code is None and pending.exit_signal is None
    assert "killed by gahplsf while pending" in pending.exit_reason
    stubborn = info_from_record(records["61"])  # IBM-style "Exited by signal N"
    assert (stubborn.exit_code, stubborn.exit_signal) == (None, 9)
    assert info_from_record(records["4"], cancelled=True).status is JobStatus.REMOVED
    # A wrap inside the number itself.
    cut = (
        "Job <7>, User <u>\n"
        "Tue Nov 24 13:57:34: Exited with exit code 1\n" + " " * 21 + "7. The CPU time;\n"
    )
    assert info_from_record(split_records(cut)["7"]).exit_code == 17


def test_lsf_termination_reason_and_common_fields():
    record = (
        "Job <8>, User <u>\n"
        "Tue Nov 24 11:47:20: Started 1 Task(s) on Host(s) <vm>, Allocated 1 Slot(s);\n"
        "Tue Nov 24 11:48:20: Exited with exit code 140. The CPU time used is 0.0 seconds;\n"
        "Tue Nov 24 11:48:20: Completed <exit>; TERM_RUNLIMIT: job killed after reaching LSF"
        " run time limit.\n"
    )
    info = info_from_record(record)
    assert (info.exit_code, info.exit_signal, info.worker_node) == (None, 12, "vm")
    assert info.exit_reason == "TERM_RUNLIMIT: job killed after reaching LSF run time limit"
    given = info_from_record(record, common={"worker_node": "other", "wallclock_s": 60.0})
    assert (given.worker_node, given.wallclock_s) == ("other", 60.0)
    bare = info_from_record(record.split("TERM_")[0] + "TERM_OWNER:\n")
    assert bare.exit_reason == "TERM_OWNER"


def test_exit_info():
    assert exit_info(0) == {"exit_code": 0, "exit_reason": None}
    assert exit_info(3)["exit_code"] == 3
    assert exit_info(127)["exit_code"] == 127
    assert exit_info(137) == {"exit_signal": 9, "exit_reason": "killed by signal 9"}
    assert exit_info(130)["exit_signal"] == 2
    assert exit_info(140)["exit_signal"] == 12  # the -W run limit
    assert exit_info(200)["exit_code"] == 200
    assert exit_info(255)["exit_code"] == 255


def test_lsf_time():
    expected = datetime(2026, 11, 24, 13, 57, 7).timestamp()
    assert lsf_time("11/24-13:57:07", NOW) == expected
    assert lsf_time("-", NOW) is None and lsf_time(None, NOW) is None
    new_year = datetime(2027, 1, 1, 0, 5).timestamp()
    assert lsf_time("12/31-23:59:00", new_year) == datetime(2026, 12, 31, 23, 59).timestamp()
    assert lsf_time("11/24-13:57:07") is not None and lsf_time("11/24-13:57:07") <= time.time()


def test_bsub_options():
    spec = JobSpec(
        "/bin/true",
        name="my job [1-3]; $(x)",
        queue="q -x",
        project="p'1",
        memory_mb=1000,
        runtime_s=61,
        start_held=True,
    )
    assert bsub_options(spec) == [
        "-o", "/dev/null", "-e", "/dev/null", "-J", "my_job__1-3_____x_",
        "-q", "q -x", "-P", "p'1", "-M", "1000", "-W", "2", "-H",
    ]  # fmt: skip
    assert bsub_options(spec, memory_unit="KB")[11] == "1024000"
    assert bsub_options(spec, memory_unit="gb")[11] == "1"
    with pytest.raises(DriverError, match="unknown unit"):
        bsub_options(spec, memory_unit="furlongs")
    multi = bsub_options(JobSpec("/bin/true", nodes=2, cpus_per_node=4))
    assert multi[6:] == ["-n", "8", "-R", "span[ptile=4]"]
    count = bsub_options(JobSpec("/bin/true", count=3))
    assert count[6:] == ["-n", "3"]
    assert bsub_options(JobSpec("/bin/true", runtime_s=60))[6:] == ["-W", "1"]
    assert bsub_options(JobSpec("/bin/true"))[5] == "gahp"


def test_lsf_job_name():
    assert lsf_job_name("ok.name-1+2_x") == "ok.name-1+2_x"
    assert lsf_job_name("a[1-5]") == "a_1-5_"
    assert lsf_job_name("") == lsf_job_name(None) == "gahp"
    assert len(lsf_job_name("x" * 500)) == 128


def test_commands_and_memory_unit_from_lsf_conf(tmp_path: Path):
    (tmp_path / "lsf.conf").write_text("LSF_BINDIR=/lsf/bin\nLSF_UNIT_FOR_LIMITS=KB\n")
    driver = sync_driver("lsf", {"lsf_envdir": str(tmp_path)}, tmp_path / "state")
    assert driver.command_path("bsub") == "/lsf/bin/bsub"
    assert driver.env["LSF_ENVDIR"] == str(tmp_path)
    assert driver.memory_unit == "KB"
    mine = sync_driver("lsf", {"lsf_envdir": str(tmp_path), "bin_dir": "/x"}, tmp_path / "s")
    assert mine.command_path("bsub") == "/x/bsub"
    bare = sync_driver("lsf", {"lsf_envdir": str(tmp_path / "none")}, tmp_path / "s2")
    assert bare.command_path("bsub") == "bsub" and bare.memory_unit == "MB"
    with pytest.raises(DriverError, match="unknown configuration key"):
        sync_driver("lsf", {"sge_root": "/x"}, tmp_path / "s3")


def test_a_failing_bhist_leaves_only_its_jobs_out(tmp_path: Path, monkeypatch):
    """In a bulk query, bhist failing costs the jobs it was asked about (asked again on their
    own), not the whole query; asked alone, the failure is an error."""
    driver = sync_driver("lsf", {"lsf_envdir": str(tmp_path)}, tmp_path / "state")
    jobs, _ = parse_bjobs_json(BJOBS_JSON)
    monkeypatch.setattr(
        driver, "_bjobs", lambda ids: ({i: jobs[i] for i in ids if i in jobs}, set())
    )

    def records(command, *args):
        if command == "bhist":
            raise DriverError("bhist failed (exit status 255): cannot open lsb.events")
        return split_records(BJOBS_L)

    monkeypatch.setattr(driver, "_records", records)
    found = driver.bulk_status(["1", "3", "77"])
    assert set(found) == {"1", "3"} and found["1"].exit_code == 3
    with pytest.raises(DriverError, match="lsb.events"):
        driver.query_status("77")


def test_final_states_kept_are_bounded(tmp_path: Path, monkeypatch):
    """Finished jobs are answered again without a command, but a long-running server keeps
    only the newest ``limit`` of them (HTCondor stops asking once it has a final state): the
    older ones are asked of LSF again, and answered the same."""
    driver = sync_driver("lsf", {"lsf_envdir": str(tmp_path)}, tmp_path / "state")
    driver._final = FinalStates(limit=50)
    asked: list[str] = []

    def bjobs(ids):
        asked.extend(ids)
        return {i: {"STAT": "DONE", "EXEC_HOST": "vm"} for i in ids}, set()

    monkeypatch.setattr(driver, "_bjobs", bjobs)
    for first in range(1, 1001, 100):  # 1,000 jobs finish, bulk-queried 100 at a time
        ids = [str(i) for i in range(first, first + 100)]
        assert {i.status for i in driver.bulk_status(ids).values()} == {JobStatus.COMPLETED}
    assert len(driver._final) == 50 and len(asked) == 1000
    assert driver.query_status("1000").status == JobStatus.COMPLETED  # kept: no command
    assert len(asked) == 1000
    assert driver.query_status("1").status == JobStatus.COMPLETED  # dropped: asked again
    assert asked[-1] == "1"


def test_final_states_drop_the_oldest():
    states = FinalStates(limit=3)
    done = JobInfo(JobStatus.COMPLETED, exit_code=0)
    for i in "abcd":
        states[i] = done
    assert len(states) == 3 and states.get("a") is None and states.get("d") == done
    states["b"] = done  # set again: the newest now
    states["e"] = done
    assert states.get("c") is None and states.get("b") == done
    assert states.pop("b") == done and states.pop("b") is None
