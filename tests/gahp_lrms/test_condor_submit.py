"""The condor driver without a pool: the submit description of a job, the states read from
job ads, and the helper process's bounds (the live pool: test_condor_live.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import attrs
import pytest
from lrms_helpers import sync_driver

from gahp_blah.arguments import parse_env_v2, split_v2
from gahp_lrms import DriverError, JobInfo, JobSpec, JobStatus
from gahp_lrms.condor import (  # private: unit test of the condor driver's helpers
    _Helper,
    _worst,
    classad_string,
    job_info_from_ad,
    submit_description,
    submit_text,
    v2_arguments,
    v2_environment,
)
from gahp_lrms.config import CondorConfig

SETTINGS = CondorConfig()


def describe(spec: JobSpec, **settings: object) -> dict[str, str]:
    return submit_description(spec, attrs.evolve(SETTINGS, **settings), cwd="/srv/default")


# ---------------------------------------------------------------------- the submit language
@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("plain", "plain"),
        ("$(x) and $(Cluster)", "$(DOLLAR)(x) and $(DOLLAR)(Cluster)"),
        ("$ENV(HOME) $RANDOM_INTEGER(1,2)", "$(DOLLAR)ENV(HOME) $(DOLLAR)RANDOM_INTEGER(1,2)"),
        ("$HOME $$ $ x$", "$HOME $$ $ x$"),
        ("$(DOLLAR", "$(DOLLAR)(DOLLAR"),
    ],
)
def test_macros_are_written_so_that_nothing_expands(value, written):
    assert submit_text(value, "x") == written


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("a\nb", "line break"),
        ("a\rb", "line break"),
        ("$$(Name)", r"\$\$\("),
        ("$$([1+1])", r"\$\$\("),
        ("$$ENV(HOME)", r"\$\$\("),
        ("a $(DOLLAR) b", "DOLLAR"),
        ("$( dollar )", "DOLLAR"),
    ],
)
def test_what_the_submit_language_cannot_carry_is_refused(value, why):
    with pytest.raises(DriverError, match=why):
        submit_text(value, "the thing")


def test_classad_strings_escape_quotes_only():
    assert classad_string('say "hi" \\ x', "x") == '"say \\"hi\\" \\ x"'
    with pytest.raises(DriverError, match="backslash"):
        classad_string("C:\\", "the path")


ARGS = ["two words", "it's", 'say "hi"', "", "  pad  ", "*", "%j \\n", "a=b"]


def test_v2_arguments_and_environment_round_trip():
    assert split_v2(v2_arguments(ARGS)) == ARGS
    env = {"A": "x y", "B": "it's", "C": "", "D": 'q"uote'}
    assert parse_env_v2(v2_environment(env)) == env


# ---------------------------------------------------------------------- the description
def test_a_full_job():
    spec = JobSpec(
        "/bin/prog",
        ("a b", "$(x)"),
        environment={"E": "v w"},
        stdin="in",
        stdout="out $(Cluster)",
        stderr="/abs/err",
        workdir="/work dir",
        queue="short",
        project="proj",
        memory_mb=100,
        runtime_s=61,
        cpus_per_node=3,
        gpus=2,
        name="my job; x",
        start_held=True,
    )
    d = describe(spec)
    assert d == {
        "universe": "vanilla",
        "executable": "/bin/prog",
        "transfer_executable": "false",
        "should_transfer_files": "NO",
        "notification": "never",
        "batch_name": "my_job__x",
        "MY.Iwd": '"/work dir"',
        "request_cpus": "3",
        "MY.GahpJob": "true",
        "MY.Arguments": "\"'a b' '$(DOLLAR)(x)'\"",
        "MY.Environment": "\"E='v w'\"",
        "MY.In": '"in"',
        "MY.Out": '"out $(DOLLAR)(Cluster)"',
        "MY.Err": '"/abs/err"',
        "request_memory": "100",
        "request_gpus": "2",
        "MY.GahpRuntimeLimit": "61",
        "periodic_remove": "JobStatus == 2 && (time() - JobCurrentStartExecutingDate) > 61",
        "MY.BatchQueue": '"short"',
        "MY.ProjectName": '"proj"',
        "hold": "true",
    }


def test_defaults_working_directory_and_executable():
    d = describe(JobSpec("sh"))
    assert d["executable"].endswith("/sh") and d["executable"].startswith("/")
    assert d["MY.Iwd"] == '"/srv/default"'
    assert "MY.Arguments" not in d and "MY.Environment" not in d and "MY.Out" not in d
    assert describe(JobSpec("bin/x", workdir="/w"))["executable"] == "/w/bin/x"
    with pytest.raises(DriverError, match="not on the server's PATH"):
        describe(JobSpec("no-such-program-here"))


def test_queue_as_an_attribute_or_requirements():
    spec = JobSpec("/bin/true", queue='a "q"')
    assert describe(spec, queue_attribute="Partition")["MY.Partition"] == '"a \\"q\\""'
    d = describe(spec, queue_requirements="TARGET.Queue == {queue} && TARGET.X")
    assert d["requirements"] == 'TARGET.Queue == "a \\"q\\"" && TARGET.X'


def test_gpu_model():
    d = describe(JobSpec("/bin/true", gpu_model="A100"))
    assert d["request_gpus"] == "1"
    assert d["require_gpus"] == 'DeviceName == "A100"'


def test_inherited_environment_only_when_asked():
    spec = JobSpec("/bin/true", environment={"MINE": "1"})
    assert describe(spec)["MY.Environment"] == "\"MINE='1'\""
    d = submit_description(
        spec, attrs.evolve(SETTINGS, inherit_environment=True), environ={"SERVER": "s", "MINE": "0"}
    )
    assert parse_env_v2(d["MY.Environment"][1:-1]) == {"SERVER": "s", "MINE": "1"}


def test_site_submit_commands():
    spec = JobSpec("/bin/true", directives=("# c", "", '+Tag = "x"', "priority=5"))
    d = describe(spec)
    assert d["+Tag"] == '"x"' and d["priority"] == "5"
    for bad in ("no equals sign", "queue = 5", "executable = /bin/sh", "a b = c"):
        with pytest.raises(DriverError, match="site submit command"):
            describe(attrs.evolve(spec, directives=(bad,)))


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"whole_nodes": True}, "WholeNodes"),
        ({"nodes": 2}, "one machine"),
        ({"gpu_mode": "exclusive"}, "GPU modes"),
        ({"mics": 1}, "MIC"),
        ({"extra_args": ("-a", "x=1")}, "BatchExtraSubmitArgs"),
        ({"arguments": ("x\ny",)}, "argument has a line break"),
        ({"environment": {"A": "$$(Memory)"}}, "environment"),
        ({"stdout": "out\n"}, "standard output"),
        ({"workdir": "/w\\"}, "working directory ends with a backslash"),
        ({"queue": "q\n"}, "queue"),
        ({"executable": "/bin/true "}, "blank"),
    ],
)
def test_refusals_name_the_reason(changes, why):
    with pytest.raises(DriverError, match=why):
        describe(attrs.evolve(JobSpec("/bin/true"), **changes))


def test_one_node_is_fine():
    assert describe(JobSpec("/bin/true", nodes=1, cpus_per_node=4))["request_cpus"] == "4"


# ---------------------------------------------------------------------- job ads
def test_states_from_job_ads():
    assert job_info_from_ad({"JobStatus": 1}).status is JobStatus.IDLE
    running = job_info_from_ad(
        {
            "JobStatus": 2,
            "RemoteHost": "slot1_1@node7",
            "RemoteWallClockTime": 10.0,
            "JobCurrentStartDate": 1000,
            "ServerTime": 1005,
        }
    )
    assert (running.status, running.worker_node, running.wallclock_s) == (
        JobStatus.RUNNING,
        "node7",
        15.0,
    )
    done = job_info_from_ad(
        {"JobStatus": 4, "ExitBySignal": False, "ExitCode": 3, "LastRemoteHost": "s@n"}
    )
    assert (done.exit_code, done.exit_signal, done.worker_node) == (3, None, "n")
    killed = job_info_from_ad({"JobStatus": 4, "ExitBySignal": True, "ExitSignal": 9})
    assert (killed.exit_code, killed.exit_signal) == (None, 9)
    held = job_info_from_ad({"JobStatus": 5, "HoldReason": "because"})
    assert (held.status, held.hold_reason) == (JobStatus.HELD, "because")
    assert job_info_from_ad({"JobStatus": 7}).hold_reason == "suspended"
    removed = job_info_from_ad({"JobStatus": 3, "RemoveReason": "by user"})
    assert (removed.status, removed.exit_reason) == (JobStatus.REMOVED, "by user")
    timed_out = job_info_from_ad(
        {
            "JobStatus": 3,
            "GahpRuntimeLimit": 60,
            "RemoveReason": "The job attribute PeriodicRemove expression 'x' evaluated to TRUE",
        }
    )
    assert timed_out.status is JobStatus.COMPLETED and timed_out.exit_code is None
    assert "time limit" in (timed_out.exit_reason or "")
    with pytest.raises(DriverError, match="unexpected"):
        job_info_from_ad({"JobStatus": 42})


def test_a_cluster_is_its_least_advanced_proc():
    done, failed = JobInfo(JobStatus.COMPLETED, exit_code=0), JobInfo(JobStatus.COMPLETED, 2)
    running, removed = JobInfo(JobStatus.RUNNING), JobInfo(JobStatus.REMOVED)
    assert _worst([done, running]) is running
    assert _worst([done, failed, removed]) is failed
    assert _worst([removed, done]) is done
    assert _worst([removed, removed]) is removed
    assert _worst([running, JobInfo(JobStatus.HELD)]).status is JobStatus.HELD


# ---------------------------------------------------------------------- the helper process
def _fake_helper(tmp_path: Path, body: str) -> _Helper:
    script = tmp_path / "fake.py"
    script.write_text("import json, sys, time\nfor line in sys.stdin:\n" + body)
    return _Helper([sys.executable, str(script)], {})


def test_a_helper_that_does_not_answer_is_killed_after_the_timeout(tmp_path):
    helper = _fake_helper(tmp_path, "    time.sleep(60)\n")
    t0 = time.monotonic()
    with pytest.raises(DriverError, match="did not answer within 0.5 s"):
        helper.call({"op": "ping"}, 0.5)
    assert time.monotonic() - t0 < 5
    assert helper.proc is None  # killed, a new one next time


def test_helper_answers_errors_and_death(tmp_path):
    helper = _fake_helper(
        tmp_path,
        "    r = json.loads(line)\n"
        "    if r['op'] == 'die': sys.exit(3)\n"
        "    if r['op'] == 'big': print('x' * (70 << 20), flush=True); continue\n"
        "    print(json.dumps({'error': 'nope'} if r['op'] == 'bad' else {'ok': r}), flush=True)\n",
    )
    assert helper.call({"op": "ping", "n": 1}, 10) == {"op": "ping", "n": 1}
    with pytest.raises(DriverError, match="HTCondor: nope"):
        helper.call({"op": "bad"}, 10)
    with pytest.raises(DriverError, match="over"):
        helper.call({"op": "big"}, 10)
    with pytest.raises(DriverError, match="exited"):
        helper.call({"op": "die"}, 10)
    assert helper.call({"op": "again"}, 10) == {"op": "again"}  # restarted
    assert helper.calls == {"ping": 1, "bad": 1, "big": 1, "die": 1, "again": 1}
    helper.close()


def test_settings_are_checked(tmp_path):
    with pytest.raises(DriverError, match="queue_attribute"):
        sync_driver("condor", {"queue_attribute": "not a name"}, tmp_path)
    with pytest.raises(DriverError, match="nosuch"):
        sync_driver("condor", {"nosuch": 1}, tmp_path)
    with pytest.raises(DriverError, match="malformed"):
        sync_driver("condor", {}, tmp_path).status("1; rm")
