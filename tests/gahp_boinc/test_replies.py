"""Tolerant reading of the reference server's replies (bytes as a BOINC 8.3 project sends them)."""

from pathlib import Path
from xml.parsers.expat import ExpatError

import pytest
import xmltodict

from gahp_boinc import RpcError
from gahp_boinc._replies import (  # private: unit test of the reply parsers
    _DECL,
    _LISTS,
    clean_stderr,
    decode_text,
    parse_query_batch2,
    parse_reply,
    partial_fields,
    plain_tree,
    top_level_error,
)

DECL = b'<?xml version="1.0" encoding="ISO-8859-1" ?>\n'

ABORT = DECL + (
    b"<abort_jobs>\n<aborted gahp_job_2>\n<success>1</success>\n        </abort_jobs>\n    "
)
ERROR = DECL + (
    b"<create_batch>\n<error>\n    <error_num>-1</error_num>\n"
    b"    <error_msg>bad authenticator</error_msg>\n</error>\n</create_batch>\n"
)
BARE_ERROR = DECL + (
    b"<error>\n    <error_num>-1</error_num>\n    <error_msg>can't parse request "
    b"message: this is <not> xml</error_msg>\n</error>\n"
)
QB2 = (
    DECL
    + b"""<query_batch2>
<server_time>1795343791.7885</server_time>
   <batch_size>2</batch_size>
    <job>
        <job_name>j1</job_name>
        <status>DONE</status>
    </job>
    <job>
        <job_name>j2</job_name>
        <status>UNSENT</status>
    </job>
   <batch_size>0</batch_size>
   <batch_size>1</batch_size>
    <job>
        <job_name>k1</job_name>
        <status>ERROR</status>
    </job>
</query_batch2>
"""
)
TRUNCATED_500 = DECL + b"<query_completed_job>\n<completed_job>\n   <error_mask>16</error_mask>\n"
STDERR = """
&lt;core_client_version&gt;7.20.5&lt;/core_client_version&gt;
&lt;![CDATA[
&lt;stderr_txt&gt;
worker: done
&lt;/stderr_txt&gt;
]]&gt;   """


def test_malformed_aborted_element_is_tolerated():
    assert parse_reply(ABORT, "abort_jobs") == {"success": "1"}


def test_error_inside_command_and_alone():
    with pytest.raises(RpcError, match="^bad authenticator$"):
        parse_reply(ERROR, "create_batch")
    err = top_level_error(BARE_ERROR, "query_batch2")
    assert err is not None and "can't parse request message: this is <not> xml" in str(err)


def test_nested_error_is_data_not_failure():
    body = (
        DECL + b"<query_batch><job><error><error_num>-1</error_num><error_msg>x</error_msg>"
        b"</error></job></query_batch>"
    )
    assert top_level_error(body, "query_batch") is None


def test_query_batch2_keeps_batch_order():
    server_time, batches = parse_query_batch2(QB2)
    assert server_time == "1795343791.7885"
    assert batches == [[("j1", "DONE"), ("j2", "UNSENT")], [], [("k1", "ERROR")]]


def test_query_batch2_size_mismatch_is_an_error():
    bad = QB2.replace(b"<batch_size>0</batch_size>", b"<batch_size>3</batch_size>")
    with pytest.raises(RpcError, match="batch_size"):
        parse_query_batch2(bad)


def test_garbage_replies_become_rpc_errors():
    for body in (b"", b"<html>Internal error", b"\xff\xfe\x00", TRUNCATED_500):
        with pytest.raises(RpcError):
            parse_reply(body, "query_completed_job")
    with pytest.raises(RpcError):
        parse_query_batch2(b"<query_batch2><server_time>1")


def test_truncated_body_fields_and_stderr_cleaning():
    assert partial_fields(TRUNCATED_500) == {"error_mask": "16"}
    text = clean_stderr(STDERR)
    assert text.startswith("<core_client_version>7.20.5</core_client_version>")
    assert "<stderr_txt>\nworker: done\n</stderr_txt>" in text
    assert text.endswith("]]>\n")


def test_latin1_declared_utf8_text_is_read_as_utf8():
    body = DECL + "<create_batch><batch_id>7</batch_id><x>é</x></create_batch>".encode()
    assert parse_reply(body, "create_batch")["x"] == "é"


PLAIN_REPLIES = [
    *sorted(
        p.read_bytes() for p in (Path(__file__).parent / "emulator" / "fixtures").glob("*.body")
    ),
    b"<query_completed_job>\n<completed_job>\n  <exit_status>0</exit_status>\n"
    b"  <elapsed_time>1.5</elapsed_time>\n  <stderr_out><![CDATA[<core_client_version>"
    b"8.0</core_client_version>\n&lt;stderr&gt;]]></stderr_out>\n  <error_mask/>\n"
    b"</completed_job>\n</query_completed_job>\n",
    b"<get_templates><input_template><file_info/><file_info/><workunit><file_ref>"
    b"<open_name>in</open_name></file_ref><x>1</x><x>2</x><x>3</x></workunit>"
    b"</input_template></get_templates>",
    b"<a><b> &amp; &lt;x&gt; caf\xc3\xa9 </b><c></c><d>  </d></a>",
    b"<a><b attr='1'>x</b></a>",  # not plain: attributes
    b"<a>text<b>x</b>tail</a>",  # not plain: text beside elements
    b'<a xmlns="urn:x"><b>x</b></a>',  # not plain: a namespace
    b"<a><b>x</a>",  # not XML
]


@pytest.mark.parametrize("body", PLAIN_REPLIES)
def test_plain_tree_reads_as_xmltodict_does(body: bytes) -> None:
    text = _DECL.sub(b"", body, count=1)
    fast = plain_tree(text)
    try:
        slow = xmltodict.parse(decode_text(text), force_list=_LISTS)
    except ExpatError:
        assert fast is None
        return
    assert fast is None or fast == slow
    if b"=" not in text and b"text<" not in text:
        assert fast is not None, "a plain reply left to xmltodict"


FIXTURES = Path(__file__).parent / "emulator" / "fixtures"


def _qb2(jobs: bytes, head: bytes = b"<server_time>17.5</server_time><batch_size>1</batch_size>"):
    return DECL + b"<query_batch2>" + head + jobs + b"</query_batch2>\n"


QB2_PLAIN = [
    QB2,
    *sorted(p.read_bytes() for p in FIXTURES.glob("query_batch2_*.body")),
    _qb2(b"<job><job_name>a</job_name><status>DONE</status></job>"),
    _qb2(b"<job><job_name>a</job_name></job>"),  # no status
    _qb2(b"<job>x<job_name>a</job_name><status>DONE</status></job>"),  # text beside fields
    _qb2(b"<job/>"),  # an empty job
    _qb2(b"<other>1</other><job><status>DONE</status><extra>e</extra></job>"),
    _qb2(b"", b"<server_time> 17.5 </server_time><batch_size> 0 </batch_size>"),
]
QB2_NOT_PLAIN = [
    _qb2(b'<job n="1"><job_name>a</job_name></job>'),  # attributes
    _qb2(b'<job><job_name n="1">a</job_name></job>'),
    _qb2(b'<job xmlns="urn:x"><job_name>a</job_name></job>'),  # a namespace
    _qb2(b"<job><job_name>a</job_name><job_name>b</job_name></job>"),  # a repeated field
    _qb2(b"<job><job_name><x>a</x></job_name></job>"),  # a nested field
    _qb2(b"<job>text</job>"),  # text alone
    _qb2(b"<job><job_name>a</job_name></job>", b"<server_time>17.5</server_time>"),  # no size
    _qb2(b"", b"<server_time>17.5</server_time><batch_size>x</batch_size>"),
    _qb2(b"", b"<server_time>17.5</server_time><batch_size><n>0</n></batch_size>"),
    _qb2(b"", b"<server_time><t>17.5</t></server_time><batch_size>0</batch_size>"),
    _qb2(b"", b'<server_time>17.5</server_time><batch_size n="1">0</batch_size>'),
    _qb2(b"", b"<server_time> </server_time><batch_size>0</batch_size>"),
    _qb2(b"", b"<batch_size>0</batch_size>"),  # no server time
    _qb2(b"<job><job_name>a</job_name></job><job><job_name>b</job_name></job>"),  # 2 for 1
    _qb2(b""),  # 0 for 1
    _qb2(b"<job><job_name>a&amp;b</job_name></job>"),  # an entity
    _qb2(b"<job><job_name>a&b</job_name></job>"),  # a raw name
    BARE_ERROR,
    DECL + b"<query_batch2><error><error_msg>no batch</error_msg></error></query_batch2>",
    b"<query_batch2><server_time>1",  # not XML
]


@pytest.mark.parametrize("body", QB2_PLAIN)
def test_plain_query_batch2_reads_as_the_tolerant_parser(body: bytes) -> None:
    from gahp_boinc._replies import plain_query_batch2  # private: unit test of the reply parsers

    fast = plain_query_batch2(body)
    assert fast is not None, "a plain reply left to the tolerant parser"
    assert fast == parse_query_batch2(body)


@pytest.mark.parametrize("body", QB2_NOT_PLAIN)
def test_plain_query_batch2_leaves_the_unusual_to_the_tolerant_parser(body: bytes) -> None:
    from gahp_boinc._replies import plain_query_batch2  # private: unit test of the reply parsers

    assert plain_query_batch2(body) is None
