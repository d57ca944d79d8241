"""The real Ninf-G 5.0.0 client through ``ng_invoke_server.Condor`` on a real HTCondor pool
(``.ci/htcondor-pool-up.sh``; skipped without it, failed under
``GAHP_REQUIRE_HTCONDOR_POOL=1``): the cases of the other batch systems, and what the Condor
invoke server adds — a job of ``count`` N is one cluster of N procs whose id is the job id,
``condor_option`` lines reach the submit description, a malformed one is refused.

The pool runs every job as its owner, so (run as root) the client runs as that user.
"""

from __future__ import annotations

import os
import signal

import pytest
import scenarios
from ng_backends import Backend, backend_for
from ngkit import attributes
from scenarios import clean_run, nothing_left, server_gone

from gahp_core.testing import wait_for


@pytest.fixture
def backend(batch_env) -> Backend:
    return backend_for("Condor", batch_env)


class TestCommon(scenarios.CommonCases):
    pass


def test_count_is_one_cluster_named_by_its_id_with_the_condor_options(make_client, backend):
    """An array handle of N: one JOB_CREATE of count N, one cluster of N procs, and the job
    id the client gets is the cluster id; ``condor_option`` lines (from ``<SERVER>
    invoke_server_option``) are in every proc's job ad."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    client.server_lines += [
        'invoke_server_option "condor_option +NgTestTag 4242"',
        'invoke_server_option "condor_option request_memory 64"',
    ]
    n = min(backend.handles, 3)
    result = client.run("array", n)
    clean_run(result)
    (attrs,) = attributes(result.lines("C>"))
    assert (b"count", str(n).encode()) in attrs
    assert (b"condor_option", b"+NgTestTag 4242") in attrs
    records = result.records()
    ids = sorted(r["condor_id"] for r in records)
    clusters = {i.split(".")[0] for i in ids}
    assert len(clusters) == 1 and sorted(i.split(".")[1] for i in ids) == [
        str(i) for i in range(n)
    ], ids
    (cluster,) = clusters
    notes = [line for _t, line in result.lines("E<")]
    assert f"CREATE_NOTIFY 1 S {cluster}".encode() in notes, notes
    assert all(r["condor_ad"].get("NgTestTag") == "4242" for r in records), records[0]
    assert all(r["condor_ad"].get("RequestMemory") == "64" for r in records), records[0]
    # the job's environment is its own: not the server's (Ninf-G's Condor server)
    assert not any("NG_DIR" in r["env"] for r in records), records[0]["env"]
    server_gone(result)
    nothing_left(client)


def test_a_malformed_condor_option_is_refused_with_its_reason(make_client, backend):
    client = make_client(backend)
    client.server_lines.append('invoke_server_option "condor_option output /tmp/elsewhere"')
    result = client.run("sync")
    assert result.rc == 2, result.stdout
    assert result.step("grpc_function_handle_init[0]").result != "OK", result.stdout
    notes = [line for _t, line in result.lines("E<")]
    assert len(notes) == 1 and notes[0].startswith(b"CREATE_NOTIFY 1 F "), notes
    assert b"set by the invoke server" in notes[0], notes
    assert not result.records()
    server_gone(result)
    nothing_left(client)


def test_client_killed_during_an_array_call_removes_the_cluster(make_client, backend):
    """The client dies (SIGKILL) while an array handle's procs compute: the server sees its
    input close, removes the cluster and exits; no proc is left in the pool."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    n = min(backend.handles, 3)
    client.start("array", n, scenarios.LONG_CALL)
    records = client.rundir / "rec"
    wait_for(lambda: len(list(records.glob("*.json"))) == n, 60, f"the {n} procs start")
    assert client.proc is not None
    os.kill(client.proc.pid, signal.SIGKILL)
    client.proc.wait(10)
    result = client.result(-9)
    assert len({r["condor_id"].split(".")[0] for r in result.records()}) == 1
    server_gone(result)
    scenarios.jobs_gone(backend, result)
    nothing_left(client)
