"""`grid_resource = batch condor` under the real HTCondor 25.0 gridmanager: a submit-only
personal HTCondor (`.ci/htcondor-up.sh 25.0.13`) whose blahpd sends the job to the
one-machine HTCondor pool (`.ci/htcondor-pool-up.sh`, run first: htcondor-up.sh points
blahpd's condor driver at its collector). Arguments and environment with spaces and quotes,
stdin, output and error back, exit code 3 in condor_history; condor_rm of a running job
removes the pool's job. The GAHP lines and the pool's own view of the job are checked (and
printed: ``-s`` shows them)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import DONE, REMOVED, RUNNING, HTCondor, owned, user_log_events
from live_services import unavailable
from test_htcondor_batch import ARGS, ENV, EXPECTED_OUT, STDIN, condor_args, condor_env

VERSION = "25.0.13"
DEADLINE_S = 300.0


@dataclass
class Run:
    condor: HTCondor
    pool: dict[str, str]
    jobdir: Path
    clusters: dict[str, int] = field(default_factory=dict)
    ads: dict[str, dict[str, Any]] = field(default_factory=dict)
    grid_id: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def pool_history(self, blah_id: str) -> dict[str, Any]:
        """The pool's own view of the job ``condor/<date>/<cluster>.<proc>`` (its history)."""
        cluster, _, proc = blah_id.split("/")[-1].partition(".")
        proc_cmd = [
            str(Path(self.pool["GAHP_HTCONDOR_POOL_BIN"]) / "condor_history"),
            "-json",
            "-constraint",
            f"ClusterId == {cluster} && ProcId == {proc}",
        ]
        env = {"CONDOR_CONFIG": self.pool["CONDOR_CONFIG"], "PATH": "/usr/bin:/bin"}
        out = subprocess.run(proc_cmd, capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        ads = json.loads(out.stdout or "[]")
        assert ads, f"the pool has no history of {blah_id}"
        return ads[0]


def _description(body: str) -> str:
    return (
        "universe = grid\ngrid_resource = batch condor\nshould_transfer_files = NO\n"
        f"{body}\nqueue\n"
    )


@pytest.fixture(scope="module")
def run(need_htcondor, batch_env, jobdirs) -> Iterator[Run]:
    condor = need_htcondor(VERSION)
    pool = batch_env("condor")
    assert pool is not None
    toml = (condor.dir / "blahpd.toml").read_text()
    if "[driver.condor]" not in toml:
        unavailable(
            "GAHP_REQUIRE_HTCONDOR_POOL",
            f"{condor.dir}/blahpd.toml has no [driver.condor]: run .ci/htcondor-pool-up.sh "
            "before .ci/htcondor-up.sh",
        )
    r = Run(condor, pool, jobdirs(condor, "batch-condor"))
    owned(condor, r.jobdir / "in.txt", STDIN)
    r.clusters["a"] = condor.submit(
        r.jobdir,
        _description(
            f"executable = /bin/sh\narguments = {condor_args(ARGS)}\n"
            f"environment = {condor_env(ENV)}\n"
            "input = in.txt\noutput = a.out\nerror = a.err\nlog = a.log"
        ),
        "a.sub",
    )
    r.clusters["rm"] = condor.submit(
        r.jobdir,
        _description(
            "executable = /bin/sleep\narguments = 600\noutput = rm.out\nerror = rm.err\n"
            "log = rm.log"
        ),
        "rm.sub",
    )
    finished: set[str] = set()
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end and finished != set(r.clusters):
        ads = condor.ads(r.clusters.values())
        history = condor.in_history(r.clusters.values())
        for key, cluster in r.clusters.items():
            ad = ads.get((cluster, 0))
            if ad is None or key in finished:
                continue
            r.ads[key] = ad
            if ad.get("GridJobId"):
                r.grid_id[key] = ad["GridJobId"]
            status = ad.get("JobStatus")
            if key == "rm" and status == RUNNING and "rm-sent" not in r.grid_id:
                r.grid_id["rm-sent"] = "1"
                condor.tool("condor_rm", str(cluster))
            elif status in (DONE, REMOVED) and (cluster, 0) in history:
                finished.add(key)
            elif status == 5:
                r.problems.append(f"{key} held: {ad.get('HoldReason')}")
                finished.add(key)
        time.sleep(1)
    yield r
    condor.remove(r.clusters.values())


def test_batch_condor_job_completes_with_its_exit_code(run: Run) -> None:
    assert not run.problems, run.problems
    ad = run.ads["a"]
    assert ad["JobStatus"] == DONE and ad.get("ExitCode") == 3, ad
    assert (run.jobdir / "a.out").read_text() == EXPECTED_OUT
    assert (run.jobdir / "a.err").read_text() == "to-stderr\n"
    assert "return value 3" in (run.jobdir / "a.log").read_text()
    blah_id = ad["GridJobId"].split()[-1]
    assert blah_id.startswith("condor/"), ad["GridJobId"]
    # the gridmanager's log escapes the spaces of a request: "gridtype\ =\ "condor""
    submit = run.condor.gahp_lines("<- 'BLAH_JOB_SUBMIT ", 'gridtype\\ =\\ "condor"', '"a.out"')
    assert submit, "no BLAH_JOB_SUBMIT of batch condor in the GridmanagerLog"
    replies = run.condor.gahp_lines(f"'{blah_id}'", "No error")
    statuses = run.condor.gahp_lines("BLAH_JOB_STATUS", blah_id)
    results = run.condor.gahp_lines("ExitCode = 3", f'BatchJobId = "{blah_id.split("/")[-1]}"')
    assert replies and results, (replies, results)
    pool = run.pool_history(blah_id)
    assert (pool["JobStatus"], pool["ExitCode"], pool["Owner"]) == (4, 3, run.condor.owner)
    assert pool["Iwd"] == str(run.jobdir) and pool["Cmd"] == "/bin/sh"
    print("\n".join([submit[-1], replies[0], *statuses[-1:], results[-1]]))
    keys = ("ClusterId", "ProcId", "Owner", "JobStatus", "ExitCode", "Cmd", "Iwd", "Arguments")
    print("pool:", {k: pool.get(k) for k in (*keys, "Environment", "LastRemoteHost")})


def test_condor_rm_removes_the_pool_job(run: Run) -> None:
    assert not run.problems, run.problems
    ad = run.ads["rm"]
    assert ad["JobStatus"] == REMOVED, ad
    blah_id = run.grid_id["rm"].split()[-1]
    cancel = run.condor.gahp_lines("<- 'BLAH_JOB_CANCEL ", blah_id)
    assert cancel, "the gridmanager sent no BLAH_JOB_CANCEL"
    pool = run.pool_history(blah_id)
    assert pool["JobStatus"] == 3 and "BLAH_JOB_CANCEL" in pool.get("RemoveReason", ""), pool
    assert 9 in user_log_events(run.jobdir / "rm.log")
