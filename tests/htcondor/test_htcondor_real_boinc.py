"""The whole chain, real at every link: condor_submit -> HTCondor's gridmanager -> our GAHP
-> the real BOINC 8.3 project -> its volunteer -> the outputs in the job's directory ->
condor_history. One grid type `boinc` job on 9.12 (boinc-gahp) and one `batch boinc` job on
25.0 (blahpd's boinc driver, the project named by the job's +remote_ attributes).

Needs the HTCondors of `.ci/htcondor-up.sh` and the project of `.ci/boinc-server-up.sh`;
skips without them, fails when GAHP_REQUIRE_HTCONDOR / GAHP_REQUIRE_BOINC_SERVER is 1."""

from __future__ import annotations

import os
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import DONE, HELD, HTCondor, owned
from live_services import unavailable

DEADLINE_S = float(os.environ.get("GAHP_BOINC_JOB_DEADLINE", "300"))
INPUT = "real chain\n"  # under 30 characters: the worker app's --early_exit stays off


def real_project() -> tuple[str, str]:
    """(URL, submitter's authenticator) of the live project, else skip (or fail in CI)."""
    env = Path(os.environ.get("GAHP_BOINC_DIR", "/tmp/gahp-boinc-server")) / "env"
    settings = {}
    if env.exists():
        for line in env.read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            settings[name] = value.strip()
    reason = f"no real BOINC server ({env}; start it with `bash .ci/boinc-server-up.sh`)"
    url, auth = settings.get("GAHP_BOINC_PROJECT_URL"), settings.get("GAHP_BOINC_AUTH")
    if url and auth:
        data = urllib.parse.urlencode({"request": "<ping> </ping>"}).encode()
        try:
            with urllib.request.urlopen(url + "submit_rpc_handler.php", data, 10) as resp:
                if b"<success>1</success>" in resp.read():
                    return url, auth
            reason = f"the real BOINC project {url} does not answer ping with success"
        except OSError as exc:
            reason = f"the real BOINC project {url} does not answer ({exc})"
    unavailable("GAHP_REQUIRE_BOINC_SERVER", reason)


@pytest.fixture(scope="module")
def chains(need_htcondor, jobdirs) -> Iterator[dict[str, tuple[HTCondor, Path, int]]]:
    url, auth = real_project()
    runs: dict[str, tuple[HTCondor, Path, int]] = {}
    for version, grid in (("9.12.0", "boinc"), ("25.0.13", "batch boinc")):
        condor = need_htcondor(version)
        d = jobdirs(condor, "real-boinc")
        owned(condor, d / "project.auth", auth + "\n").chmod(0o600)
        owned(condor, d / "in", INPUT)
        common = (
            "executable = worker\narguments = --cpu_time 1\ntransfer_output_files = out\n"
            "error = job.err\nlog = job.log\n"
        )
        if grid == "boinc":
            text = (
                f"universe = grid\ngrid_resource = boinc {url}\n"
                f"boinc_authenticator_file = {d / 'project.auth'}\n{common}"
                "transfer_input_files = in\n"
                'transfer_output_remaps = "out = result.txt"\noutput = job.out\nqueue\n'
            )
        else:
            text = (
                f"universe = grid\ngrid_resource = batch boinc\n{common}"
                "transfer_executable = false\ninput = in\noutput = result.txt\n"
                f'+remote_BoincProjectUrl = "{url}"\n'
                f'+remote_BoincAuthenticatorFile = "{d / "project.auth"}"\nqueue\n'
            )
        runs[version] = (condor, d, condor.submit(d, text))
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end and not all(
        _final(condor, cluster) for condor, _, cluster in runs.values()
    ):
        time.sleep(2)
    yield runs
    for condor, _, cluster in runs.values():
        condor.tool("condor_rm", str(cluster))


def _final(condor: HTCondor, cluster: int) -> dict[str, Any] | None:
    ad = condor.ads([cluster]).get((cluster, 0), {})
    return ad if ad.get("JobStatus") in (DONE, HELD) else None


@pytest.mark.parametrize("version", ["9.12.0", "25.0.13"])
def test_a_job_runs_on_the_real_volunteer_and_completes(chains, version):
    condor, d, cluster = chains[version]
    ad = _final(condor, cluster)
    assert ad is not None, f"not finished within {DEADLINE_S:.0f} s"
    assert ad["JobStatus"] == DONE, ad.get("HoldReason")
    deadline = time.monotonic() + 60  # a completed job reaches the history file soon after
    while (cluster, 0) not in (found := condor.in_history([cluster])):
        assert time.monotonic() < deadline, "completed, but not in condor_history after 60 s"
        time.sleep(1)
    history = found[(cluster, 0)]
    assert history["JobStatus"] == DONE and history.get("ExitCode") == 0, history
    assert (d / "result.txt").read_text() == INPUT.upper()
    assert (d / "job.err").exists()
