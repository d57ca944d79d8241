"""What the differential test against a real BOINC 8.3 server taught the emulator, pinned
here so that it holds without the real server (see docs/emulator.md)."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import socket
import subprocess
import sys
import time
import zipfile

import httpx
import pytest
from emu_helpers import Boinc, phys_name

from gahp_boinc.emulator import EmulatorServer
from gahp_boinc.emulator.handlers import fanout_dir, job_words
from gahp_boinc.emulator.responses import db_float, php_float


def msg(resp: httpx.Response) -> str:
    m = re.search(r"<error_msg>(.*)</error_msg>", resp.text, re.S)
    assert m, resp.text
    return m.group(1)


def raw(srv: EmulatorServer, request: bytes) -> bytes:
    """One request on a socket; the whole reply, undecoded."""
    with socket.create_connection((srv.host, srv.port), timeout=10) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def post_raw(srv: EmulatorServer, body: str, gzip_ok: bool) -> tuple[str, bytes]:
    form = f"request={body}".encode()
    head = (
        f"POST /boinctest/submit_rpc_handler.php HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(form)}\r\n"
        + ("Accept-Encoding: gzip, deflate\r\n" if gzip_ok else "")
        + "Connection: close\r\n\r\n"
    )
    reply = raw(srv, head.encode() + form)
    headers, _, content = reply.partition(b"\r\n\r\n")
    return headers.decode(), content


def test_text_replies_are_gzipped_like_mod_deflate(server: EmulatorServer) -> None:
    head, body = post_raw(server, "<ping> </ping>", gzip_ok=True)
    assert "Content-Encoding: gzip" in head and "Vary: Accept-Encoding" in head
    assert gzip.decompress(body).endswith(b"<success>1</success>\n        </ping>\n    ")
    head, body = post_raw(server, "<ping> </ping>", gzip_ok=False)
    assert "Content-Encoding" not in head and "Vary: Accept-Encoding" in head
    assert body.startswith(b"<?xml")
    # 68 bytes or fewer: neither compressed nor varying
    r = raw(
        server,
        b"GET /boinctest/get_output.php?cmd=workunit_file&auth_str=x&wu_name=n"
        b"&file_num=0 HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert r.endswith(b"\r\n\r\nERROR: no workunit n") and b"Vary" not in r
    # Apache's own pages are not compressed
    r = raw(
        server,
        b"GET /boinctest/nothing.php HTTP/1.1\r\nHost: x\r\n"
        b"Accept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    )
    assert r.startswith(b"HTTP/1.1 404 Not Found\r\n") and b"Content-Encoding" not in r
    assert b"<h1>Not Found</h1>" in r
    assert f"Server at 127.0.0.1 Port {server.port}</address>".encode() in r


def test_user_with_a_given_authenticator(server: EmulatorServer, tmp_path) -> None:
    auth = "d6de1d4cf42b72fe456a5bdb0e18d162"
    assert server.add_user("gahpuser", True, authenticator=auth) == auth
    assert server.add_user("gahpuser", False) == auth  # kept when not given
    b = Boinc(server)
    assert msg(b.call("query_batches", auth=auth)) == "no file access"
    assert (
        msg(b.call("create_batch", "<app_name>worker</app_name>\n", auth=auth))
        == "no submit access"
    )
    b.close()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gahp_boinc.emulator",
            "--state-dir",
            str(tmp_path / "cli"),
            "--add-user",
            f"nosubmit:nosubmit:{'4' * 32}",
            "--add-user",
            f"sub:{'5' * 32}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split() for _ in range(4)]
        assert lines[2:] == [["USER", "nosubmit", "4" * 32], ["USER", "sub", "5" * 32]]
        url = lines[0][1]
        r = httpx.post(
            url + "submit_rpc_handler.php",
            data={
                "request": (
                    f"<create_batch><authenticator>{'4' * 32}</authenticator><app_name>worker"
                    "</app_name></create_batch>"
                )
            },
        )
        assert msg(r) == "no submit access"
    finally:
        proc.terminate()
        proc.wait(10)


def test_error_texts(boinc: Boinc) -> None:
    r = boinc.rpc("<a x=\"1\" y='2'>&amp;")
    assert msg(r) == (
        "can't parse request message: &lt;a x=&quot;1&quot; y=&#039;2&#039;&gt;&amp;amp;"
    )
    r = boinc.rpc("<query_files>", endpoint="job_file.php")
    assert re.search(
        r"</error_msg>\n    <file>/.*/html/user/job_file.php</file>\n"
        r"    <line>302</line>\n</error>",
        r.text,
    ), r.text
    assert msg(boinc.call("delete_files", endpoint="job_file.php")) == "no such action"
    assert msg(boinc.call("get_templates", "<job_name>j</job_name>\n")) == "job not found: j"
    assert msg(boinc.call("query_completed_job", "<job_name>j</job_name>\n")) == "no such job"


def test_abort_jobs_job_by_job(server: EmulatorServer, boinc: Boinc) -> None:
    server.pause_volunteer()
    boinc.run_batch("b", "worker", [("j1", "", [b"x"]), ("j2", "", [b"x"])])
    r = boinc.call(
        "abort_jobs",
        "<job_name>j1</job_name>\n<job_name>nope</job_name>\n<job_name>j2</job_name>\n",
    )
    assert r.text.endswith(
        "<abort_jobs>\n<aborted j1>\n<error>\n    <error_num>-1</error_num>\n"
        "    <error_msg>no job nope</error_msg>\n</error>\n</abort_jobs>\n"
    )
    assert boinc.statuses("b") == {"j1": "ERROR", "j2": "UNSENT"}


def test_create_work_reports(server: EmulatorServer, boinc: Boinc) -> None:
    a = phys_name(b"x")
    bid = boinc.create_batch("b")
    boinc.stage(b"x")
    d = server.store.download_dir if server.store else None
    missing = phys_name(b"nope")
    assert msg(boinc.submit(bid, "worker", [("j", "", [missing])])) == (
        f"create_work failed: md5_file: can't open {d}/{fanout_dir(missing)}/{missing}\n"
        "md5_file: No such file or directory\n"
        "process_input_template: md5_file fopen() failed\n"
        "process_input_template(): fopen() failed\n"
        "create_work() failed: -108\n"
        f"copy {d}/{missing} to {d}/{fanout_dir(missing)}/{missing}\n"
    )
    assert f'can\'t open {d}/3d2/1""\n' in msg(
        boinc.submit(bid, "worker", [("j", '--cpu_time "1"', [a])])
    )
    text = msg(boinc.submit(bid, "worker", [("j", "", [a]), ("j", "", [a])]))
    assert text.startswith(
        "create_work failed: Database error: Duplicate entry 'j' for key "
        "'name'\nquery=insert into workunit values ("
    )
    assert text.endswith(
        "wu.insert_batch() failed: 1\nMySQL error: Duplicate entry 'j' for key 'name'\n"
    )
    assert b"<batch_id>" in boinc.submit(bid, "worker", [("j", "--x 'a b'", [a])]).content


def test_job_words_and_fanout() -> None:
    assert job_words('--command_line "--cpu_time "1"" f.txt') == [
        "--command_line",
        "--cpu_time ",
        '1""',
        "f.txt",
    ]
    assert job_words("--command_line \"--x 'a b'\" f") == ["--command_line", "--x 'a b'", "f"]
    assert fanout_dir("") == "d9"  # the directory get_output.php names for a bad index


def test_get_output2_quirks(server: EmulatorServer, boinc: Boinc) -> None:
    boinc.run_batch("b", "worker", [("ok", "", [b"hello"])])
    boinc.run_batch("f", "fail", [("bad", "", [b"x"])])
    assert server.wait_idle(20)
    get = boinc.http.get
    url = boinc.url + "get_output2.php"
    a = boinc.auth
    assert get(url, params={"cmd": "workunit", "wu_id": 99, "auth": a}).text == "no workunit for "
    assert (
        get(url, params={"cmd": "file", "result_id": 99, "file_num": 0, "auth": a}).text
        == "no result 99"
    )
    assert get(url, params={"cmd": "zip", "auth": a}).text == "bad cmd\n"
    r = get(url, params={"cmd": "workunit", "wu_id": "x", "auth": a})
    assert (r.status_code, r.headers["location"]) == (302, "missing_arg_wu_id.html")
    r = get(url, params={"cmd": "workunit", "wu_id": 2, "auth": a})
    assert (r.headers["content-disposition"], r.content) == ("attachment; filename=.zip", b"")
    assert (
        get(boinc.url + "get_output.php", params={"cmd": "x", "auth_str": a}).text
        == "bad command\n"
    )
    r = get(
        boinc.url + "get_output.php",
        params={"cmd": "workunit_file", "auth_str": a, "wu_name": "ok", "file_num": "one"},
    )
    assert (r.status_code, r.headers["location"]) == (302, "missing_arg_file_num.html")
    with boinc.http.stream(
        "GET", url, params={"cmd": "file", "result_id": 1, "file_num": 1, "auth": a}
    ) as r:
        assert r.headers["content-disposition"] == "attachment; filename=ok_0__"
        with pytest.raises(httpx.RemoteProtocolError):
            r.read()


def test_jobs_beyond_the_host_stay_unsent(server: EmulatorServer, boinc: Boinc) -> None:
    bid = boinc.create_batch("big")
    a = boinc.stage(b"x")[0]
    r = boinc.call(
        "submit_batch",
        f"<batch>\n<batch_id>{bid}</batch_id>\n<app_name>worker"
        "</app_name>\n<job_params>\n<rsc_memory_bound>1e15</rsc_memory_bound>\n"
        "</job_params>\n<job>\n<name>huge</name>\n<input_file>\n<mode>local_staged"
        f"</mode>\n<source>{a}</source>\n</input_file>\n</job>\n</batch>\n",
    )
    assert b"<batch_id>" in r.content
    boinc.run_batch("small", "worker", [("small", "", [b"y"])])
    deadline = time.monotonic() + 20
    while boinc.statuses("small") != {"small": "DONE"}:  # a later job runs, not this one
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert boinc.statuses("big") == {"huge": "UNSENT"}
    assert not server.wait_idle(0.5)


def test_upload_limits_texts(make_server) -> None:
    srv = make_server(max_file_size=10)
    b = Boinc(srv)
    r = b.call(
        "upload_files",
        "<phys_name>a.bin</phys_name>\n",
        endpoint="job_file.php",
        files={"file_0": ("local.bin", b"x" * 11)},
    )
    assert msg(r) == (
        "local.bin upload failed because: The uploaded file exceeds upload_max_filesize of php.ini."
    )
    b.close()


def test_get_output_zips(server: EmulatorServer, boinc: Boinc) -> None:
    bid = boinc.run_batch("b", "worker", [("ok", "", [b"hello"])])
    boinc.run_batch("f", "fail", [("bad", "", [b"x"])])
    assert server.wait_idle(20)

    def get(**q: object) -> httpx.Response:
        return boinc.http.get(boinc.url + "get_output.php", params=q)

    def signed(thing: object) -> str:
        return hashlib.md5(f"{boinc.auth}{thing}".encode()).hexdigest()

    r = get(cmd="batch_files", batch_id=bid, auth_str=signed(bid))
    assert re.fullmatch(
        r"attachment; filename=boinc_batch_[A-Za-z0-9]{6}\.zip", r.headers["content-disposition"]
    )
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        [member] = z.infolist()
        assert member.filename.startswith("ok_0_r") and z.read(member) == b"HELLO"
    assert get(cmd="batch_files", batch_id=bid, auth_str=boinc.auth).text == "ERROR: bad auth str"
    assert get(cmd="batch_files", batch_id=9, auth_str="x").text == "ERROR: no batch 9"
    assert get(cmd="batch_files", batch_id="x").headers["location"] == "non_num_arg.html"
    r = get(cmd="workunit_files", wu_id=1, auth_str=signed(1))
    assert r.headers["content-disposition"].startswith("attachment; filename=boinc_wu_ok_")
    assert (
        get(cmd="workunit_files", wu_id=1, auth_str=boinc.auth).text == "ERROR: bad authenticator"
    )
    assert (
        get(cmd="workunit_files", wu_id=2, auth_str=signed(2)).text
        == "ERROR: no canonical result for wu bad"
    )
    assert get(cmd="workunit_files", wu_id=7, auth_str="x").text == "ERROR: no workunit 7"
    r = get(cmd="result_file", result_name="ok_0", file_num=0, auth_str=signed("ok_0"))
    assert r.content == b"HELLO"


def test_database_fault(server: EmulatorServer, boinc: Boinc) -> None:
    """As BOINC 8.3 answers while its database is down (seen when MariaDB was stopped)."""
    server.inject_fault("database", count=3)
    r = boinc.rpc("<ping> </ping>")
    assert r.text == (
        '<?xml version="1.0" encoding="ISO-8859-1" ?>\n<ping>\n<error>\n'
        "    <error_num>-138</error_num>\n"
        "    <error_msg>Can't connect to database</error_msg>\n</error>\n</ping>\n"
    )
    assert (
        "<query_files>\n<error>\n    <error_num>-138</error_num>"
        in boinc.query_files(["a.txt"]).text
    )
    r = boinc.output("j")
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert "<h2>Unable to handle request</h2>\nCan't connect to database<br>" in r.text
    assert b"<success>1</success>" in boinc.rpc("<ping> </ping>").content


def test_floats_are_echoed_as_php_does() -> None:
    """Values printed by PHP 8.2 (``php -r 'echo $x;'``)."""
    cases = {
        1e-7: "1.0E-7",
        1.5e-7: "1.5E-7",
        1e15: "1.0E+15",
        1e14: "1.0E+14",
        123456789012345.0: "1.2345678901234E+14",
        0.1 + 0.2: "0.3",
        -0.0: "-0",
        1795371743.368999: "1795371743.369",
        1700000000.123456: "1700000000.1235",
        3.009401: "3.009401",
        0.02995468587962963: "0.02995468587963",
        7.0: "7",
    }
    assert {x: php_float(x) for x in cases} == cases
    assert db_float(1795351010.206084) == "1795351010.2061"


def test_expiry_can_be_off(make_server) -> None:
    """A plain BOINC 8.3 project runs no expiry daemon: a job of an expired batch stays."""
    srv = make_server(expire_batches=False, paused=True)
    b = Boinc(srv)
    b.run_batch("e", "worker", [("j", "", [b"x"])])
    r = b.call(
        "set_expire_time",
        "<batch_name>e</batch_name>\n<expire_time>1700000000.123456</expire_time>\n",
    )
    assert b"<success>1</success>" in r.content
    time.sleep(1.5)  # the reaper looks every second
    assert b.statuses("e") == {"j": "UNSENT"}
    assert "<expire_time>1700000000.1235</expire_time>" in b.call("query_batches").text
    b.close()


def test_job_aborted_while_running(server: EmulatorServer, boinc: Boinc) -> None:
    """As seen on the real server: the running instance comes back aborted (exit 202, no CPU
    time), the job gets too_many_total_results besides cancelled, one <error> per bit."""
    boinc.run_batch("b", "worker", [("j", "--cpu_time 1", [b"x"])])
    deadline = time.monotonic() + 10
    while boinc.statuses("b") != {"j": "IN_PROGRESS"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert b"<aborted j>" in boinc.call("abort_jobs", "<job_name>j</job_name>\n").content
    assert server.store is not None
    deadline = time.monotonic() + 20
    while server.store.one("SELECT 1 FROM result WHERE server_state<>5"):  # until it is back
        assert time.monotonic() < deadline
        time.sleep(0.1)
    r = boinc.call(
        "query_batch", "<batch_name>b</batch_name>\n<get_job_details>1</get_job_details>\n"
    )
    assert (
        "<canonical_instance_id>0</canonical_instance_id>\n"
        "   <error>too_many_total_results</error>\n   <error>cancelled</error>\n"
        "            <exit_status>202</exit_status>\n"
        "            <status>error</status>\n"
    ) in r.text, r.text
    row = server.store.one("SELECT outcome, cpu_time, elapsed_time, stderr_out FROM result")
    assert row is not None and tuple(row) == (
        3,
        0,
        0,
        "\n<core_client_version>7.20.5</core_client_version>\n",
    )
