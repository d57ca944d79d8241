"""The sge driver's pure parsers and option builder, on output captured from Son of Grid
Engine 8.1.9 (Debian 12)."""

from __future__ import annotations

import pytest

from gahp_lrms import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.sge import (
    info_from_qacct,
    info_from_qstat,
    parse_qacct,
    parse_qstat_error_reason,
    parse_qstat_xml,
    parse_seconds,
    qsub_options,
    sge_job_name,
)

# qstat -xml -u '*': 34 suspended (qmod -sj), 35 running in pe smp 2, 38 Eqw (missing -wd),
# 36 held (qsub -h), 37 waiting (qsub -a an hour ahead).
QSTAT_XML = """<?xml version='1.0'?>
<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <job_list state="running">
      <JB_job_number>34</JB_job_number>
      <JAT_prio>0.50500</JAT_prio>
      <JB_name>sge_s.sh</JB_name>
      <JB_owner>root</JB_owner>
      <state>s</state>
      <JAT_start_time>2026-11-22T12:59:05</JAT_start_time>
      <queue_name>all.q@vm</queue_name>
      <slots>1</slots>
    </job_list>
    <job_list state="running">
      <JB_job_number>35</JB_job_number>
      <JAT_prio>0.60500</JAT_prio>
      <JB_name>sge_s.sh</JB_name>
      <JB_owner>root</JB_owner>
      <state>r</state>
      <JAT_start_time>2026-11-22T12:59:05</JAT_start_time>
      <queue_name>all.q@vm</queue_name>
      <slots>2</slots>
    </job_list>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>38</JB_job_number>
      <JAT_prio>0.50500</JAT_prio>
      <JB_name>sge_s.sh</JB_name>
      <JB_owner>root</JB_owner>
      <state>Eqw</state>
      <JB_submission_time>2026-11-22T12:59:05</JB_submission_time>
      <queue_name></queue_name>
      <slots>1</slots>
    </job_list>
    <job_list state="pending">
      <JB_job_number>36</JB_job_number>
      <JAT_prio>0.00000</JAT_prio>
      <JB_name>held</JB_name>
      <JB_owner>root</JB_owner>
      <state>hqw</state>
      <JB_submission_time>2026-11-22T12:59:05</JB_submission_time>
      <queue_name></queue_name>
      <slots>1</slots>
    </job_list>
    <job_list state="pending">
      <JB_job_number>37</JB_job_number>
      <JAT_prio>0.00000</JAT_prio>
      <JB_name>sge_s.sh</JB_name>
      <JB_owner>root</JB_owner>
      <state>qw</state>
      <JB_submission_time>2026-11-22T12:59:05</JB_submission_time>
      <queue_name></queue_name>
      <slots>1</slots>
    </job_list>
  </job_info>
</job_info>
"""

QSTAT_EMPTY = """<?xml version='1.0'?>
<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
  </queue_info>
  <job_info>
  </job_info>
</job_info>
"""

# qacct -j 5 (exit 3); 6 (kill -KILL $$), 34 (qdel of a running job) look the same.
QACCT_EXIT3 = """==============================================================
qname        all.q               
hostname     vm                  
group        root                
owner        root                
project      NONE                
department   defaultdepartment   
jobname      sge_e.sh            
jobnumber    5                   
taskid       undefined
account      sge                 
priority     0                   
qsub_time    Sun Nov 22 12:54:53 2026
start_time   Sun Nov 22 12:54:53 2026
end_time     Sun Nov 22 12:54:53 2026
granted_pe   NONE                
slots        1                   
failed       0    
exit_status  3                   
ru_wallclock 0s
ru_utime     0.003s
ru_stime     0.006s
ru_maxrss    4.301KB
cpu          0.009s
mem          0.000Bs
maxvmem      0.000B
arid         undefined
ar_sub_time  undefined
category     NONE
"""  # noqa: W291 (qacct pads values with blanks)

QACCT_KILLED = """==============================================================
qname        all.q               
hostname     vm                  
jobname      sge_s.sh            
jobnumber    34                  
taskid       undefined
qsub_time    Sun Nov 22 12:59:05 2026
start_time   Sun Nov 22 12:59:05 2026
end_time     Sun Nov 22 12:59:08 2026
granted_pe   NONE                
slots        1                   
failed       100 : assumedly after job
exit_status  137                  (Killed)
ru_wallclock 3s
ru_utime     0.003s
ru_stime     0.006s
category     NONE
"""  # noqa: W291

# Job 7 (missing working directory): first the error record, then (after qmod -cj) a run.
QACCT_ERROR_THEN_RUN = """==============================================================
qname        all.q               
hostname     vm                  
jobname      sge_e.sh            
jobnumber    7                   
qsub_time    Sun Nov 22 12:54:53 2026
start_time   -/-
end_time     -/-
failed       28  : changing into working directory
exit_status  0                   
category     NONE
==============================================================
qname        all.q               
hostname     vm                  
jobname      sge_e.sh            
jobnumber    7                   
failed       0    
exit_status  0                   
ru_wallclock 1s
category     NONE
"""  # noqa: W291

QSTAT_J_ERROR = """==============================================================
job_number:                 38
exec_file:                  job_scripts/38
owner:                      root
sge_o_workdir:              /tmp
error reason          1:      11/22/2026 12:59:05 [0:31555]: error: can't chdir to /nonexistent: No such file or directory
scheduling info:            Job is in error state
"""  # noqa: E501


def test_parse_qstat_xml():
    jobs = parse_qstat_xml(QSTAT_XML)
    assert sorted(jobs) == ["34", "35", "36", "37", "38"]
    assert jobs["35"]["state"] == "r" and jobs["35"]["slots"] == "2"
    assert jobs["35"]["list_state"] == "running" and jobs["38"]["list_state"] == "pending"
    assert jobs["36"]["queue_name"] == ""
    assert parse_qstat_xml(QSTAT_EMPTY) == {}
    with pytest.raises(DriverError, match="unreadable qstat"):
        parse_qstat_xml("error: unable to contact qmaster")


@pytest.mark.parametrize(
    ("job", "status", "reason"),
    [
        ("34", JobStatus.HELD, "suspended"),
        ("35", JobStatus.RUNNING, None),
        ("36", JobStatus.HELD, "held (qhold)"),
        ("37", JobStatus.IDLE, None),
        ("38", JobStatus.HELD, "error: job in error state (Eqw)"),
    ],
)
def test_info_from_qstat(job, status, reason):
    info = info_from_qstat(parse_qstat_xml(QSTAT_XML)[job])
    assert (info.status, info.hold_reason) == (status, reason)
    if job in ("34", "35"):
        assert info.worker_node == "vm" and info.wallclock_s is not None


def test_info_from_qstat_other_states():
    def state(s: str, **kw) -> JobInfo:
        return info_from_qstat({"state": s, "queue_name": "all.q@node1"}, **kw)

    reason = parse_qstat_error_reason(QSTAT_J_ERROR)
    assert state("Eqw", error_reason=reason).hold_reason == (
        "error: can't chdir to /nonexistent: No such file or directory"
    )
    assert state("t").status is JobStatus.RUNNING
    assert state("Rr").status is JobStatus.RUNNING
    assert state("hr").status is JobStatus.RUNNING  # qhold does not stop a running job
    assert state("S").hold_reason == "suspended (queue suspended)"
    assert state("T").status is JobStatus.HELD
    assert state("T").hold_reason == "suspended (load threshold)"
    assert state("Eqw", error_reason="Error: quota").hold_reason == "Error: quota"
    assert state("Eqw").worker_node is None and state("S").worker_node == "node1"
    assert state("hqw").worker_node is None and state("qw").status is JobStatus.IDLE
    assert state("hRwq").status is JobStatus.HELD
    assert state("dr").status is JobStatus.RUNNING  # someone else's qdel: not ours
    removed = state("dr", cancelled=True)
    assert (removed.status, removed.exit_reason) == (JobStatus.REMOVED, "cancelled")
    with pytest.raises(DriverError, match="unexpected"):
        state("zz")


def test_parse_qacct():
    record = parse_qacct(QACCT_EXIT3, "5")
    assert record["failed"] == "0" and record["exit_status"] == "3"
    assert record["hostname"] == "vm" and record["ru_wallclock"] == "0s"
    assert parse_qacct(QACCT_EXIT3, "50") is None
    assert parse_qacct("", "5") is None
    assert parse_qacct(QACCT_ERROR_THEN_RUN, "7")["ru_wallclock"] == "1s"  # the last wins


def test_info_from_qacct():
    info = info_from_qacct(parse_qacct(QACCT_EXIT3, "5"))
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, 3, None)
    assert info.exit_reason == "exited with status 3"
    assert (info.worker_node, info.wallclock_s, info.user_cpu_s) == ("vm", 0.0, 0.003)
    killed = info_from_qacct(parse_qacct(QACCT_KILLED, "34"))
    assert (killed.exit_code, killed.exit_signal) == (None, 9)
    assert killed.wallclock_s == 3.0
    removed = info_from_qacct(parse_qacct(QACCT_KILLED, "34"), cancelled=True)
    assert (removed.status, removed.exit_reason) == (JobStatus.REMOVED, "cancelled")
    error = info_from_qacct(parse_qacct(QACCT_ERROR_THEN_RUN.split("=\n", 2)[1], "7"))
    assert (error.status, error.exit_code) == (JobStatus.COMPLETED, None)
    assert "changing into working directory" in error.exit_reason
    ok = info_from_qacct({"failed": "0", "exit_status": "0"})
    assert (ok.exit_code, ok.exit_reason) == (0, None)


def test_info_from_qacct_failed_codes():
    def qacct(failed: str, status: str, host: str = "NONE") -> JobInfo:
        return info_from_qacct({"failed": failed, "exit_status": status, "hostname": host})

    after = qacct("100 : assumedly after job", "2", "vm")  # not a signal: the job's status
    assert (after.exit_code, after.exit_signal, after.worker_node) == (2, None, "vm")
    assert after.exit_reason == "exited with status 2"
    assert qacct("0", "137").exit_code == 137  # failed 0: the job's own status, even > 128
    bare = qacct("26 :", "0")
    assert (bare.exit_code, bare.worker_node) == (None, None)
    assert bare.exit_reason == "Grid Engine could not run the job: code 26 :"
    odd = qacct("x", "")
    assert odd.exit_reason == "Grid Engine could not run the job: code x"


def test_parse_qstat_error_reason():
    assert parse_qstat_error_reason(QSTAT_J_ERROR) == (
        "error: can't chdir to /nonexistent: No such file or directory"
    )
    assert parse_qstat_error_reason("job_number: 1\n") is None


def test_parse_seconds():
    assert parse_seconds("0s") == 0.0
    assert parse_seconds("0.003s") == 0.003
    assert parse_seconds("125") == 125.0
    assert parse_seconds("1:02:03") == 3723.0
    assert parse_seconds("1:00:00:01") == 86401.0
    assert parse_seconds("") is None and parse_seconds("NONE") is None


def test_sanitize_job_name():
    assert sge_job_name("tricky name; $(x)") == "tricky_name____x_"
    assert sge_job_name("1abc") == "j1abc"  # SGE names cannot start with a digit
    assert sge_job_name("a:b/c@d") == "a_b_c_d"
    assert sge_job_name(None) == "gahp"
    assert len(sge_job_name("x" * 100)) == 64


def test_qsub_options():
    spec = JobSpec(
        "/bin/true",
        workdir="/w d",
        queue="all.q",
        project="p1",
        runtime_s=90,
        memory_mb=1000,
        name="n",
        start_held=True,
    )
    opts = qsub_options(spec)
    assert opts[:6] == ["-terse", "-C", "", "-V", "-S", "/bin/sh"]
    pairs = dict(zip(opts[6::2], opts[7::2], strict=False))
    assert pairs["-N"] == "n" and pairs["-o"] == "/dev/null" and pairs["-e"] == "/dev/null"
    assert pairs["-wd"] == "/w d" and pairs["-q"] == "all.q" and pairs["-P"] == "p1"
    assert pairs["-l"] == "h_rt=90,h_vmem=1000M"
    assert opts[-1] == "-h"
    assert "-pe" not in opts


def test_qsub_options_workdir_with_dollar_is_not_expanded():
    opts = qsub_options(JobSpec("/bin/true", workdir="/w/$JOB_ID"))
    assert opts[opts.index("-wd") + 1] == "/"


def test_qsub_options_slots():
    spec = JobSpec("/bin/true", nodes=1, cpus_per_node=4, memory_mb=1000)
    opts = qsub_options(spec, parallel_environment="smp")
    i = opts.index("-pe")
    assert opts[i : i + 3] == ["-pe", "smp", "4"]
    assert opts[opts.index("-l") + 1] == "h_vmem=250M"  # per slot
    count = qsub_options(JobSpec("/bin/true", count=3), parallel_environment="mpi")
    assert count[count.index("-pe") + 2] == "3"
    assert "-pe" not in qsub_options(JobSpec("/bin/true", count=3))  # one slot, no PE
    with pytest.raises(DriverError, match="parallel environment"):
        qsub_options(JobSpec("/bin/true", nodes=2))
