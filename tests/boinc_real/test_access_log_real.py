"""No secret in a URL, on the REAL BOINC 8.3 server (`.ci/boinc-server-up.sh`): a whole job
life through boinc-gahp, blahpd's ``boinc`` driver and BoincClient (every download it offers),
then the project's Apache access log must not hold the authenticator.

Jobs of the three run concurrently on the one volunteer. Only the log lines written during the
test count; when the server is shared (GAHP_REQUIRE_BOINC_SERVER unset: other people may be
running older clients at the same time) only the lines naming this test's jobs or batches."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from test_blahpd_real import COMPLETED, ad
from test_gahp_real import submit_args

from gahp_boinc import Job, SyncBoincClient
from gahp_core.testing import GahpClient

GAHP = [sys.executable, "-m", "gahp_boinc"]
BLAHPD = [sys.executable, "-m", "gahp_blah"]


def test_the_authenticator_is_in_no_url_of_the_access_log(real_boinc, tmp_path: Path) -> None:
    if not os.access(real_boinc.access_log, os.R_OK):
        pytest.skip(f"cannot read {real_boinc.access_log}")
    start = real_boinc.access_log_size()
    tag = f"nosecret{int(time.time() * 1000) % 10**9}"
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text(f"no secret {tag[-6:]}\n")
    deadline = time.monotonic() + real_boinc.job_deadline

    # boinc-gahp: submit, query, lease, fetch, retire
    gahp = GahpClient([*GAHP, "--log", str(tmp_path / "gahp.log")])
    assert gahp.command("BOINC_SELECT_PROJECT", real_boinc.url, real_boinc.auth) == ["S"]
    gjob = f"{tag}_g#0"
    args = submit_args(f"{tag}_g", real_boinc.app, [(gjob, ["--cpu_time", "1"], [work / "in.txt"])])
    assert gahp.call("BOINC_SUBMIT", *args, timeout=300) == ["NULL"]
    assert gahp.call("BOINC_SET_LEASE", f"{tag}_g", str(int(time.time()) + 7200)) == ["NULL"]

    # blahpd's boinc driver: submit (its status and outputs are polled below)
    conf = real_boinc.blahpd_config(tmp_path)
    blah = GahpClient([*BLAHPD, "--config", str(conf), "--log", str(tmp_path / "blah.log")])
    res = blah.call(
        "BLAH_JOB_SUBMIT",
        ad(
            Cmd=f"{work}/{real_boinc.app}",
            Iwd=str(work),
            gridtype="boinc",
            Arguments="--cpu_time 1",
            In="in.txt",
            Out="blah_out.txt",
        ),
        timeout=300,
    )
    assert res[0] == "0", res
    blah_id = res[2]

    # BoincClient: submit, wait, fetch, then every download it offers
    cjob = f"{tag}_c#0"
    with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
        c.submit(
            f"{tag}_c",
            real_boinc.app,
            [Job(cjob, args=["--cpu_time", "1"], inputs=[work / "in.txt"])],
        )
        states = c.wait(
            [f"{tag}_c", f"{tag}_g"], interval=3, timeout=max(10.0, deadline - time.monotonic())
        )
        assert set(states.values()) == {"DONE"}, states
        out = tmp_path / "client"
        out.mkdir()
        c.fetch_output(cjob, out)
        c.get_output(cjob, 0, tmp_path / "c0")
        c.get_batch_outputs(f"{tag}_c", tmp_path / "c.zip")
        job = next(j for j in c.query_batch(f"{tag}_c").jobs if j.name == cjob)
        instance = next(i for i in c.query_job(job.id) if i.id == job.canonical_instance_id)
        c.get_instance_output(instance.name, 0, tmp_path / "c1")
        assert (tmp_path / "c0").read_text() == (work / "in.txt").read_text().upper()
        c.retire(f"{tag}_c")

    res = gahp.call("BOINC_FETCH_OUTPUT", gjob, str(tmp_path), "g.err", "ALL", "0", timeout=120)
    assert res[0] == "NULL", res
    assert gahp.call("BOINC_RETIRE_BATCH", f"{tag}_g") == ["NULL"]
    gahp.close()
    while True:
        res = blah.call("BLAH_JOB_STATUS", blah_id, timeout=120)
        if res[0] == "0" and int(res[2]) == COMPLETED:
            break
        assert time.monotonic() < deadline, f"blahpd job not done: {res}"
        time.sleep(3)
    assert (work / "blah_out.txt").read_text() == (work / "in.txt").read_text().upper()
    blah.close()

    lines = real_boinc.access_since(start)
    blah_job = blah_id.rsplit("/", 1)[-1]
    ours = [ln for ln in lines if tag in ln or blah_job in ln]
    assert sum("get_output" in ln for ln in lines) >= 5, lines
    checked = lines if os.environ.get("GAHP_REQUIRE_BOINC_SERVER") == "1" else ours
    leaked = [ln for ln in checked if real_boinc.auth in ln]
    assert not leaked, leaked
