"""Pure parsers and option builders, on outputs captured from Slurm 22.05 and its PBS wrappers."""

from __future__ import annotations

import pytest

from gahp_lrms import DriverError, JobSpec, JobStatus
from gahp_lrms.pbs import format_walltime, info_from_qstat, parse_qstat_full, qsub_options
from gahp_lrms.slurm import (
    job_info_from_fields,
    parse_duration,
    parse_exit_code,
    parse_sacct,
    parse_scontrol_job,
    sbatch_options,
    slurm_job_name,
)

_TAIL = (
    " ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:*"
    " CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null)"
    " DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)"
    " Command=/tmp/t.sh a JobState=FAKE b WorkDir=/tmp StdErr=/tmp/o.1 StdIn=/dev/null"
    " StdOut=/tmp/o.1 Power= "
)


def _scontrol(state: str, reason: str, exit_code: str, extra: str = "") -> str:
    return (
        "JobId=1 JobName=t.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759"
        f" Nice=0 Account=(null) QOS=(null) JobState={state} Reason={reason}"
        " Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0"
        f" ExitCode={exit_code} RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A"
        " SubmitTime=2026-11-22T12:03:33 Partition=debug AllocNode:Sid=localhost:2209"
        " ReqNodeList=(null) ExcNodeList=(null) NodeList=vm BatchHost=vm NumNodes=1"
        f" NumCPUs=1 NumTasks=1 CPUs/Task=1{extra}" + _TAIL
    )


SCONTROL_HELD = (
    "JobId=18 JobName=held UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 Nice=0"
    " Account=(null) QOS=(null) JobState=PENDING Reason=JobHeldUser Dependency=(null)"
    " Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00"
    " TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-22T12:08:33 EligibleTime=Unknown"
    " Partition=debug AllocNode:Sid=localhost:2209 ReqNodeList=(null) ExcNodeList=(null)"
    " NodeList= NumNodes=1 NumCPUs=1" + _TAIL
)

SACCT_C = """JobID|State|ExitCode|Elapsed|NodeList
1|FAILED|3:0|00:00:03|vm
4|CANCELLED|0:0|00:00:00|(null)
2|COMPLETED|0:0|00:00:02|vm
3|FAILED|0:9|00:00:00|vm
2|COMPLETED|5:0|00:01:02|vm
"""

QSTAT_F = """Job Id:\t10
\tJob_Name = q.sh
\tJob_Owner = root@localhost
\tjob_state = C
\tqueue = debug
\tqtime = Sun Nov 22 12:04:11 2026
\texec_host = vm/1
\tPriority = 4294901756
\tResource_List.walltime = 71582788:15:00
\tResource_List.nodect = 1
"""


def test_scontrol_fields_first_occurrence_wins():
    fields = parse_scontrol_job(_scontrol("RUNNING", "None", "0:0"))
    assert fields["JobState"] == "RUNNING"  # not the FAKE one inside Command=
    assert fields["ExitCode"] == "0:0" and fields["BatchHost"] == "vm"
    assert fields["AllocNode:Sid"] == "localhost:2209"
    assert fields["TRES"] == "cpu=1,node=1,billing=1"
    assert fields["Power"] == ""


@pytest.mark.parametrize(
    ("state", "reason", "code", "want", "exit_code", "signal"),
    [
        ("RUNNING", "None", "0:0", JobStatus.RUNNING, None, None),
        ("COMPLETING", "None", "0:0", JobStatus.RUNNING, None, None),
        ("PENDING", "Priority", "0:0", JobStatus.IDLE, None, None),
        ("PENDING", "JobHeldAdmin", "0:0", JobStatus.HELD, None, None),
        ("SUSPENDED", "None", "0:0", JobStatus.HELD, None, None),
        ("COMPLETED", "None", "0:0", JobStatus.COMPLETED, 0, None),
        ("FAILED", "NonZeroExitCode", "3:0", JobStatus.COMPLETED, 3, None),
        ("FAILED", "JobLaunchFailure", "0:9", JobStatus.COMPLETED, None, 9),
        ("TIMEOUT", "TimeLimit", "0:15", JobStatus.COMPLETED, None, 15),
        ("OUT_OF_MEMORY", "None", "0:125", JobStatus.COMPLETED, None, 125),
        ("NODE_FAIL", "None", "0:0", JobStatus.COMPLETED, 0, None),
        ("CANCELLED", "None", "0:15", JobStatus.REMOVED, None, None),
    ],
)
def test_state_mapping(state, reason, code, want, exit_code, signal):
    info = job_info_from_fields(parse_scontrol_job(_scontrol(state, reason, code)))
    assert info.status is want
    assert (info.exit_code, info.exit_signal) == (exit_code, signal)
    assert info.wallclock_s == 3.0
    if want is JobStatus.HELD:
        assert info.hold_reason
    if state == "TIMEOUT":
        assert "time limit" in info.exit_reason


def test_held_pending_job():
    info = job_info_from_fields(parse_scontrol_job(SCONTROL_HELD))
    assert info.status is JobStatus.HELD
    assert info.hold_reason == "JobHeldUser"
    assert info.worker_node is None


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        ({"JobState": "SUSPENDED", "Reason": "X", "BatchHost": "n1"}, ("n1", "suspended")),
        ({"JobState": "STOPPED", "Reason": "None", "NodeList": "n[1-2]"}, ("n[1-2]", "stopped")),
        ({"JobState": "REQUEUE_HOLD", "Reason": "JobHoldMaxRequeue"}, (None, "JobHoldMaxRequeue")),
        ({"JobState": "PENDING", "Reason": "(null)", "Priority": "0"}, (None, "held")),
    ],
)
def test_hold_reasons_and_nodes(fields, want):
    info = job_info_from_fields(fields)
    assert info.status is JobStatus.HELD and (info.worker_node, info.hold_reason) == want


def test_sacct_states_with_suffixes():
    info = job_info_from_fields({"State": "CANCELLED by 0", "NodeList": "n2", "Elapsed": "01:00"})
    assert (info.status, info.worker_node, info.exit_reason) == (
        JobStatus.REMOVED,
        "n2",
        "cancelled",
    )
    assert info.wallclock_s == 60.0
    info = job_info_from_fields({"State": "COMPLETED+", "NodeList": "None assigned"})
    assert (info.status, info.worker_node) == (JobStatus.COMPLETED, None)


def test_unknown_state_is_an_error():
    with pytest.raises(DriverError, match="unexpected Slurm job state"):
        job_info_from_fields({"JobState": "WEIRD"})
    with pytest.raises(DriverError, match="unexpected Slurm job state ' '"):
        job_info_from_fields({"State": " "})


def test_sacct_rows():
    assert parse_sacct(SACCT_C, "1") == {
        "JobID": "1",
        "State": "FAILED",
        "ExitCode": "3:0",
        "Elapsed": "00:00:03",
        "NodeList": "vm",
    }
    assert parse_sacct(SACCT_C, "2")["ExitCode"] == "5:0"  # last row (a requeue) wins
    assert parse_sacct(SACCT_C, "9") is None
    assert parse_sacct("", "1") is None
    info = job_info_from_fields(parse_sacct(SACCT_C, "4"))
    assert info.status is JobStatus.REMOVED and info.worker_node is None
    info = job_info_from_fields(parse_sacct(SACCT_C, "2"))
    assert (info.exit_code, info.wallclock_s, info.worker_node) == (5, 62.0, "vm")
    row = {"JobID": "7", "State": "CANCELLED by 0", "ExitCode": "0:0", "Elapsed": "00:00:01"}
    assert job_info_from_fields(row).status is JobStatus.REMOVED


def test_sacct_cpu_times():
    row = {"State": "COMPLETED", "ExitCode": "0:0", "UserCPU": "00:01.500", "SystemCPU": "00:00.25"}
    info = job_info_from_fields(row)
    assert (info.user_cpu_s, info.sys_cpu_s) == (1.5, 0.25)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:03", 3),
        ("01:02:03", 3723),
        ("1-00:00:01", 86401),
        ("2-03", 2 * 86400 + 3 * 3600),
        ("05:30", 330),
        ("00:01.500", 1.5),
        ("UNLIMITED", None),
        ("", None),
        (None, None),
        ("garbage", None),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_exit_codes():
    assert parse_exit_code("3:0") == (3, 0)
    assert parse_exit_code("0:15") == (0, 15)
    assert parse_exit_code("x") is None and parse_exit_code(None) is None


def test_sbatch_options_are_argv_items():
    spec = JobSpec(
        "/bin/x",
        workdir="/w d",
        queue="q b",
        project="p",
        memory_mb=512,
        runtime_s=61,
        nodes=2,
        cpus_per_node=4,
        count=3,
        start_held=True,
        name="my job; rm",
    )
    opts = sbatch_options(spec)
    assert opts[:3] == ["--parsable", "-J", "my_job__rm"]
    for pair in (["-D", "/w d"], ["-p", "q b"], ["-A", "p"], ["-t", "2"], ["-N", "2"]):
        i = opts.index(pair[0])
        assert opts[i : i + 2] == pair
    assert "--mem=512M" in opts and "--ntasks=3" in opts and "--mincpus=4" in opts
    assert "-H" in opts
    assert "--export" not in " ".join(opts)
    assert sbatch_options(JobSpec("/bin/x")) == [
        "--parsable",
        "-J",
        "gahp",
        "-o",
        "/dev/null",
        "-e",
        "/dev/null",
    ]


def test_job_names():
    assert slurm_job_name("a b$(c)") == "a_b__c_"
    assert slurm_job_name(None) == "gahp" and slurm_job_name("") == "gahp"
    assert len(slurm_job_name("x" * 200)) == 64


def test_qstat_full():
    fields = parse_qstat_full(QSTAT_F)
    assert fields["Job Id"] == "10" and fields["job_state"] == "C"
    info = info_from_qstat(fields)
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert info.worker_node == "vm"
    for state, want in (
        ("Q", JobStatus.IDLE),
        ("R", JobStatus.RUNNING),
        ("S", JobStatus.HELD),
        ("H", JobStatus.HELD),
    ):
        assert info_from_qstat({**fields, "job_state": state}).status is want
    with pytest.raises(DriverError):
        info_from_qstat({"job_state": "?"})


def test_qsub_options():
    spec = JobSpec(
        "/bin/x",
        queue="batch",
        project="proj-1",
        memory_mb=100,
        runtime_s=3661,
        nodes=2,
        count=3,
        cpus_per_node=2,
        start_held=True,
        name="a very long name!",
    )
    opts = qsub_options(spec)
    assert opts[:2] == ["-N", "a_very_long_nam"]
    assert opts[opts.index("-q") : opts.index("-q") + 2] == ["-q", "batch"]
    resources = [opts[i + 1] for i, o in enumerate(opts) if o == "-l"]
    assert resources == ["nodes=2:ppn=2", "ncpus=2", "mem=100mb", "walltime=01:01:01"]
    assert "-h" in opts
    with pytest.raises(DriverError, match="unsupported characters"):
        qsub_options(JobSpec("/bin/x", queue="q; rm -rf /"))
    assert format_walltime(59) == "00:00:59"
