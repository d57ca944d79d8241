"""A whole-node GPU pilot through the real HTCondor-CE 25.0.1: ``request_gpus`` and
``+WantWholeNode`` (which the CE's routes copy to ``WholeNodes``) reach the batch job on Slurm
(two stand-in GPUs, .ci/slurm-up.sh) and OpenPBS (ngpus, .ci/pbs-gpus.sh), as the job itself
and the GridmanagerLog see them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from ce_kit import CE, terminations, wait_until
from live_services import env_file

JOB_DEADLINE = 420.0
REPORT = r"""#!/bin/sh
echo "cvd:[$CUDA_VISIBLE_DEVICES]"
if [ -n "$SLURM_JOB_ID" ]; then
    scontrol show job "$SLURM_JOB_ID" | tr ' ' '\n' | grep -E '^(TresPerNode|OverSubscribe)='
fi
if [ -n "$PBS_JOBID" ]; then
    {pbs_bin}/qstat -f "$PBS_JOBID" | grep -E 'Resource_List\.(ngpus|place) '
fi
"""


def _submit(lrms: str) -> str:
    return f"""universe = vanilla
executable = report.sh
output = job.out
error = job.err
log = job.log
request_gpus = 2
+WantWholeNode = true
+GahpLrms = "{lrms}"
queue
"""


@pytest.fixture(scope="module")
def ce() -> CE:
    return CE.find()


@pytest.fixture(scope="module")
def jobs(ce: CE, batch_env) -> Iterator[dict[str, tuple[Path, int]]]:  # noqa: ANN001
    batch_env("slurm")
    pbs_bin = env_file(Path(os.environ.get("GAHP_PBS_DIR", "/tmp/gahp-pbs")) / "env").get(
        "GAHP_PBS_BIN_DIR", "/opt/pbs/bin"
    )
    lrms = ["slurm"] + (["pbs"] if "PBS_Cluster" in ce.routes else [])
    made: dict[str, tuple[Path, int]] = {}
    try:
        for x in lrms:
            d = ce.job_dir(f"gpus-{x}")
            ce.write(d, "report.sh", REPORT.replace("{pbs_bin}", pbs_bin), 0o755)
            made[x] = (d, ce.submit(d, _submit(x)))
        yield made
    finally:
        for _, cluster in made.values():
            ce.run(["condor_ce_rm", str(cluster)], check=False)


def _done(d: Path) -> str:
    wait_until(lambda: terminations(d / "job.log"), JOB_DEADLINE, f"the job in {d}", 2)
    return wait_until(
        lambda: (t := (d / "job.out").read_text(errors="replace")) and "cvd:" in t and t,
        60,
        f"{d}/job.out",
        1,
    )


def _sent(ce: CE, lrms: str) -> str:
    lines = [
        ln.replace("\\ ", " ")
        for ln in ce.gridmanager_lines(r"BLAH_JOB_SUBMIT .*GPUNumber")
        if f'gridtype\\ =\\ "{lrms}"' in ln
    ]
    assert lines, f"no BLAH_JOB_SUBMIT with GPUNumber for {lrms} in the GridmanagerLog"
    return lines[-1]


def test_slurm_pilot_gets_its_gpus_and_the_whole_node(ce: CE, jobs) -> None:  # noqa: ANN001
    d, _ = jobs["slurm"]
    out = _done(d)
    assert "cvd:[0,1]" in out, out
    assert "TresPerNode=gres:gpu:2" in out and "OverSubscribe=NO" in out, out
    sent = _sent(ce, "slurm")
    assert "GPUNumber = 2" in sent and "WholeNodes = true" in sent, sent


def test_openpbs_pilot_gets_its_gpus_and_the_whole_node(ce: CE, jobs) -> None:  # noqa: ANN001
    if "pbs" not in jobs:
        pytest.skip("the CE has no PBS route (start .ci/pbs-up.sh before the CE)")
    d, _ = jobs["pbs"]
    out = _done(d)
    assert "Resource_List.ngpus = 2" in out and "Resource_List.place = excl" in out, out
    sent = _sent(ce, "pbs")
    assert "GPUNumber = 2" in sent and "WholeNodes = true" in sent, sent
