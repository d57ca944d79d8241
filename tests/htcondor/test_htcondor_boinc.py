"""`grid_resource = boinc <url>` (HTCondor 9.12's BOINC grid type) through boinc-gahp, driven
by the real gridmanager, against the project emulator: a `queue N` sharing an input file with
remapped outputs; a job the BOINC side fails; condor_rm of a running job."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import (
    DONE,
    HELD,
    REMOVED,
    RUNNING,
    Emulator,
    HTCondor,
    owned,
    user_log_events,
)

VERSION = "9.12.0"
N = 4
DEADLINE_S = 180.0


@dataclass
class Runs:
    """The three submits and their final ads."""

    condor: HTCondor
    jobdir: Path
    clusters: dict[str, int] = field(default_factory=dict)
    ads: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    removed_name: str = ""


def _desc(url: str, body: str, n: int = 1) -> str:
    return (
        f"universe = grid\ngrid_resource = boinc {url}\n"
        f"boinc_authenticator_file = auth\n{body}\nqueue {n}\n"
    )


@pytest.fixture(scope="module")
def runs(htcondors, emulator: Emulator, jobdirs) -> Iterator[Runs | None]:
    condor = htcondors[VERSION][0]
    if condor is None:
        yield None
        return
    d = jobdirs(condor, "boinc")
    owned(condor, d / "auth", emulator.authenticator + "\n")
    owned(condor, d / "in2", "shared-input\n")
    owned(condor, d / "in", "worker input\n")
    (d / "res").mkdir()
    os.chown(d / "res", condor.uid, condor.gid)
    for i in range(N):
        (d / f"p{i}").mkdir()
        os.chown(d / f"p{i}", condor.uid, condor.gid)
        owned(condor, d / f"p{i}" / "in1", f"job-{i}\n")
    r = Runs(condor, d)
    r.clusters["concat"] = condor.submit(
        d,
        _desc(
            emulator.url,
            (
                "executable = concat\narguments = --label $(Process)\n"
                "transfer_input_files = p$(Process)/in1, in2\n"
                "transfer_output_files = out1, out2\n"
                'transfer_output_remaps = "out1 = res/first.$(Process)"\n'
                "output = job.$(Process).out\nerror = job.$(Process).err\nlog = concat.log"
            ),
            N,
        ),
        "concat.sub",
    )
    r.clusters["fail"] = condor.submit(
        d,
        _desc(
            emulator.url,
            (
                "executable = fail\narguments = --exit-code 7\ntransfer_input_files = in\n"
                "output = fail.out\nerror = fail.err\nlog = fail.log"
            ),
        ),
        "fail.sub",
    )
    r.clusters["rm"] = condor.submit(
        d,
        _desc(
            emulator.url,
            (
                "executable = worker\narguments = --cpu_time 40\ntransfer_input_files = in\n"
                "output = rm.out\nerror = rm.err\nlog = rm.log"
            ),
        ),
        "rm.sub",
    )
    end = time.monotonic() + DEADLINE_S
    removed = False
    while time.monotonic() < end:
        ads = condor.ads(r.clusters.values())
        history = condor.in_history(r.clusters.values())
        r.ads = {**ads, **{k: {**v, "__history": True} for k, v in history.items()}}
        rm = r.ads.get((r.clusters["rm"], 0), {})
        if not removed and rm.get("JobStatus") == RUNNING:
            r.removed_name = rm.get("GridJobId", "").split()[-1]
            condor.tool("condor_rm", str(r.clusters["rm"]))
            removed = True
        concat_done = all(
            r.ads.get((r.clusters["concat"], i), {}).get("__history")
            or r.ads.get((r.clusters["concat"], i), {}).get("JobStatus") == HELD
            for i in range(N)
        )
        fail_done = r.ads.get((r.clusters["fail"], 0), {}).get("JobStatus") in (HELD, DONE)
        if concat_done and fail_done and (rm.get("__history") or rm.get("JobStatus") == HELD):
            break
        time.sleep(1)
    yield r
    condor.remove(r.clusters.values())


def _need(need_htcondor, runs: Runs | None) -> Runs:
    need_htcondor(VERSION)
    assert runs is not None
    return runs


def test_queue_n_sharing_inputs_with_remapped_outputs(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    for i in range(N):
        ad = r.ads.get((r.clusters["concat"], i), {})
        assert ad.get("JobStatus") == DONE, (i, ad.get("JobStatus"), ad.get("HoldReason"))
        assert (r.jobdir / "res" / f"first.{i}").read_text() == f"job-{i}\nshared-input\n"
        assert (r.jobdir / "out2").exists()
        assert (r.jobdir / f"job.{i}.err").exists()
    assert (r.jobdir / "out2").read_text().startswith("shared-input\njob-")
    events = user_log_events(r.jobdir / "concat.log")
    assert events.count(5) == N, events
    submits = r.condor.gahp_lines("<- 'BOINC_SUBMIT ", "concat")
    assert submits, "no BOINC_SUBMIT"
    assert f" concat {N} " in submits[-1], "the N jobs were not one batch"


def test_job_failed_by_boinc_is_held(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    ad = r.ads.get((r.clusters["fail"], 0), {})
    assert ad.get("JobStatus") == HELD, ad
    # 9.12 holds every BOINC ERROR job with this fixed text, without fetching anything
    assert "check the server" in ad.get("HoldReason", ""), ad
    assert 12 in user_log_events(r.jobdir / "fail.log")


def test_condor_rm_aborts_the_boinc_job(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    assert r.removed_name, "the job never ran"
    ad = r.ads.get((r.clusters["rm"], 0), {})
    assert ad.get("JobStatus") == REMOVED and ad.get("__history"), ad
    aborts = r.condor.gahp_lines("<- 'BOINC_ABORT_JOBS ", r.removed_name)
    assert aborts, f"no BOINC_ABORT_JOBS for {r.removed_name}"
    gahp = aborts[-1].split("GAHP[", 1)[1].split("]", 1)[0]
    reqid = aborts[-1].split("BOINC_ABORT_JOBS ", 1)[1].split()[0]
    assert r.condor.gahp_lines(f"GAHP[{gahp}] -> '{reqid}' 'NULL'"), "abort failed"
    assert 9 in user_log_events(r.jobdir / "rm.log")
