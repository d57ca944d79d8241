"""`request_gpus`, `batch_extra_submit_args` and whole-node requests (`+WholeNodes`, as an
HTCondor-CE route sets it from `WantWholeNode`) under the real gridmanager of HTCondor 25.0,
through blahpd to the real Slurm (two stand-in GPUs, .ci/slurm-up.sh) and OpenPBS (ngpus,
.ci/pbs-gpus.sh): what the gridmanager sent, and the batch system's view of each job."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from htcondor_kit import DONE, HELD, HTCondor

VERSION = "25.0.13"
DEADLINE_S = 300.0
GPU_JOB = (
    "executable = /bin/sh\narguments = \"-c 'echo $CUDA_VISIBLE_DEVICES'\"\n"
    "request_gpus = 2\n+WholeNodes = true\n"
)


def _description(system: str, body: str) -> str:
    return (
        f"universe = grid\ngrid_resource = batch {system}\nshould_transfer_files = NO\n"
        f"{body}output = job.out\nerror = job.err\nlog = job.log\nqueue\n"
    )


JOBS = {
    "slurm": _description(
        "slurm", GPU_JOB + 'batch_extra_submit_args = --comment="via htcondor" --nice=5\n'
    ),
    "pbs": _description("pbs", GPU_JOB + "batch_extra_submit_args = -A htc_account\n"),
    "pbs-model": _description(
        "pbs", 'executable = /bin/true\nrequest_gpus = 1\n+GPUModel = "a100"\n'
    ),
}


@pytest.fixture(scope="module")
def runs(need_htcondor, batch_env, jobdirs) -> Iterator[dict[str, tuple[HTCondor, Any, int]]]:
    condor = need_htcondor(VERSION)
    envs = {"slurm": batch_env("slurm"), "pbs": batch_env("pbs")}
    assert all(envs.values())
    started: dict[str, tuple[HTCondor, Any, int]] = {}
    for name, text in JOBS.items():
        d = jobdirs(condor, f"attrs-{name}")
        started[name] = (condor, d, condor.submit(d, text))
    end = time.monotonic() + DEADLINE_S
    clusters = [c for _, _, c in started.values()]
    while time.monotonic() < end:
        ads = condor.ads(clusters)
        if all(a.get("JobStatus") in (DONE, HELD) for a in ads.values()) and len(ads) == 3:
            break
        time.sleep(2)
    yield started
    condor.remove(clusters)


def _ad(run: tuple[HTCondor, Any, int]) -> dict[str, Any]:
    condor, _, cluster = run
    return condor.ads([cluster]).get((cluster, 0), {})


def _submit_line(condor: HTCondor, *needles: str) -> str:
    """The last BLAH_JOB_SUBMIT the gridmanager sent that has every needle (its escaped
    spaces unescaped)."""
    lines = [line.replace("\\ ", " ") for line in condor.gahp_lines("BLAH_JOB_SUBMIT")]
    lines = [line for line in lines if all(n in line for n in needles)]
    assert lines, f"no BLAH_JOB_SUBMIT with {needles} in the GridmanagerLog"
    return lines[-1]


def test_slurm_job_gets_gpus_the_node_and_the_extra_arguments(runs, batch_env):
    env = batch_env("slurm")
    condor, d, _ = runs["slurm"]
    ad = _ad(runs["slurm"])
    assert ad.get("JobStatus") == DONE, ad.get("HoldReason", ad)
    sent = _submit_line(condor, d.name, "GPUNumber = 2", "--nice=5")
    assert "WholeNodes = true" in sent and "via htcondor" in sent, sent
    native = ad["GridJobId"].split()[-1].split("/")[-1]
    show = subprocess.run(
        ["scontrol", "show", "job", native], env=env, capture_output=True, text=True, timeout=30
    ).stdout
    assert "TresPerNode=gres:gpu:2" in show and "OverSubscribe=NO" in show, show
    assert "Comment=via htcondor" in show and "Nice=5" in show, show
    assert (d / "job.out").read_text().strip() == "0,1"


def test_openpbs_job_gets_gpus_the_node_and_the_extra_arguments(runs, batch_env):
    env = batch_env("pbs")
    condor, d, _ = runs["pbs"]
    ad = _ad(runs["pbs"])
    assert ad.get("JobStatus") == DONE, ad.get("HoldReason", ad)
    sent = _submit_line(condor, d.name, "GPUNumber = 2", "-A htc_account")
    assert "WholeNodes = true" in sent, sent
    native = ad["GridJobId"].split()[-1].split("/")[-1]
    qstat = subprocess.run(
        [f"{env['GAHP_PBS_BIN_DIR']}/qstat", "-x", "-f", native],
        env={"PBS_CONF_FILE": env["PBS_CONF_FILE"], "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "Resource_List.ngpus = 2" in qstat and "Resource_List.place = excl" in qstat, qstat
    assert "Account_Name = htc_account" in qstat
    assert re.search(r"exec_vnode = \(\w+:ncpus=1:ngpus=2\)", qstat), qstat


def test_a_refused_request_holds_the_job_with_the_reason(runs):
    ad = _ad(runs["pbs-model"])
    assert ad.get("JobStatus") == HELD, ad
    assert "GPUModel" in ad.get("HoldReason", ""), ad.get("HoldReason")
