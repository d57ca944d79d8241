"""GPUs, whole nodes and extra submit arguments on the real batch systems (Slurm with two
stand-in GPUs as a generic resource, ``.ci/slurm-up.sh``; OpenPBS with ``ngpus``,
``.ci/pbs-gpus.sh``; Grid Engine and volclava with what they offer): the batch system's own
view of each job, and a request it cannot meet failing at submit with its reason."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from lrms_helpers import lsf_mkdir, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)


def _slurm_job(driver: Driver, native_id: str) -> str:
    return driver._run("scontrol", "show", "job", native_id).stdout  # type: ignore[attr-defined]


def _slurm_gpus(driver: Driver) -> int:
    node = driver._run("scontrol", "-o", "show", "node").stdout  # type: ignore[attr-defined]
    m = re.search(r"\bGres=gpu(?::\w+)?:(\d+)", node)
    return int(m.group(1)) if m else 0


# ---------------------------------------------------------------------- Slurm
def test_slurm_job_gets_two_gpus(slurm_driver, tmp_path):
    if _slurm_gpus(slurm_driver) < 2:
        pytest.skip("this Slurm has no 2 GPUs (run the current .ci/slurm-up.sh)")
    out = tmp_path / "cvd"
    jid = slurm_driver.submit(
        JobSpec("/bin/sh", ("-c", f'echo "$CUDA_VISIBLE_DEVICES" > {out}'), gpus=2)
    )
    info = wait_status(slurm_driver, jid, *DONE, timeout=120)
    assert info.status is JobStatus.COMPLETED and info.exit_code == 0, info
    assert "gres:gpu:2" in _slurm_job(slurm_driver, jid)  # TresPerNode
    assert out.read_text().strip() == "0,1"


def test_slurm_gpu_model_and_too_many_gpus(slurm_driver, tmp_path):
    if _slurm_gpus(slurm_driver) < 2:
        pytest.skip("this Slurm has no 2 GPUs (run the current .ci/slurm-up.sh)")
    jid = slurm_driver.submit(JobSpec("/bin/true", gpus=1, gpu_model="ci"))
    assert "gres:gpu:ci:1" in _slurm_job(slurm_driver, jid)
    wait_status(slurm_driver, jid, *DONE, timeout=120)
    with pytest.raises(DriverError, match="sbatch.*(not available|Invalid generic resource)"):
        slurm_driver.submit(JobSpec("/bin/true", gpus=3))


def test_slurm_whole_node_job_has_the_node_alone(slurm_driver):
    jid = slurm_driver.submit(JobSpec("/bin/sleep", ("30",), whole_nodes=True))
    # it starts once the node is free of other jobs
    wait_status(slurm_driver, jid, JobStatus.RUNNING, timeout=600)
    job = _slurm_job(slurm_driver, jid)
    node = slurm_driver._run("scontrol", "-o", "show", "node").stdout  # type: ignore[attr-defined]
    total = re.search(r"CPUTot=(\d+)", node)
    assert "OverSubscribe=NO" in job and total is not None
    assert re.search(rf"NumCPUs={total.group(1)}\b", job), job
    slurm_driver.cancel(jid)


def test_slurm_extra_submit_arguments_arrive(slurm_driver):
    spec = JobSpec("/bin/true", extra_args=("--comment=from extra args", "--nice=7"))
    jid = slurm_driver.submit(spec)
    job = _slurm_job(slurm_driver, jid)
    assert "Comment=from extra args" in job and "Nice=7" in job, job
    wait_status(slurm_driver, jid, *DONE, timeout=120)


def test_slurm_refuses_a_gpu_mode_at_submit(slurm_driver):
    with pytest.raises(DriverError, match="GPUMode"):
        slurm_driver.submit(JobSpec("/bin/true", gpus=1, gpu_mode="exclusive_process"))


def test_slurm_other_cluster_needs_slurmdbd(slurm_driver):
    """``partition@cluster`` is passed as ``-p partition -M cluster``; without slurmdbd (the
    CI Slurm) Slurm itself refuses -M, even for its own cluster: a clear submit error."""
    conf = Path(os.environ.get("SLURM_CONF") or "/tmp/gahp-slurm/slurm.conf")
    cluster = re.search(r"^ClusterName=(\S+)", conf.read_text(), re.M) if conf.exists() else None
    if cluster is None:
        pytest.skip("no ClusterName known")
    try:
        jid = slurm_driver.submit(JobSpec("/bin/true", queue=f"debug@{cluster.group(1)}"))
    except DriverError as exc:
        assert "sbatch" in str(exc)
        return
    assert jid.endswith("@" + cluster.group(1))  # with slurmdbd: the job is that cluster's
    wait_status(slurm_driver, jid, *DONE, timeout=120)


# ---------------------------------------------------------------------- OpenPBS
def _qstat(driver: Driver, native_id: str) -> str:
    return driver._run("qstat", "-x", "-f", native_id).stdout  # type: ignore[attr-defined]


def _pbs_gpus(driver: Driver) -> int:
    nodes = driver._run("pbsnodes", "-a").stdout  # type: ignore[attr-defined]
    m = re.search(r"resources_available\.ngpus = (\d+)", nodes)
    return int(m.group(1)) if m else 0


def test_openpbs_job_gets_two_gpus_and_the_node(openpbs_driver):
    if _pbs_gpus(openpbs_driver) < 2:
        pytest.skip("this OpenPBS has no ngpus (run .ci/pbs-gpus.sh)")
    jid = openpbs_driver.submit(JobSpec("/bin/true", gpus=2, whole_nodes=True))
    info = wait_status(openpbs_driver, jid, *DONE, timeout=180)
    assert info.status is JobStatus.COMPLETED, info
    qstat = _qstat(openpbs_driver, jid)
    assert "Resource_List.select = 1:ncpus=1:ngpus=2" in qstat, qstat
    assert "Resource_List.place = excl" in qstat
    assert re.search(r"exec_vnode = \(\w+:ncpus=1:ngpus=2\)", qstat), qstat


def test_openpbs_extra_submit_arguments_arrive(openpbs_driver):
    jid = openpbs_driver.submit(JobSpec("/bin/true", extra_args=("-A", "extra_acct", "-p", "7")))
    qstat = _qstat(openpbs_driver, jid)
    assert "Account_Name = extra_acct" in qstat and "Priority = 7" in qstat, qstat
    wait_status(openpbs_driver, jid, *DONE, timeout=180)


def test_openpbs_refuses_a_gpu_model_at_submit(openpbs_driver):
    with pytest.raises(DriverError, match="GPUModel"):
        openpbs_driver.submit(JobSpec("/bin/true", gpus=1, gpu_model="a100"))


# ---------------------------------------------------------------------- Grid Engine
def _sge_has_gpus(driver: Driver) -> bool:
    complexes = driver._run("qconf", "-sc").stdout  # type: ignore[attr-defined]
    return any(line.split()[:1] == ["gpu"] for line in complexes.splitlines())


def test_sge_job_gets_two_gpus_of_the_gpu_complex(sge_driver, tmp_path):
    """With the `gpu` consumable (.ci/sge-gpus.sh) the job holds 2 of them; without it, qsub
    refuses the job and the submit fails with its reason."""
    spec = JobSpec("/bin/sleep", ("20",), workdir=str(tmp_path), gpus=2)
    if not _sge_has_gpus(sge_driver):
        with pytest.raises(DriverError, match="qsub.*gpu"):
            sge_driver.submit(spec)
        return
    jid = sge_driver.submit(spec)
    wait_status(sge_driver, jid, JobStatus.RUNNING, timeout=120)
    shown = sge_driver._run("qstat", "-j", jid).stdout  # type: ignore[attr-defined]
    assert re.search(r"hard resource_list:.*\bgpu=2\b", shown), shown
    sge_driver.cancel(jid)


def test_sge_refuses_whole_nodes_at_submit(sge_driver):
    with pytest.raises(DriverError, match="WholeNodes"):
        sge_driver.submit(JobSpec("/bin/true", whole_nodes=True))


def test_sge_extra_submit_arguments_arrive(sge_driver, tmp_path):
    jid = sge_driver.submit(
        JobSpec("/bin/sleep", ("20",), workdir=str(tmp_path), extra_args=("-ac", "gahp=extra"))
    )
    shown = sge_driver._run("qstat", "-j", jid).stdout  # type: ignore[attr-defined]
    assert re.search(r"context:\s+gahp=extra", shown), shown
    sge_driver.cancel(jid)


# ---------------------------------------------------------------------- LSF (volclava)
def test_lsf_extra_arguments_arrive_and_whole_nodes_need_an_exclusive_queue(
    lsf_driver, lsf_job_dir
):
    work = lsf_mkdir(lsf_job_dir / "x")
    spec = JobSpec("/bin/sleep", ("20",), workdir=str(work), extra_args=("-P", "extra_proj"))
    jid = lsf_driver.submit(spec)
    shown = lsf_driver._run("bjobs", "-l", jid).stdout  # type: ignore[attr-defined]
    assert "Project <extra_proj>" in re.sub(r"\n\s+", "", shown), shown
    lsf_driver.cancel(jid)
    # -x: a queue without EXCLUSIVE = Y (.ci/lsf-up.sh sets it) refuses the job at bsub
    queue = lsf_driver._run("bqueues", "-l").stdout  # type: ignore[attr-defined]
    spec = JobSpec("/bin/sleep", ("20",), workdir=str(work), whole_nodes=True)
    if "EXCLUSIVE" not in queue:
        with pytest.raises(DriverError, match="EXCLUSIVE"):
            lsf_driver.submit(spec)
        return
    jid = lsf_driver.submit(spec)
    shown = lsf_driver._run("bjobs", "-l", jid).stdout  # type: ignore[attr-defined]
    assert "Exclusive Execution" in re.sub(r"\n\s+", "", shown), shown
    lsf_driver.cancel(jid)


def test_lsf_gpus_on_volclava_fail_at_submit_with_bsubs_reason(lsf_driver, lsf_job_dir):
    if (
        "-gpu"
        in subprocess.run(
            [lsf_driver.command_path("bsub"), "-h"],
            capture_output=True,
            text=True,
            env=lsf_driver.env,
        ).stderr
    ):  # type: ignore[attr-defined]
        pytest.skip("this LSF has bsub -gpu")
    with pytest.raises(DriverError, match="bsub"):
        lsf_driver.submit(JobSpec("/bin/true", workdir=str(lsf_job_dir), gpus=1))
