"""The emulator's replies, byte for byte against replies captured from a real BOINC 8.3 server.

The scenario replays the captured session: same batch and job names, same requests.
"""

from __future__ import annotations

import re
import time

import pytest
from emu_helpers import Boinc, expected, phys_name

IN1 = b"hello boinc one\n"
IN2 = b"hello boinc two\n"
A, B = phys_name(IN1), phys_name(IN2)
EXPIRE = "1795347314.000000"
CAPTURED_AT = 1795343714.0  # the captured session ran an hour before its batch expired


@pytest.fixture
def server(make_server):
    """The project's clock runs from the capture's time, so the batch's fixed expire_time
    lies an hour ahead whatever today's date (the expiry sweep would otherwise cancel it)."""
    start = time.monotonic()
    return make_server(clock=lambda: CAPTURED_AT + (time.monotonic() - start))


def mask(body: bytes) -> bytes:
    """Mask what legitimately differs between runs."""
    body = re.sub(rb"<server_time>[0-9.]+</server_time>", b"<server_time>T</server_time>", body)
    body = re.sub(rb"<(create_time|completion_time)>[0-9]+<", rb"<\1>T<", body)
    return body


def check(resp, name: str) -> None:
    status, body = expected(name)
    assert resp.status_code == status
    assert resp.headers["content-type"] == "text/xml;charset=UTF-8"
    assert mask(resp.content) == mask(body)


def submit_request(auth: str) -> str:
    # what lib/remote_submit.cpp sends (transcript 08), byte for byte
    return f"""<submit_batch>
<authenticator>{auth}</authenticator>
<batch>
   <batch_id>1</batch_id>
   <app_name>worker</app_name>
   <app_version_num>0</app_version_num>
   <job_params>
       <rsc_disk_bound>0.000000</rsc_disk_bound>
       <rsc_fpops_est>0.000000</rsc_fpops_est>
       <rsc_fpops_bound>0.000000</rsc_fpops_bound>
       <rsc_memory_bound>0.000000</rsc_memory_bound>
       <delay_bound>0.000000</delay_bound>
   </job_params>
<job>
  <name>gahp_job_1</name>
<command_line>--upper --n 1 </command_line>
<input_file>
<mode>local_staged</mode>
<source>{A}</source>
</input_file>
</job>
<job>
  <name>gahp_job_2</name>
<command_line>--upper --n 2 </command_line>
<input_file>
<mode>local_staged</mode>
<source>{B}</source>
</input_file>
</job>
</batch>
</submit_batch>
"""


def test_captured_session_replayed(server, boinc: Boinc) -> None:
    server.pause_volunteer()
    check(boinc.rpc("<ping> </ping>\n"), "ping")
    check(boinc.call("get_templates", "<app_name>worker</app_name>\n"), "get_templates_worker")
    check(
        boinc.call(
            "create_batch",
            "<batch_name>gahp_batch_1</batch_name>\n<app_name>worker"
            f"</app_name>\n<expire_time>{EXPIRE}</expire_time>\n",
        ),
        "create_batch",
    )
    check(boinc.query_files([A, B], batch_id=1), "query_files_absent")
    assert b"<success/>" in boinc.upload([(A, IN1)]).content  # no batch: no association
    check(boinc.query_files([A, B], batch_id=1), "query_files_one_absent")
    check(boinc.upload([(B, IN2)], batch_id=1), "upload_files")
    check(boinc.query_files([A, B]), "query_files_none_absent")
    check(boinc.rpc(submit_request(boinc.auth)), "submit_batch")
    check(
        boinc.call(
            "query_batch2",
            "<min_mod_time>0.000000</min_mod_time>\n<batch_name>gahp_batch_1</batch_name>\n",
        ),
        "query_batch2_unsent",
    )
    check(boinc.call("query_batches"), "query_batches")
    check(
        boinc.call(
            "query_batch",
            "<batch_id>1</batch_id>\n<get_job_details>1</get_job_details>"
            "\n<get_cpu_time>1</get_cpu_time>\n",
        ),
        "query_batch",
    )
    check(boinc.call("get_templates", "<job_name>gahp_job_1</job_name>\n"), "get_templates_worker")
    abort = boinc.call("abort_jobs", "<job_name>gahp_job_2</job_name>\n")
    check(abort, "abort_jobs")
    assert b"<aborted gahp_job_2>\n" in abort.content  # not well-formed, like the real server
    server.resume_volunteer()
    assert server.wait_idle(20)
    q2 = "<min_mod_time>0.000000</min_mod_time>\n<batch_name>gahp_batch_1</batch_name>\n"
    check(boinc.call("query_batch2", q2), "query_batch2_after_abort")
    check(
        boinc.call("query_completed_job", "<job_name>gahp_job_2</job_name>\n"),
        "query_completed_job_aborted_http500",
    )

    done = boinc.call("query_completed_job", "<job_name>gahp_job_1</job_name>\n")
    assert done.status_code == 200
    _, real = expected("query_completed_job_real_client")
    stderr = (
        b"\n&lt;core_client_version&gt;7.20.5&lt;/core_client_version&gt;\n&lt;![CDATA[\n"
        b"&lt;stderr_txt&gt;\nworker: starting\nworker: done\n\n&lt;/stderr_txt&gt;\n"
        b"]]&gt;\n"
    )
    want = re.sub(
        rb"(?s)<stderr_out><!\[CDATA\[.*   \]\]>",
        b"<stderr_out><![CDATA[\n" + stderr.replace(b"\\", b"\\\\") + b"   ]]>",
        real,
    )
    got = re.sub(rb"<(elapsed_time|cpu_time)>[0-9.e-]+<", rb"<\1>X<", done.content)
    want = re.sub(rb"<(elapsed_time|cpu_time)>[0-9.e-]+<", rb"<\1>X<", want)
    want = want.replace(b"<canonical_resultid>5<", b"<canonical_resultid>1<")
    assert got == want

    out = boinc.output("gahp_job_1")
    assert out.status_code == 200
    assert out.content == b"HELLO BOINC ONE\n"
    assert out.headers["content-type"] == "application/octet-stream"
    assert re.fullmatch(
        r"attachment; filename=gahp_job_1_0_r\d+_0", out.headers["content-disposition"]
    )
    assert out.headers["content-length"] == "16"
    for resp, name in (
        (boinc.output("gahp_job_2"), "get_output_no_canonical"),
        (boinc.output("gahp_job_1", auth="0" * 32), "get_output_bad_auth"),
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "text/html; charset=UTF-8"
        assert resp.content == expected(name)[1]

    check(
        boinc.call(
            "set_expire_time",
            "<batch_name>gahp_batch_1</batch_name>\n<expire_time>1795351010.206084</expire_time>\n",
        ),
        "set_expire_time",
    )
    batches = boinc.call("query_batches").text
    # a PHP float echoed with precision 14, as the real server prints it
    assert "<expire_time>1795351010.2061</expire_time>" in batches
    assert "<state>2</state>" in batches and "<nerror_jobs>1</nerror_jobs>" in batches
    check(boinc.call("retire_batch", "<batch_name>gahp_batch_1</batch_name>\n"), "retire_batch")
    check(boinc.call("query_batches"), "query_batches_after_retire")
    check(boinc.call("query_batch2", q2), "query_batch2_retired")


def test_duplicate_association_crashes_like_php8(boinc: Boinc) -> None:
    bid = boinc.create_batch("b")
    assert b"<success/>" in boinc.upload([(A, IN1)], batch_id=bid).content
    check(boinc.query_files([A], batch_id=bid), "query_files_duplicate_assoc_http500")
    # the same name twice in one query links it twice: HTTP 500 as well
    boinc.stage(IN2)
    bid2 = boinc.create_batch("b2")
    assert boinc.query_files([B, B], batch_id=bid2).status_code == 500
    # uploading a file the server already has: duplicate job_file row, HTTP 500
    dup = boinc.upload([(A, IN1)])
    assert dup.status_code == 500
    assert dup.content.endswith(b"<upload_files>\n")
    assert dup.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("name", "make"),
    [
        (
            "error_bad_authenticator",
            lambda b: b.call(
                "create_batch",
                "<batch_name>x</batch_name>\n<app_name>worker</app_name>\n"
                "<expire_time>0.000000</expire_time>\n",
                auth="f" * 32,
            ),
        ),
        (
            "error_no_submit_access",
            lambda b: b.call(
                "create_batch",
                "<batch_name>x</batch_name>\n<app_name>worker</app_name>\n"
                "<expire_time>0.000000</expire_time>\n",
                auth=b.srv.add_user("guest", False),
            ),
        ),
        (
            "error_no_file_access",
            lambda b: b.call(
                "query_files",
                f"   <phys_name>{A}</phys_name>\n",
                auth=b.srv.add_user("guest", False),
                endpoint="job_file.php",
            ),
        ),
        (
            "error_unknown_app",
            lambda b: b.call(
                "create_batch",
                "<batch_name>x</batch_name>\n<app_name>nosuchapp</app_name>\n"
                "<expire_time>0.000000</expire_time>\n",
            ),
        ),
        ("error_bad_command", lambda b: b.call("frobnicate")),
        ("error_unparsable", lambda b: b.rpc("this is not xml")),
        (
            "error_no_request",
            lambda b: b.http.post(b.url + "submit_rpc_handler.php", files={"other": (None, "x")}),
        ),
        (
            "error_query_batch2_unknown_batch",
            lambda b: b.call(
                "query_batch2",
                "<min_mod_time>0.000000</min_mod_time>\n<batch_name>no_such_batch</batch_name>\n",
            ),
        ),
        (
            "error_abort_unknown_job",
            lambda b: b.call("abort_jobs", "<job_name>no_such_job</job_name>\n"),
        ),
        (
            "error_retire_unknown",
            lambda b: b.call("retire_batch", "<batch_name>no_such_batch</batch_name>\n"),
        ),
        (
            "query_batch2_min_mod_time_now",
            lambda b: (
                b.create_batch("gahp_batch_1"),
                b.call(
                    "query_batch2",
                    "<min_mod_time>9999999999.5</min_mod_time>\n"
                    "<batch_name>gahp_batch_1</batch_name>\n",
                ),
            )[1],
        ),
    ],
)
def test_error_replies_match_real_server(boinc: Boinc, name: str, make) -> None:
    check(make(boinc), name)


def test_other_error_messages(boinc: Boinc) -> None:
    def msg(resp) -> str:
        m = re.search(r"<error_msg>(.*)</error_msg>", resp.text, re.S)
        assert m, resp.text
        return m.group(1)

    assert (
        msg(boinc.rpc("<create_batch><app_name>worker</app_name></create_batch>"))
        == "no authenticator"
    )
    bid = boinc.create_batch("b", app="concat")
    boinc.stage(IN1)
    assert (
        msg(boinc.submit(bid, "concat", [("j", "", [A])]))
        == "wrong # of input files for job 0: need 2, got 1"
    )
    assert msg(boinc.submit(bid, "concat", [("j", 'say "hi"', [A, A])])).startswith(
        "create_work failed"
    )
    assert msg(boinc.submit(bid, "concat", [("j", "", [A, phys_name(b"nope")])])).startswith(
        "create_work failed"
    )
    assert b"<batch_id>" in boinc.submit(bid, "concat", [("j", "", [A, A])]).content
    assert msg(boinc.submit(bid, "concat", [("k", "", [A, A])])) == "batch not in init state"
    bid2 = boinc.create_batch("b2", app="concat")
    assert msg(boinc.submit(bid2, "concat", [("j", "", [A, A])])).startswith("create_work failed")
    assert msg(boinc.submit(999, "concat", [("z", "", [A, A])])) == "no batch 999"
    assert msg(boinc.query_files(["bad/name.txt"])) == "bad filename"
    assert msg(boinc.call("query_completed_job", "<job_name>nope</job_name>\n")) == "no such job"
    assert msg(boinc.call("get_templates", "<app_name>zzz</app_name>\n")) == "app not found: zzz"
    other = boinc.srv.add_user("other", True)
    assert (
        msg(boinc.call("retire_batch", "<batch_name>b</batch_name>\n", auth=other)) == "not owner"
    )
    assert (
        msg(boinc.call("query_batch2", "<batch_name>b</batch_name>\n", auth=other))
        == "no batch named b"
    )
    # the delete_time bug of job_file.php (transcript 91)
    assert (
        msg(
            boinc.call(
                "query_files",
                f"<delete_time>1900000000</delete_time>\n<phys_name>{A}</phys_name>\n",
                endpoint="job_file.php",
            )
        )
        == "job_file->update() failed: "
    )


def test_request_transports(boinc: Boinc) -> None:
    """The request field may come urlencoded or multipart, not in the query string."""
    want = expected("ping")[1]
    assert (
        boinc.http.post(
            boinc.url + "submit_rpc_handler.php", data={"request": "<ping> </ping>"}
        ).content
        == want
    )
    assert (
        b"can't parse request message: </error_msg>"
        in boinc.http.get(
            boinc.url + "submit_rpc_handler.php", params={"request": "<ping/>"}
        ).content
    )
    assert boinc.rpc("<ping> </ping>").content == want
    assert boinc.http.get(boinc.url + "nothing.php").status_code == 404
    assert boinc.http.get(boinc.url.replace("/boinctest/", "/other/") + "x").status_code == 404
