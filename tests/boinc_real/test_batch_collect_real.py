"""Outputs of a batch-collect app and gzipped outputs on the REAL BOINC 8.3 server: the apps
`collect` (BOINC's batch_collect_assimilator moves outputs to results/<batch id>/) and
`gzworker` (<gzip_when_done/>) that `.ci/boinc-extra-apps.sh` adds. BoincClient, boinc-gahp
and blahpd's boinc driver fetch a collected output as they fetch any other; the batch's zip
and tar come from get_output3.php; a gzipped output is gunzipped on request."""

from __future__ import annotations

import gzip
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from test_blahpd_real import COMPLETED, ad
from test_gahp_real import submit_args

from gahp_boinc import Job, SyncBoincClient
from gahp_core.testing import GahpClient

GAHP = [sys.executable, "-m", "gahp_boinc"]
BLAHPD = [sys.executable, "-m", "gahp_blah"]


def test_collected_and_gzipped_outputs(real_boinc, tmp_path: Path) -> None:
    if not real_boinc.collect_app or not real_boinc.gzip_app:
        pytest.skip("the server has no batch-collect or gzip app (run .ci/boinc-server-up.sh)")
    tag = f"bc{int(time.time() * 1000) % 10**9}"
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text(f"collect {tag}\n")
    want = f"COLLECT {tag.upper()}\n"
    deadline = time.monotonic() + real_boinc.job_deadline

    gahp = GahpClient([*GAHP, "--log", str(tmp_path / "gahp.log")])
    assert gahp.command("BOINC_SELECT_PROJECT", real_boinc.url, real_boinc.auth) == ["S"]
    gjob = f"{tag}_g#0"
    args = submit_args(
        f"{tag}_g", real_boinc.collect_app, [(gjob, ["--cpu_time", "1"], [work / "in.txt"])]
    )
    assert gahp.call("BOINC_SUBMIT", *args, timeout=300) == ["NULL"]

    conf = real_boinc.blahpd_config(tmp_path)
    blah = GahpClient([*BLAHPD, "--config", str(conf), "--log", str(tmp_path / "blah.log")])
    res = blah.call(
        "BLAH_JOB_SUBMIT",
        ad(
            Cmd=f"{work}/{real_boinc.collect_app}",
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

    with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
        c.submit(
            f"{tag}_c",
            real_boinc.collect_app,
            [Job(f"{tag}_c0", args=["--cpu_time", "1"], inputs=[work / "in.txt"])],
        )
        c.submit(
            f"{tag}_z",
            real_boinc.gzip_app,
            [Job(f"{tag}_z0", args=["--cpu_time", "1"], inputs=[work / "in.txt"])],
        )
        states = c.wait(
            [f"{tag}_c", f"{tag}_z", f"{tag}_g"],
            interval=3,
            timeout=max(10.0, deadline - time.monotonic()),
        )
        assert set(states.values()) == {"DONE"}, states
        batch = c.query_batch(f"{tag}_c").batch
        moved = real_boinc.project_dir / "results" / str(batch.id) / f"{tag}_c0__file_out"
        while not moved.exists():  # the assimilator runs every few seconds
            assert time.monotonic() < deadline, f"{moved} never appeared"
            time.sleep(2)
        assert c.get_output(f"{tag}_c0", 0, tmp_path / "c0") == len(want)
        assert (tmp_path / "c0").read_text() == want
        c.get_batch_archive(batch.id, tmp_path / "c.zip")
        with zipfile.ZipFile(tmp_path / "c.zip") as z:
            assert z.read(f"{tag}_c0__file_out").decode() == want
        c.get_batch_archive(batch.id, tmp_path / "c.tar", fmt="tar")
        with tarfile.open(tmp_path / "c.tar") as t:
            member = t.extractfile(f"{tag}_c0__file_out")
            assert member is not None and member.read().decode() == want

        c.get_output(f"{tag}_z0", 0, tmp_path / "z-raw")
        assert gzip.decompress((tmp_path / "z-raw").read_bytes()).decode() == want
        c.get_output(f"{tag}_z0", 0, tmp_path / "z", gunzip=True)
        assert (tmp_path / "z").read_text() == want
        c.retire(f"{tag}_c")
        c.retire(f"{tag}_z")

    gbatch = real_boinc.one(f"SELECT id FROM batch WHERE name='{tag}_g'")["id"]
    gmoved = real_boinc.project_dir / "results" / gbatch
    while not any(gmoved.glob("*__file_out")):
        assert time.monotonic() < deadline, f"nothing in {gmoved}"
        time.sleep(2)
    res = gahp.call("BOINC_FETCH_OUTPUT", gjob, str(tmp_path), "g.err", "ALL", "0", timeout=120)
    assert res[0] == "NULL", res
    assert (tmp_path / "out").read_text() == want
    assert gahp.call("BOINC_RETIRE_BATCH", f"{tag}_g") == ["NULL"]
    gahp.close()

    while True:
        res = blah.call("BLAH_JOB_STATUS", blah_id, timeout=120)
        if res[0] == "0" and int(res[2]) == COMPLETED:
            break
        assert time.monotonic() < deadline, f"blahpd job not done: {res}"
        time.sleep(3)
    assert (work / "blah_out.txt").read_text() == want
    blah.close()
