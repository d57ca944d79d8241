"""GPUs, MICs, whole nodes, host counts and the user's extra submit arguments, as each
batch-script driver asks them of its batch system (or refuses them), and Slurm jobs on
another cluster of a multi-cluster setup (``partition@cluster``), on stand-in commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from lrms_helpers import sync_driver

from gahp_lrms import DriverError, JobSpec
from gahp_lrms.lsf import bsub_options
from gahp_lrms.pbs import qsub_options as pbs_qsub_options
from gahp_lrms.script import directive_line, render_script
from gahp_lrms.sge import qsub_options as sge_qsub_options
from gahp_lrms.sge import sge_script
from gahp_lrms.slurm import SlurmDriver, sbatch_options, split_queue

SPEC = JobSpec("/bin/true")


def spec(**kw: object) -> JobSpec:
    return JobSpec("/bin/true", **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- GPUs
@pytest.mark.parametrize(
    "kw,want",
    [
        ({"gpus": 2}, "--gres=gpu:2"),
        ({"gpus": 2, "gpu_model": "ci"}, "--gres=gpu:ci:2"),
        ({"gpu_model": "a100"}, "--gres=gpu:a100:1"),  # as the C blahp: one of that model
        ({"gpus": 1, "mics": 2}, "--gres=gpu:1,mic:2"),
        ({"mics": 3}, "--gres=mic:3"),
    ],
)
def test_slurm_gpus_and_mics_are_one_gres(kw, want):
    opts = sbatch_options(spec(**kw))
    assert want in opts and sum(o.startswith("--gres") for o in opts) == 1


def test_slurm_refuses_a_gpu_mode():
    with pytest.raises(DriverError, match="GPUMode.*no GPU modes"):
        sbatch_options(spec(gpus=1, gpu_mode="exclusive_process"))


def test_pbspro_gpus_are_in_the_select_shared_over_the_chunks():
    opts = pbs_qsub_options(spec(gpus=2), flavor="pbspro")
    assert "select=1:ncpus=1:ngpus=2" in opts
    opts = pbs_qsub_options(spec(gpus=4, nodes=2, cpus_per_node=2), flavor="pbspro")
    assert "select=2:ncpus=2:ngpus=2" in opts
    with pytest.raises(DriverError, match="evenly"):
        pbs_qsub_options(spec(gpus=3, nodes=2), flavor="pbspro")


@pytest.mark.parametrize(
    "kw,flavor,match",
    [
        ({"gpus": 1, "gpu_model": "a100"}, "pbspro", "GPUModel"),
        ({"gpus": 1, "gpu_mode": "shared"}, "pbspro", "GPUMode"),
        ({"mics": 1}, "pbspro", "MICNumber"),
        ({"gpus": 1, "gpu_model": "a100"}, "torque", "GPUModel"),
        ({"mics": 1}, "torque", "MICNumber"),
    ],
)
def test_pbs_refuses_what_it_cannot_ask(kw, flavor, match):
    with pytest.raises(DriverError, match=match):
        pbs_qsub_options(spec(**kw), flavor=flavor)


def test_torque_gpus_are_in_the_nodes_request_with_their_mode():
    opts = pbs_qsub_options(spec(gpus=2, gpu_mode="exclusive_process"), flavor="torque")
    assert "nodes=1:ppn=1:gpus=2:exclusive_process" in opts


def test_lsf_gpus_use_the_gpu_option():
    assert bsub_options(spec(gpus=2))[-2:] == ["-gpu", "num=2"]
    opts = bsub_options(spec(gpus=2, gpu_mode="exclusive_process", gpu_model="TeslaV100"))
    assert opts[-2:] == ["-gpu", "num=2:mode=exclusive_process:gmodel=TeslaV100"]
    assert "rusage[nmics=2]" in bsub_options(spec(mics=2))


def test_sge_gpus_are_the_gpu_complex_and_the_rest_is_refused():
    opts = sge_qsub_options(spec(gpus=2, runtime_s=60))
    assert opts[opts.index("-l") + 1] == "gpu=2,h_rt=60"
    for kw, match in (
        ({"gpu_model": "a100"}, "GPUModel"),
        ({"gpus": 1, "gpu_mode": "shared"}, "GPUMode"),
        ({"mics": 1}, "MICNumber"),
        ({"whole_nodes": True}, "WholeNodes"),
    ):
        with pytest.raises(DriverError, match=match):
            sge_qsub_options(spec(**kw))


# ---------------------------------------------------------------------- whole nodes
def test_whole_nodes_per_batch_system():
    opts = sbatch_options(spec(whole_nodes=True))
    assert opts[opts.index("-N") + 1] == "1" and "--exclusive" in opts
    opts = sbatch_options(spec(whole_nodes=True, nodes=3))
    assert opts[opts.index("-N") + 1] == "3" and "--exclusive" in opts
    assert "--exclusive" not in sbatch_options(spec(nodes=3))
    assert "place=excl" in pbs_qsub_options(spec(whole_nodes=True), flavor="pbspro")
    assert "place=scatter:excl" in pbs_qsub_options(
        spec(whole_nodes=True, nodes=2), flavor="pbspro"
    )
    opts = pbs_qsub_options(spec(whole_nodes=True), flavor="torque")
    assert "nodes=1:ppn=1" in opts and "x=NACCESSPOLICY:SINGLEJOB" in opts
    assert bsub_options(spec(whole_nodes=True))[-1] == "-x"
    opts = bsub_options(spec(whole_nodes=True, cpus_per_node=4))
    assert "span[hosts=1]" in opts and "-x" in opts
    opts = bsub_options(spec(whole_nodes=True, nodes=2, cpus_per_node=4))
    assert "span[ptile=4]" in opts and opts[opts.index("-n") + 1] == "8"


# ---------------------------------------------------------------------- extra arguments
def test_extra_arguments_are_one_directive_line_of_the_systems_prefix():
    words = ("--qos=high", "--comment=two words", "-A", "acct")
    assert directive_line("#SBATCH", words) == ['#SBATCH --qos=high "--comment=two words" -A acct']
    assert directive_line("#PBS", ()) == []


@pytest.mark.parametrize(
    "words,match",
    [
        (("--comment=x\n#SBATCH --uid=0",), "control character"),
        (("--comment=x\r",), "control character"),
        (("--comment=x\0",), "control character"),
        (('--comment=a"b',), "quote"),
        (("--comment='a",), "quote"),
        (("--comment=a\\",), "backslash"),
        (("--comment=a#b",), "'#'"),
        (("script.sh",), "start with an option"),
        (("-A", ""), "empty"),
        (tuple(f"-x{i}" for i in range(65)), "more than 64"),
    ],
)
def test_hostile_extra_arguments_are_refused(words, match):
    with pytest.raises(ValueError, match=match):
        spec(extra_args=words)


@pytest.mark.parametrize("driver", ["slurm", "pbs", "lsf"])
def test_extra_arguments_reach_the_script_head_only(driver, tmp_path):
    job = spec(extra_args=("--comment=$(touch /tmp/x)", "-N", "name"), arguments=("a",))
    drv = sync_driver(
        driver,
        {"bin_dir": str(tmp_path), "flavor": "pbspro"}
        if driver == "pbs"
        else {"bin_dir": str(tmp_path)},
        tmp_path / "state",
    )
    submission = drv._submission(job)  # type: ignore[attr-defined]
    text = (
        submission.input if submission.input is not None else Path(submission.args[-1]).read_text()
    )
    if submission.remove:
        Path(submission.remove).unlink()
    prefix = {"slurm": "#SBATCH", "pbs": "#PBS", "lsf": "#BSUB"}[driver]
    lines = text.splitlines()
    assert lines[1] == f'{prefix} "--comment=$(touch /tmp/x)" -N name'
    assert "--comment=$(touch /tmp/x)" not in submission.args
    assert sum("touch" in line for line in lines) == 1  # nowhere a shell would run it


def test_sge_extra_arguments_become_a_directive_under_the_submissions_own_prefix():
    script, prefix = sge_script(spec(extra_args=("-l", "exclusive=true")))
    assert prefix.startswith("#gahp")
    assert f"{prefix} -l exclusive=true" in script.splitlines()
    assert "#$" not in script
    assert sge_script(SPEC)[1] == ""  # none: directives stay off


def test_a_script_without_extra_arguments_is_unchanged():
    assert render_script(SPEC) == render_script(spec(extra_args=()))


@pytest.mark.parametrize("driver", ["fork"])
def test_drivers_without_a_batch_system_refuse_the_requests(driver, tmp_path):
    drv = sync_driver(driver, {}, tmp_path / "state")
    for kw in ({"gpus": 1}, {"whole_nodes": True}, {"extra_args": ("--qos=x",)}, {"mics": 1}):
        with pytest.raises(DriverError, match="cannot give a job"):
            drv.submit(spec(**kw))


# ---------------------------------------------------------------------- Slurm multi-cluster
def test_queue_partition_at_cluster():
    assert split_queue("short@west") == ("short", "west")
    assert split_queue("@west") == (None, "west")
    assert split_queue("short") == ("short", None)
    opts = sbatch_options(spec(queue="short@west"))
    assert opts[opts.index("-p") + 1] == "short" and opts[opts.index("-M") + 1] == "west"
    assert "-p" not in sbatch_options(spec(queue="@west"))
    with pytest.raises(DriverError, match="not a name"):
        sbatch_options(spec(queue="short@we st"))


def _stand_ins(tmp_path: Path, commands: dict[str, str]) -> SlurmDriver:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in commands.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\necho \"{name} $*\" >> '{tmp_path}/calls'\n{body}\n")
        path.chmod(0o755)
    drv = sync_driver("slurm", {"bin_dir": str(bin_dir), "cancel_wait_s": 1}, tmp_path / "st")
    assert isinstance(drv.blocking, SlurmDriver)
    return drv


def test_a_job_on_another_cluster_keeps_it_in_its_id_for_status_and_cancel(tmp_path):
    squeue_row = "7|RUNNING|None|1|0:05|vm|0"
    drv = _stand_ins(
        tmp_path,
        {
            "sbatch": "echo '7;west'",
            "squeue": f"echo 'CLUSTER: west'; echo '{squeue_row}'",
            "scontrol": "echo 'JobId=7 JobState=RUNNING BatchHost=vm'",
            "scancel": "exit 0",
            "sacct": "exit 1",
        },
    )
    native = drv.submit(spec(queue="short@west"))
    assert native == "7@west"
    assert drv.bulk_status([native])[native].status.name == "RUNNING"
    drv.cancel(native)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].startswith("sbatch ") and "-p short -M west" in calls[0]
    assert any(c.startswith("squeue -M west ") and " -j 7 " in c for c in calls)
    assert "scancel -M west 7" in calls
    assert all("7@west" not in c for c in calls)


def test_local_and_other_cluster_jobs_are_asked_apart(tmp_path):
    drv = _stand_ins(
        tmp_path,
        {
            "squeue": 'case "$*" in *"-M west"*) echo "8|PENDING|None|1|0:00||";;'
            ' *) echo "8|RUNNING|None|1|0:05|vm|0";; esac',
            "sacct": "exit 1",
        },
    )
    found = drv.bulk_status(["8", "8@west"])
    assert found["8"].status.name == "RUNNING" and found["8@west"].status.name == "IDLE"
