"""A server's refusal becomes the RpcError subclass it names, whatever the wording around it,
and keeps its class, code and retryability (with the RPC's error as cause) when ``submit``
says which step failed."""

from __future__ import annotations

import pytest

from gahp_boinc import (
    AccessDenied,
    BadAuthenticator,
    BoincError,
    Job,
    NoOutput,
    NoSuchApp,
    NoSuchBatch,
    NoSuchJob,
    RpcError,
    StagingError,
    SyncBoincClient,
    check_job,
)
from gahp_boinc._errors import rpc_error  # private: unit test of error mapping
from gahp_boinc._replies import top_level_error  # private: unit test of the reply parsers
from gahp_boinc.emulator import EmulatorServer

# The error messages of a real BOINC 8.3 server (submit_rpc_handler.php, job_file.php,
# get_output.php; /work/shared/boinc-real-transcripts has their replies), and their class.
REAL_MESSAGES = [
    ("no authenticator", BadAuthenticator),
    ("bad authenticator", BadAuthenticator),
    ("bad auth str", BadAuthenticator),
    ("no submit access", AccessDenied),
    ("no file access", AccessDenied),
    ("not owner of batch", AccessDenied),
    ("not owner of gahp_batch_1", AccessDenied),
    ("not owner", AccessDenied),
    ("app not found: nosuchapp", NoSuchApp),
    ("no batch named no_such_batch", NoSuchBatch),
    ("no such batch", NoSuchBatch),
    ("no batch 17", NoSuchBatch),
    ("no job no_such_job", NoSuchJob),
    ("job not found: no_such_job", NoSuchJob),
    ("no such job", NoSuchJob),
    ("no workunit gahp_job_9", NoSuchJob),
    ("no job instance gahp_job_9_0", NoSuchJob),
    ("no canonical result for wu gahp_job_2", NoOutput),
    ("batch not in init state", RpcError),
    ("create_work failed: bad command line", RpcError),
    ("can't parse request message: this is not xml", RpcError),
    ("bad command", RpcError),
    ("project down for maintenance", RpcError),
    # BOINC 1.4.x servers (still deployed) word the missing submit right this way
    ("no app submit access", AccessDenied),
]


@pytest.mark.parametrize(("text", "cls"), REAL_MESSAGES)
def test_each_real_refusal_has_its_class(text, cls):
    body = (
        b'<?xml version="1.0" encoding="ISO-8859-1" ?>\n<query_batch2>\n<error>\n'
        b"    <error_num>-1</error_num>\n    <error_msg>" + text.encode() + b"</error_msg>\n"
        b"</error>\n</query_batch2>\n"
    )
    err = top_level_error(body, "query_batch2")
    assert type(err) is cls and str(err) == text and err.code == -1
    assert not err.retryable


def test_no_such_batch_names_the_batch():
    assert rpc_error("m", "no batch named condor#b 1#x").batch == "condor#b 1#x"  # type: ignore[attr-defined]
    assert rpc_error("m", "no such batch").batch is None  # type: ignore[attr-defined]


def test_rewording_keeps_class_code_retryability_and_extras():
    err = rpc_error("no batch named b", "no batch named b", code=-1)
    err.retryable = True
    again = err.reworded("error querying: no batch named b")
    assert type(again) is NoSuchBatch and str(again) == "error querying: no batch named b"
    assert (again.code, again.retryable, again.batch) == (-1, True, "b")
    assert str(err) == "no batch named b"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    with EmulatorServer(
        state_dir=tmp_path_factory.mktemp("project"), port=0, job_delay=0.05
    ) as srv:
        yield srv


@pytest.fixture
def client(emulator):
    with SyncBoincClient(emulator.url, emulator.authenticator, retries=0) as c:
        yield c


def test_the_client_raises_typed_refusals(emulator, client, tmp_path):
    with SyncBoincClient(emulator.url, "f" * 32) as stranger, pytest.raises(BadAuthenticator):
        stranger.query_batches()
    nosubmit = emulator.add_user("nosubmit", submit_access=False)
    with SyncBoincClient(emulator.url, nosubmit) as other, pytest.raises(AccessDenied):
        other.create_batch("x", "uppercase", 0)
    with pytest.raises(NoSuchApp):
        client.create_batch("x", "nosuchapp", 0)
    with pytest.raises(NoSuchBatch) as caught:
        client.query_batch2(["typed-errors-none"])
    assert caught.value.batch == "typed-errors-none"
    assert str(caught.value).endswith("no batch named typed-errors-none")  # HTCondor reads it
    with pytest.raises(NoSuchBatch):
        client.retire_batch("typed-errors-none")
    with pytest.raises(NoSuchJob):
        client.abort_jobs(["typed-errors-no-job"])
    with pytest.raises(NoSuchJob):
        client.get_output("typed-errors-no-job", 0, tmp_path / "out")


def test_a_failed_job_has_no_output(client, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    client.submit("typed-fail", "fail", [Job("typed-fail-a", [], [src])])
    assert client.wait("typed-fail", interval=0.1, timeout=60) == {"typed-fail-a": "ERROR"}
    with pytest.raises(NoOutput):
        client.get_output("typed-fail-a", 0, tmp_path / "out")
    with pytest.raises(NoOutput):
        client.fetch_output("typed-fail-a", tmp_path)


def test_submit_errors_keep_the_rpcs_class_and_cause(emulator, client, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    with pytest.raises(NoSuchApp) as caught:
        client.submit("typed-noapp", "nosuchapp", [Job("typed-noapp-a", [], [src])])
    err = caught.value
    assert str(err).startswith("error getting templates: ")
    assert type(err.__cause__) is NoSuchApp and str(err.__cause__) == "app not found: nosuchapp"

    emulator.inject_fault("http503", 1, rpc="submit_batch")
    with pytest.raises(RpcError) as caught:
        client.submit("typed-503", "uppercase", [Job("typed-503-a", [], [src])])
    err = caught.value
    assert str(err).startswith("error submitting batch: ") and err.retryable
    assert isinstance(err.__cause__, RpcError) and err.__cause__.retryable


def test_check_job_refuses_what_submit_would(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    check_job(Job("ok", ["--repeat", "2", "two words"], [src]))
    with pytest.raises(StagingError, match="does not exist|No such file"):
        check_job(Job("a", [], [tmp_path / "absent"]))
    with pytest.raises(StagingError, match="cannot be passed"):
        check_job(Job("b", ["it's"], [src]))
    assert issubclass(StagingError, BoincError)


def test_reply_fields_of_batches_and_failed_jobs_are_kept(tmp_path):
    """est_completion_time and credit_estimate (query_batches, query_batch) and a failed
    job's error_resultid (query_completed_job of a server that answers it) are typed."""
    from gahp_boinc import BatchInfo

    info = BatchInfo.from_reply(
        {"id": "4", "name": "b", "est_completion_time": "1790000000.5", "credit_estimate": "12.5"}
    )
    assert (info.est_completion_time, info.credit_estimate) == (1790000000.5, 12.5)
    (tmp_path / "in").write_text("x")
    with (
        EmulatorServer(job_delay=0.05, inline_apps=True, completed_job_mode="full") as srv,
        SyncBoincClient(srv.url, srv.authenticator) as c,
    ):
        c.submit("ef", "fail", [Job("ef#0", inputs=[tmp_path / "in"])])
        c.wait(["ef"], interval=0.1, timeout=30)
        done = c.query_completed_job("ef#0")
        assert done.canonical_resultid == 0 and done.error_resultid > 0, done
