"""The simulated volunteer: apps run as programs, DONE/ERROR, quorum, abort, expiry, restart."""

from __future__ import annotations

import hashlib
import io
import re
import time
import zipfile

import httpx
import pytest
from emu_helpers import Boinc, expected, phys_name

from gahp_boinc.emulator import EmulatorServer
from gahp_boinc.emulator.volunteer import split_command_line


def test_uppercase_and_fail_jobs(server: EmulatorServer, boinc: Boinc) -> None:
    boinc.run_batch("b", "uppercase", [("up", "--repeat 2", [b"abc\n"])])
    boinc.run_batch("f", "fail", [("bad", "--exit-code 7", [b"x"])])
    boinc.run_batch("u", "uppercase", [("upfail", "--fail", [b"y"])])
    assert server.wait_idle(20)
    assert boinc.statuses("b", "f", "u") == {"up": "DONE", "bad": "ERROR", "upfail": "ERROR"}
    assert boinc.output("up").content == b"ABC\nABC\n"
    # failed job: the stock server's PHP 8 crash (transcript 66: error_mask 8)
    r = boinc.call("query_completed_job", "<job_name>bad</job_name>\n")
    assert (r.status_code, r.content) == expected("query_completed_job_failed_http500")
    assert boinc.output("bad").content == b"ERROR: no canonical result for wu bad"
    details = boinc.call(
        "query_batch", "<batch_name>f</batch_name>\n<get_job_details>1</get_job_details>\n"
    ).text
    assert "   <error>too_many_total_results</error>\n" in details
    assert "            <exit_status>7</exit_status>\n" in details
    assert "<status>error</status>" in details


def test_completed_job_mode_full_reports_failed_instance(make_server) -> None:
    srv = make_server(completed_job_mode="full")
    b = Boinc(srv)
    b.run_batch("f", "fail", [("bad", "--exit-code 3", [b"x"])])
    assert srv.wait_idle(20)
    r = b.call("query_completed_job", "<job_name>bad</job_name>\n")
    assert r.status_code == 200
    assert "<exit_status>3</exit_status>" in r.text
    # as submit_rpc_handler.php: the failed instance instead of a canonical one
    assert re.search(r"<error_resultid>[1-9]\d*</error_resultid>", r.text), r.text
    assert "<canonical_resultid>" not in r.text
    assert "process exited with code 3" in r.text
    assert "fail: failing on purpose with exit code 3" in r.text
    b.close()


def test_stderr_is_html_escaped_in_cdata(server: EmulatorServer, boinc: Boinc) -> None:
    boinc.run_batch("b", "uppercase", [("j", "--repeat 1 &lt;a&amp;b&gt;", [b"q"])])
    assert server.wait_idle(20)
    text = boinc.call("query_completed_job", "<job_name>j</job_name>\n").text
    m = re.search(r"<stderr_out><!\[CDATA\[\n(.*)   \]\]></stderr_out>", text, re.S)
    assert m
    assert m.group(1) == (
        "\n&lt;core_client_version&gt;7.20.5&lt;/core_client_version&gt;\n&lt;![CDATA[\n"
        "&lt;stderr_txt&gt;\nuppercase: 1 bytes; args: --repeat 1 &lt;a&amp;b&gt;\n"
        "\n&lt;/stderr_txt&gt;\n]]&gt;\n"
    )


def test_two_inputs_two_outputs_and_zip(server: EmulatorServer, boinc: Boinc) -> None:
    boinc.run_batch("c", "concat", [("cat", "", [b"one ", b"two"])])
    boinc.run_batch("z", "zipper", [("zip", "", [b"zipped"])])
    assert server.wait_idle(20)
    assert boinc.output("cat", 0).content == b"one two"
    assert boinc.output("cat", 1).content == b"twoone "
    # as BOINC 8.3: no range check, download headers for a directory, then nothing
    with boinc.http.stream(
        "GET",
        boinc.url + "get_output.php",
        params={"cmd": "workunit_file", "auth_str": boinc.auth, "wu_name": "cat", "file_num": 2},
    ) as r:
        assert r.headers["content-disposition"] == "attachment; filename=d9"
        assert r.headers["content-length"] == "4096"
        with pytest.raises(httpx.RemoteProtocolError):
            r.read()
    with zipfile.ZipFile(io.BytesIO(boinc.output("zip").content)) as z:
        assert z.read("input.txt") == b"zipped"
        assert z.read("upper.txt") == b"ZIPPED"
    tmpl = boinc.call("get_templates", "<app_name>concat</app_name>\n").text
    assert tmpl.count("<file_info>\n    </file_info>") == 2
    assert re.findall(r"<open_name>(.*?)</open_name>", tmpl) == ["in1", "in2", "out1", "out2"]
    zt = boinc.call("get_templates", "<app_name>zipper</app_name>\n").text
    assert re.findall(r"<open_name>(.*?)</open_name>", zt) == ["in", "out.zip"]


def test_get_output_variants(server: EmulatorServer, boinc: Boinc) -> None:
    boinc.run_batch("c", "concat", [("cat", "", [b"a", b"b"])])
    assert server.wait_idle(20)
    get = boinc.http.get
    sig = hashlib.md5((boinc.auth + "cat_0").encode()).hexdigest()
    r = get(
        boinc.url + "get_output.php",
        params={"cmd": "result_file", "auth_str": sig, "result_name": "cat_0", "file_num": 1},
    )
    assert r.content == b"ba"
    r = get(
        boinc.url + "get_output.php",
        params={
            "cmd": "result_file",
            "auth_str": boinc.auth,
            "result_name": "cat_0",
            "file_num": 1,
        },
    )
    assert r.text == "ERROR: bad authenticator"
    assert boinc.output("nope").text == "ERROR: no workunit nope"
    r = get(
        boinc.url + "get_output2.php",
        params={"cmd": "file", "result_id": 1, "file_num": 0, "auth": boinc.auth},
    )
    assert r.content == b"ab"
    assert r.headers["content-disposition"] == "attachment; filename=cat_0__out1"
    r = get(
        boinc.url + "get_output2.php", params={"cmd": "workunit", "wu_id": 1, "auth": boinc.auth}
    )
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        assert z.read("cat_0__out2") == b"ba"


def test_quorum_two_runs_two_instances(make_server) -> None:
    srv = make_server(quorum=2)
    b = Boinc(srv)
    assert (
        "<min_quorum>2</min_quorum>"
        in b.call("get_templates", "<app_name>uppercase</app_name>\n").text
    )
    b.run_batch("q", "uppercase", [("j", "", [b"quorum"])])
    assert srv.wait_idle(20)
    assert b.statuses("q") == {"j": "DONE"}
    assert b.output("j").content == b"QUORUM"
    store = srv.store
    assert store is not None
    rows = store.all("SELECT name, outcome FROM result ORDER BY id")
    assert [(r["name"], r["outcome"]) for r in rows] == [("j_0", 1), ("j_1", 1)]
    b.close()


def test_pause_keeps_jobs_unsent_and_abort_before_run(server: EmulatorServer, boinc: Boinc) -> None:
    server.pause_volunteer()
    boinc.run_batch("p", "uppercase", [("a", "", [b"1"]), ("b", "", [b"2"])])
    time.sleep(0.3)
    assert boinc.statuses("p") == {"a": "UNSENT", "b": "UNSENT"}
    assert not server.wait_idle(0.2)
    boinc.call("abort_jobs", "<job_name>a</job_name>\n")
    server.resume_volunteer()
    assert server.wait_idle(20)
    assert boinc.statuses("p") == {"a": "ERROR", "b": "DONE"}
    r = boinc.call("query_completed_job", "<job_name>a</job_name>\n")
    assert r.status_code == 500
    assert r.text.endswith("<error_mask>16</error_mask>\n")


def test_in_progress_is_observable(make_server) -> None:
    # The volunteer is held until UNSENT was seen, and a job runs for 3 s: each state lasts
    # long enough to be seen on a loaded machine (a 0.05 s poll may be late by a second).
    srv = make_server(job_delay=3.0, volunteers=1)
    srv.pause_volunteer()
    b = Boinc(srv)
    b.run_batch("s", "uppercase", [("slow", "", [b"x"])])
    seen = [b.statuses("s")["slow"]]
    srv.resume_volunteer()
    deadline = time.monotonic() + 60
    while seen[-1] != "DONE" and time.monotonic() < deadline:
        time.sleep(0.05)
        st = b.statuses("s")["slow"]
        if st != seen[-1]:
            seen.append(st)
    assert seen == ["UNSENT", "IN_PROGRESS", "DONE"]
    b.close()


def test_min_mod_time_filters_unchanged_jobs(server: EmulatorServer, boinc: Boinc) -> None:
    server.pause_volunteer()
    boinc.run_batch("m", "uppercase", [("a", "", [b"1"]), ("b", "", [b"2"])])
    r = boinc.call("query_batch2", "<min_mod_time>0</min_mod_time>\n<batch_name>m</batch_name>\n")
    t = re.search(r"<server_time>([0-9.]+)</server_time>", r.text)
    assert t and re.fullmatch(r"\d+(\.\d{1,4})?", t.group(1))
    assert boinc.statuses("m", min_mod_time=t.group(1)) == {}
    # mod_time has MySQL TIMESTAMP resolution (1 s): change the job in a later second
    time.sleep(int(float(t.group(1))) + 1.05 - time.time())
    boinc.call("abort_jobs", "<job_name>b</job_name>\n")
    assert boinc.statuses("m", min_mod_time=t.group(1)) == {"b": "ERROR"}
    assert boinc.statuses("m") == {"a": "UNSENT", "b": "ERROR"}


def test_an_expired_batch_is_kept_unless_asked(server: EmulatorServer, boinc: Boinc) -> None:
    """As a stock project: a past expire_time changes nothing (no expire_batches cron)."""
    server.pause_volunteer()
    boinc.run_batch("k", "uppercase", [("k1", "", [b"1"])])
    r = boinc.call(
        "set_expire_time",
        f"<batch_name>k</batch_name>\n<expire_time>{time.time() - 1:.6f}</expire_time>\n",
    )
    assert b"<success>1</success>" in r.content
    time.sleep(1.5)  # a sweep (every second) would have cancelled it by now if enabled
    assert boinc.statuses("k") == {"k1": "UNSENT"}


def test_expired_batch_is_aborted_and_retired(make_server) -> None:
    """expire_batches=True: as a project running BOINC master's html/ops/expire_batches."""
    server = make_server(expire_batches=True)
    boinc = Boinc(server)
    try:
        server.pause_volunteer()
        boinc.run_batch("e", "uppercase", [("a", "", [b"1"])])
        r = boinc.call(
            "set_expire_time",
            f"<batch_name>e</batch_name>\n<expire_time>{time.time() - 1:.6f}</expire_time>\n",
        )
        assert b"<success>1</success>" in r.content
        assert server.wait_idle(5)
        assert boinc.statuses("e") == {"a": "ERROR"}
        assert server.store.batch_by_name("e")["state"] == 4  # retired
    finally:
        boinc.close()


def test_retire_cancels_unsent_jobs_and_lets_running_ones_finish(server: EmulatorServer) -> None:
    """retire_batch as BOINC's: unsent jobs cancelled, a job in progress goes on."""
    store = server.store
    server.pause_volunteer()
    boinc = Boinc(server)
    try:
        boinc.run_batch("rt", "uppercase", [("rt1", "", [b"1"]), ("rt2", "", [b"2"])])
        claim = store.claim(time.time() + 60)  # a volunteer takes rt1
        assert claim is not None and claim.wu_name == "rt1"
        boinc.call("retire_batch", "<batch_name>rt</batch_name>\n")
        assert boinc.statuses("rt") == {"rt1": "IN_PROGRESS", "rt2": "ERROR"}
    finally:
        boinc.close()


def test_restart_keeps_everything(make_server, tmp_path) -> None:
    state = tmp_path / "persist"
    srv = make_server(state_dir=state)
    b = Boinc(srv)
    auth = srv.authenticator
    guest = srv.add_user("guest", False)
    b.run_batch("r", "uppercase", [("done", "", [b"persist"])])
    assert srv.wait_idle(20)
    srv.pause_volunteer()
    b.run_batch("r2", "uppercase", [("later", "", [b"later"])])
    b.close()
    srv.stop()

    srv2 = make_server(state_dir=state)
    assert srv2.authenticator == auth
    assert srv2.add_user("guest", False) == guest
    b2 = Boinc(srv2)
    assert srv2.wait_idle(20)
    assert b2.statuses("r", "r2") == {"done": "DONE", "later": "DONE"}
    assert b2.output("done").content == b"PERSIST"
    assert b"<absent_files>\n</absent_files>" in b2.query_files([phys_name(b"persist")]).content
    assert "<name>r</name>" in b2.call("query_batches").text
    b2.close()


def test_split_command_line() -> None:
    assert split_command_line("--a 1  'two words' x'y z' ''") == [
        "--a",
        "1",
        "two words",
        "xy z",
        "",
    ]
