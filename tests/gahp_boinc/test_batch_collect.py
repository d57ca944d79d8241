"""Outputs of batch-collect apps (moved to ``results/<batch>/`` by BOINC's batch-collect
assimilator, served by get_output3.php only) and gzipped outputs, through BoincClient and
boinc-gahp against the emulator: fetched transparently, as archives, and gunzipped."""

from __future__ import annotations

import gzip
import io
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gahp_boinc import Job, NoOutput, RpcError, SyncBoincClient
from gahp_boinc._rpc import gunzip_in_place  # private: unit test of the RPC layer
from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    with EmulatorServer(
        state_dir=tmp_path_factory.mktemp("emu"), job_delay=0.05, inline_apps=True
    ) as srv:
        yield srv


def _run(emu: EmulatorServer, tmp: Path, app: str, batch: str) -> SyncBoincClient:
    (tmp / "in.txt").write_text(f"hello {batch}\n")
    c = SyncBoincClient(emu.url, emu.authenticator)
    c.submit(batch, app, [Job(f"{batch}_0", inputs=[tmp / "in.txt"])])
    assert c.wait([batch], interval=0.1, timeout=30) == {f"{batch}_0": "DONE"}
    return c


def test_a_collected_output_is_fetched_transparently(emu, tmp_path):
    with _run(emu, tmp_path, "collect", "bc1") as c:
        assert (emu.project.store.results_dir).is_dir()
        assert c.get_output("bc1_0", 0, tmp_path / "out") == len("HELLO BC1\n")
        assert (tmp_path / "out").read_text() == "HELLO BC1\n"
        done = c.query_completed_job("bc1_0")
        c.get_collected_output(done.canonical_resultid, 0, tmp_path / "again")
        assert (tmp_path / "again").read_text() == "HELLO BC1\n"
        info = c.query_batch("bc1").batch
        c.get_batch_archive(info.id, tmp_path / "b.zip")
        with zipfile.ZipFile(tmp_path / "b.zip") as z:
            assert z.read("bc1_0__file_out") == b"HELLO BC1\n"
        c.get_batch_archive(info.id, tmp_path / "b.tar", fmt="tar")
        with tarfile.open(tmp_path / "b.tar") as t:
            member = t.extractfile("bc1_0__file_out")
            assert member is not None and member.read() == b"HELLO BC1\n"


def test_boinc_gahp_fetches_a_collected_output(emu, tmp_path):
    _run(emu, tmp_path, "collect", "bc2").close()
    gahp = GahpClient([sys.executable, "-m", "gahp_boinc"])
    try:
        assert gahp.command("BOINC_SELECT_PROJECT", emu.url, emu.authenticator) == ["S"]
        res = gahp.call("BOINC_FETCH_OUTPUT", "bc2_0", str(tmp_path), "err", "ALL", "0")
        assert res[0] == "NULL", res
        assert (tmp_path / "out").read_text() == "HELLO BC2\n"
    finally:
        gahp.close()


def test_a_missing_collected_output_is_an_error_not_an_empty_file(emu, tmp_path):
    with _run(emu, tmp_path, "collect", "bc3") as c:
        # the assimilator moves the output just after the job is DONE: wait for it to land
        deadline = time.monotonic() + 30
        while not (found := list(emu.project.store.results_dir.rglob("bc3_0__file_out"))):
            assert time.monotonic() < deadline, "the collected output never appeared"
            time.sleep(0.05)
        for f in found:
            f.unlink()
        with pytest.raises(NoOutput, match="no such file"):
            c.get_output("bc3_0", 0, tmp_path / "out")
        assert not (tmp_path / "out").exists()


def test_a_gzipped_output_is_gunzipped_on_request(emu, tmp_path):
    with _run(emu, tmp_path, "gzworker", "gz1") as c:
        c.get_output("gz1_0", 0, tmp_path / "raw")
        assert gzip.decompress((tmp_path / "raw").read_bytes()) == b"HELLO GZ1\n"
        c.get_output("gz1_0", 0, tmp_path / "plain", gunzip=True)
        assert (tmp_path / "plain").read_bytes() == b"HELLO GZ1\n"


def test_gunzip_is_bounded_and_reports_a_bad_file(tmp_path):
    bomb = tmp_path / "bomb"
    bomb.write_bytes(gzip.compress(bytes(200 << 20)))
    with pytest.raises(RpcError, match="inflates beyond"):
        gunzip_in_place(bomb, "bomb")
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x1f\x8b" + b"not gzip")
    with pytest.raises(RpcError, match="cannot be decompressed"):
        gunzip_in_place(bad, "bad")
    assert io.BytesIO(bomb.read_bytes()).read(2) == b"\x1f\x8b"  # left as it was


def test_a_job_name_get_output3_refuses_is_taken_from_the_batch_tar(emu, tmp_path):
    """HTCondor's job names hold '#', which get_output3.php's get_file refuses."""
    with _run(emu, tmp_path, "collect", "bc4#x") as c:
        c.get_output("bc4#x_0", 0, tmp_path / "out")
        assert (tmp_path / "out").read_text() == "HELLO BC4#X\n"


def test_submit_options_are_accepted_and_allocation_priority_needs_flops(emu, tmp_path):
    """Per-job priority, targets and templates, batch priority; allocation priority is
    refused, as by BOINC, when no FLOP estimate is given (the app's template is not read)."""
    from gahp_boinc import JobOptions, JobParams, RpcError

    (tmp_path / "in.txt").write_text("x\n")
    template = (
        "<input_template><file_info></file_info><workunit><file_ref><open_name>in</open_name>"
        "</file_ref><min_quorum>1</min_quorum><target_nresults>1</target_nresults>"
        "</workunit></input_template>"
    )
    opts = JobOptions(priority=3, target_host=1, input_template=template)
    with SyncBoincClient(emu.url, emu.authenticator) as c:
        job = Job("op_0", inputs=[tmp_path / "in.txt"], options=opts)
        c.submit("op", "uppercase", [job], params=JobParams(priority=5))
        assert c.wait(["op"], interval=0.1, timeout=30) == {"op_0": "DONE"}
        with pytest.raises(RpcError, match="no rsc_fpops_est given"):
            c.submit(
                "op2",
                "uppercase",
                [Job("op2_0", inputs=[tmp_path / "in.txt"])],
                params=JobParams(allocation_priority=True),
            )
        c.submit(
            "op3",
            "uppercase",
            [Job("op3_0", inputs=[tmp_path / "in.txt"])],
            params=JobParams(allocation_priority=True, rsc_fpops_est=1e10),
        )
    with pytest.raises(ValueError, match="root element"):
        JobOptions(input_template="<output_template/>")
