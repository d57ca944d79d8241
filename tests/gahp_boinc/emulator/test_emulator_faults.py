"""Fault injection and request statistics."""

from __future__ import annotations

import io
import time
import xml.etree.ElementTree as ET

import httpx
import pytest
from emu_helpers import Boinc, expected

from gahp_boinc.emulator import EmulatorServer
from gahp_boinc.emulator.faults import parse_fault_spec

PING = expected("ping")[1]


def batches(boinc: Boinc) -> int:
    return boinc.call("query_batches").text.count("<batch>")


def test_http500_only_for_the_named_rpc(server: EmulatorServer, boinc: Boinc) -> None:
    server.inject_fault("http500", count=2, rpc="create_batch")
    assert boinc.rpc("<ping/>").content == PING
    for _ in range(2):
        r = boinc.call("create_batch", "<app_name>worker</app_name>\n")
        assert r.status_code == 500
    assert batches(boinc) == 0  # not executed
    assert (
        b"<batch_id>1</batch_id>"
        in boinc.call("create_batch", "<app_name>worker</app_name>\n").content
    )
    assert server.faults.fired == {"http500": 2}


def test_http503_retry_after_and_maintenance(server: EmulatorServer, boinc: Boinc) -> None:
    server.inject_fault("http503", seconds=7)
    r = boinc.rpc("<ping/>")
    assert (r.status_code, r.headers["retry-after"]) == (503, "7")
    server.inject_fault("maintenance")
    r = boinc.rpc("<ping/>")
    assert r.status_code == 200
    assert "<error_num>-183</error_num>" in r.text
    assert "<error_msg>project down for maintenance</error_msg>" in r.text
    assert boinc.rpc("<ping/>").content == PING


def test_malformed_xml_after_executing(server: EmulatorServer, boinc: Boinc) -> None:
    server.inject_fault("malformed_xml", rpc="create_batch")
    r = boinc.call("create_batch", "<app_name>worker</app_name>\n")
    assert r.status_code == 200
    with pytest.raises(ET.ParseError):
        ET.fromstring(r.content)
    assert batches(boinc) == 1  # the lost-reply case: the batch exists


def test_truncated_body(server: EmulatorServer, boinc: Boinc) -> None:
    server.inject_fault("truncated", rpc="ping")
    with pytest.raises(httpx.RemoteProtocolError):
        boinc.rpc("<ping/>")
    assert boinc.rpc("<ping/>").content == PING


@pytest.mark.parametrize("kind", ["reset", "reset_after"])
def test_connection_reset(server: EmulatorServer, boinc: Boinc, kind: str) -> None:
    server.inject_fault(kind, rpc="create_batch")
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        boinc.call("create_batch", "<app_name>worker</app_name>\n")
    assert batches(boinc) == (1 if kind == "reset_after" else 0)


def test_delay_and_endpoint_filter(server: EmulatorServer, boinc: Boinc) -> None:
    server.inject_fault("delay", rpc="get_output.php", seconds=3)
    assert boinc.rpc("<ping/>").elapsed.total_seconds() < 3  # other endpoints: not delayed
    t0 = time.monotonic()
    r = boinc.output("nope")
    assert time.monotonic() - t0 >= 3
    assert r.text == "ERROR: no workunit nope"


def test_clear_faults_and_bad_kind(server: EmulatorServer, boinc: Boinc) -> None:
    server.inject_fault("http500", count=5)
    server.clear_faults()
    assert boinc.rpc("<ping/>").content == PING
    with pytest.raises(ValueError):
        server.inject_fault("explode")
    f = parse_fault_spec("http503,count=3,rpc=query_batch2,seconds=2")
    assert (f.kind, f.count, f.rpc, f.seconds) == ("http503", 3, "query_batch2", 2.0)
    with pytest.raises(ValueError):
        parse_fault_spec("http500,colour=red")


def test_stats_count_rpcs_and_upload_bytes(server: EmulatorServer, boinc: Boinc) -> None:
    boinc.rpc("<ping/>")
    boinc.rpc("<ping/>")
    boinc.stage(b"12345", b"abc")
    boinc.output("x")
    s = server.stats
    assert s["ping"] == 2
    assert s["upload_files"] == 1
    assert s["get_output"] == 1
    assert s["bytes_uploaded"] == 8
    assert s["requests"] == 4


def test_authenticators_never_logged(make_server) -> None:
    log = io.StringIO()
    srv = make_server(log=log)
    b = Boinc(srv)
    b.output("x")
    b.call("query_batches")
    b.close()
    text = log.getvalue()
    assert "get_output.php" in text
    assert srv.authenticator not in text
