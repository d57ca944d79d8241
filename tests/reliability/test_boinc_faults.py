"""Fault injection between boinc-gahp and the BOINC project emulator.

Every request gets exactly one result with a clear message; idempotent RPCs are retried
with backoff (honouring Retry-After); a retried BOINC_SUBMIT never leaves a second batch of
the same name; an interrupted download never replaces or litters the destination; an
emulator restarted on the same port and state is picked up by retries.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from relkit import BOINC_GAHP, select, submit_args, wait_done

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient


def batches_named(srv: EmulatorServer, name: str) -> list[dict[str, str]]:
    """The emulator's batches of that name, read over its query_batches RPC."""
    body = (
        f"<query_batches>\n<authenticator>{srv.authenticator}</authenticator>\n</query_batches>\n"
    )
    r = httpx.post(srv.url + "submit_rpc_handler.php", files={"request": (None, body)})
    import xmltodict

    doc = xmltodict.parse(r.content, force_list=("batch",))["query_batches"] or {}
    return [b for b in doc.get("batch", []) if (b.get("name") or "") == name]


def test_503_retry_after_is_honoured(gahp: GahpClient, emulator: EmulatorServer) -> None:
    select(gahp, emulator)
    emulator.inject_fault("http503", count=2, rpc="ping", seconds=1)
    start = time.monotonic()
    assert gahp.call("BOINC_PING", timeout=60) == ["NULL"]
    assert time.monotonic() - start >= 2.0  # two waits of at least Retry-After: 1
    assert emulator.stats["ping"] == 3


@pytest.mark.parametrize("kind", ["truncated", "reset", "reset_after", "http503"])
def test_idempotent_rpc_survives_transient_faults(
    gahp: GahpClient, emulator: EmulatorServer, kind: str
) -> None:
    select(gahp, emulator)
    emulator.inject_fault(kind, count=2, rpc="query_batches" if kind == "x" else "ping")
    assert gahp.call("BOINC_PING", timeout=60) == ["NULL"]
    assert emulator.faults.fired[kind] == 2


def test_slow_reply_past_the_timeout_is_retried(emulator: EmulatorServer) -> None:
    with GahpClient([*BOINC_GAHP, "--timeout", "1", "--retries", "2"]) as c:
        select(c, emulator)
        emulator.inject_fault("delay", count=1, rpc="retire_batch", seconds=2.5)
        res = c.call("BOINC_RETIRE_BATCH", "nope", timeout=60)
        # the retry reached the server: its own answer, not a timeout
        assert len(res) == 1 and "no such batch" in res[0], res
        emulator.inject_fault("delay", count=5, rpc="retire_batch", seconds=2.5)
        res = c.call("BOINC_RETIRE_BATCH", "nope", timeout=60)
        assert len(res) == 1 and "retire_batch: no reply from" in res[0] and "in time" in res[0]


@pytest.mark.parametrize("kind", ["http500", "malformed_xml", "maintenance"])
def test_permanent_faults_are_one_clear_error(
    gahp: GahpClient, emulator: EmulatorServer, kind: str
) -> None:
    select(gahp, emulator)
    emulator.inject_fault(kind, count=1, rpc="query_batch2")
    res = gahp.call("BOINC_QUERY_BATCHES", "0", "1", "b", timeout=60)
    assert len(res) == 1 and res[0] != "NULL", res
    want = {
        "http500": ("HTTP 500",),
        "malformed_xml": ("malformed reply", "unreadable"),
        "maintenance": ("project down for maintenance",),
    }[kind]
    assert res[0].startswith("query_batch2") or kind == "maintenance", res
    assert any(w in res[0] for w in want), res
    assert emulator.stats["query_batch2"] == 1  # not retried: the server did answer


def test_lost_create_batch_reply_makes_no_duplicate(
    gahp: GahpClient, emulator: EmulatorServer, input_file: Path
) -> None:
    select(gahp, emulator)
    emulator.inject_fault("reset_after", count=1, rpc="create_batch")
    res = gahp.call("BOINC_SUBMIT", *submit_args("lost", "uppercase", [("lost#0", input_file)]))
    assert res == ["NULL"]
    assert emulator.faults.fired["reset_after"] == 1
    assert len(batches_named(emulator, "lost")) == 1
    assert wait_done(gahp, "lost", 1) == {"lost#0": "DONE"}


@pytest.mark.parametrize("kind", ["reset", "reset_after", "truncated", "http500"])
def test_failed_upload_then_resubmit_makes_no_duplicate(
    gahp: GahpClient, emulator: EmulatorServer, input_file: Path, kind: str
) -> None:
    """upload_files is not idempotent: one error result; the resubmission reuses the batch."""
    select(gahp, emulator)
    emulator.inject_fault(kind, count=1, rpc="upload_files")
    args = submit_args("up", "uppercase", [("up#0", input_file)])
    res = gahp.call("BOINC_SUBMIT", *args)
    assert len(res) == 1 and "uploading files" in res[0], res
    assert emulator.stats["upload_files"] == 1
    assert gahp.call("BOINC_SUBMIT", *args) == ["NULL"]
    found = batches_named(emulator, "up")
    assert len(found) == 1, found
    assert wait_done(gahp, "up", 1) == {"up#0": "DONE"}


@pytest.mark.parametrize("kind", ["truncated", "reset", "reset_after", "http500"])
def test_interrupted_download_leaves_destination_untouched(
    gahp: GahpClient, emulator: EmulatorServer, input_file: Path, tmp_path: Path, kind: str
) -> None:
    select(gahp, emulator)
    assert gahp.call("BOINC_SUBMIT", *submit_args("dl", "uppercase", [("dl#0", input_file)])) == [
        "NULL"
    ]
    wait_done(gahp, "dl", 1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.txt").write_text("precious\n")
    emulator.inject_fault(kind, count=1, rpc="get_output2")
    res = gahp.call(
        "BOINC_FETCH_OUTPUT", "dl#0", str(out), "err.txt", "ALL", "1", "out", "result.txt"
    )
    assert len(res) == 1 and "get_output" in res[0], res
    assert (out / "result.txt").read_text() == "precious\n"
    assert sorted(p.name for p in out.iterdir()) == ["err.txt", "result.txt"]
    res = gahp.call(
        "BOINC_FETCH_OUTPUT", "dl#0", str(out), "err.txt", "ALL", "1", "out", "result.txt"
    )
    assert res[0] == "NULL" and (out / "result.txt").read_text() == "ALPHA\n"


def test_emulator_restart_mid_batch_same_port(tmp_path: Path, input_file: Path) -> None:
    """Stop the project while jobs run; a new server on the same port and state resumes."""
    state = tmp_path / "emu"
    srv = EmulatorServer(state_dir=state, job_delay=0.3, volunteers=1, inline_apps=True).start()
    port, auth = srv.port, srv.authenticator
    with GahpClient([*BOINC_GAHP, "--timeout", "3", "--retries", "6"]) as c:
        select(c, srv)
        jobs = [(f"rs#{i}", input_file) for i in range(4)]
        assert c.call("BOINC_SUBMIT", *submit_args("rs", "uppercase", jobs)) == ["NULL"]
        srv.stop()
        rid = c.reqid()
        assert c.command("BOINC_QUERY_BATCHES", rid, "0", "1", "rs") == ["S"]
        time.sleep(1.0)  # the query is failing and retrying with backoff now
        srv2 = EmulatorServer(
            state_dir=state, port=port, job_delay=0.05, volunteers=2, inline_apps=True
        ).start()
        try:
            assert srv2.port == port and srv2.authenticator == auth
            res = c.wait_results([rid], timeout=60)[rid]
            assert res[0] == "NULL" and res[2] == "4", res
            assert wait_done(c, "rs", 4) == {name: "DONE" for name, _ in jobs}
            out = tmp_path / "out"
            out.mkdir()
            res = c.call("BOINC_FETCH_OUTPUT", "rs#3", str(out), "e", "ALL", "0")
            assert res[0] == "NULL" and (out / "out").read_text() == "ALPHA\n"
            assert len(batches_named(srv2, "rs")) == 1
        finally:
            srv2.stop()


def test_concurrent_submissions_sharing_files_upload_once(
    gahp: GahpClient, emulator: EmulatorServer, input_file: Path
) -> None:
    """Pipelined BOINC_SUBMITs with a common input: no double upload (a server HTTP 500)."""
    select(gahp, emulator)
    rids = []
    for b in range(6):
        rid = gahp.reqid()
        args = submit_args(f"c{b}", "uppercase", [(f"c{b}#0", input_file)])
        assert gahp.command("BOINC_SUBMIT", rid, *args) == ["S"]
        rids.append(rid)
    got = gahp.wait_results(rids, timeout=60)
    assert all(got[r] == ["NULL"] for r in rids), got
    assert emulator.stats["upload_files"] == 1


def test_fault_sweep_loses_no_result(
    emulator: EmulatorServer, input_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every fault kind on every RPC of a pipelined mix: one result per request, always."""
    from gahp_boinc.emulator.faults import FAULT_KINDS

    out = tmp_path / "out"
    out.mkdir()
    with GahpClient([*BOINC_GAHP, "--timeout", "1", "--retries", "2"]) as c:
        select(c, emulator)
        assert c.call("BOINC_SUBMIT", *submit_args("fs", "uppercase", [("fs#0", input_file)])) == [
            "NULL"
        ]
        wait_done(c, "fs", 1)
        rpcs = [
            "ping",
            "query_batch2",
            "query_completed_job",
            "get_templates",
            "get_output",
            "create_batch",
            "query_files",
            "upload_files",
            "submit_batch",
            "abort_jobs",
            "set_expire_time",
            "retire_batch",
        ]
        issued = 0
        answered = 0
        for n, kind in enumerate(FAULT_KINDS):
            for rpc in rpcs:
                emulator.inject_fault(kind, count=1, rpc=rpc, seconds=1.5 if kind == "delay" else 1)
            in2 = tmp_path / f"in{n}.txt"
            in2.write_text(f"{kind}\n")
            reqs = [
                ("BOINC_PING",),
                ("BOINC_QUERY_BATCHES", "0", "1", "fs"),
                ("BOINC_FETCH_OUTPUT", "fs#0", str(out), "e", "ALL", "0"),
                ("BOINC_SUBMIT", *submit_args(f"k{n}", "uppercase", [(f"k{n}#0", in2)])),
                ("BOINC_SET_LEASE", "fs", str(int(time.time()) + 3600)),
                ("BOINC_ABORT_JOBS", "nosuch"),
            ]
            rids = []
            for cmd, *args in reqs:
                rid = c.reqid()
                assert c.command(cmd, rid, *args) == ["S"]
                rids.append(rid)
            issued += len(rids)
            got = c.wait_results(rids, timeout=120)
            answered += len(got)
            for r in rids:  # success fields, or exactly one error message
                assert got[r][0] == "NULL" or len(got[r]) == 1, got[r]
            emulator.clear_faults()
        fired = sum(emulator.faults.fired.values())
        assert answered == issued and c.results() == []
        assert c.command("COMMANDS")[0] == "S"
    with capsys.disabled():
        print(
            f"\nfault sweep: {fired} faults fired over {issued} requests, "
            f"{issued - answered} results lost"
        )
