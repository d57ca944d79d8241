"""query_batch with get_job_details: per-job status, exit status and error of failed jobs."""

from __future__ import annotations

import asyncio

import pytest

from gahp_boinc import Project, RpcError
from gahp_boinc._replies import (  # private: unit test of the reply parsers
    parse_query_batch2,
    parse_query_batch_jobs,
)
from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer
from gahp_boinc.emulator import EmulatorServer

DECL = b'<?xml version="1.0" encoding="ISO-8859-1" ?>\n'
# a real BOINC 8.3 reply for a batch whose one job failed on the volunteer (uc2 --early_exit)
FAILED = (
    DECL
    + b"""<query_batch>

        <id>7</id>
        <njobs>1</njobs>
        <nerror_jobs>1</nerror_jobs>
        <state>2</state>
        <name>real_batch_3</name>
        <app_name>worker</app_name>
        <job>
        <id>13</id>
        <name>real_fail_job2</name>
        <canonical_instance_id>0</canonical_instance_id>
   <error>too_many_total_results</error>
            <exit_status>246</exit_status>
            <status>error</status>
        </job>
        <job>
        <id>14</id>
        <name>ok_job</name>
        <canonical_instance_id>21</canonical_instance_id>
            <cpu_time>1.5</cpu_time>
            <status>done</status>
        </job>
</query_batch>
"""
)


def test_nested_job_error_is_data():
    jobs = parse_query_batch_jobs(FAILED)
    assert jobs == [
        {
            "name": "real_fail_job2",
            "status": "error",
            "exit_status": "246",
            "error": "too_many_total_results",
            "canonical_instance_id": "0",
            "cpu_time": "",
        },
        {
            "name": "ok_job",
            "status": "done",
            "exit_status": "",
            "error": "",
            "canonical_instance_id": "21",
            "cpu_time": "1.5",
        },
    ]


def test_one_error_element_per_error_mask_bit():
    """A job aborted while it ran: BOINC 8.3 writes one <error> per bit of its error mask."""
    body = FAILED.replace(
        b"   <error>too_many_total_results</error>",
        b"   <error>too_many_total_results</error>\n   <error>cancelled</error>",
    )
    assert parse_query_batch_jobs(body)[0]["error"] == "too_many_total_results, cancelled"


def test_top_level_error_is_an_rpc_error():
    body = DECL + (
        b"<query_batch>\n<error>\n    <error_num>-1</error_num>\n"
        b"    <error_msg>no batch named x</error_msg>\n</error>\n</query_batch>\n"
    )
    with pytest.raises(RpcError, match="no batch named x"):
        parse_query_batch_jobs(body)


def test_details_of_a_failed_job_from_the_emulator(tmp_path):
    """The emulator's query_completed_job fails like PHP 8's; query_batch still has the
    failed instance's exit status."""
    from gahp_boinc import BoincJob, SubmitRequest
    from gahp_boinc._staging import Md5Cache  # private: unit test of staging
    from gahp_boinc._submit import SubmitState, submit  # private: unit test of submission

    (tmp_path / "in.txt").write_text("an input longer than thirty characters\n")
    with EmulatorServer(state_dir=tmp_path / "emu", port=0, job_delay=0.05) as emu:
        project = Project(url=emu.url, authenticator=emu.authenticator)

        async def run():
            rpc = BoincRpc(BoincRpc.make_client(10), max_tries=1)
            req = SubmitRequest(
                project=project,
                batch="d",
                app="worker",
                jobs=(
                    BoincJob(
                        name="d#0",
                        args=("--early_exit",),
                        inputs=((str(tmp_path / "in.txt"), "in"),),
                    ),
                ),
            )

            async def in_worker(fn, *args):
                return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

            await submit(rpc, req, Md5Cache(), in_worker, 3600, SubmitState())
            for _ in range(300):
                details = await rpc.query_batch_details(project, "d")
                if details[0].status == "error":
                    break
                await asyncio.sleep(0.1)
            with pytest.raises(RpcError, match="no completed instance"):
                await rpc.query_completed_job(project, "d#0")
            await rpc.client.aclose()
            return details

        (detail,) = asyncio.run(run())
    assert (detail.name, detail.status, detail.exit_status, detail.error) == (
        "d#0",
        "error",
        246,
        "too_many_total_results",
    )


def test_query_batch2_job_names_are_not_escaped_by_the_server():
    """BOINC 8.3 writes job names into query_batch2 as they are (seen on the real server)."""
    body = DECL + (
        b"<query_batch2>\n<server_time>1795371327.1791</server_time>\n"
        b"   <batch_size>2</batch_size>\n"
        b"    <job>\n        <job_name>x&y<z></job_name>\n        <status>ERROR</status>\n"
        b"    </job>\n"
        b"    <job>\n        <job_name>a&amp;b</job_name>\n        <status>DONE</status>\n"
        b"    </job>\n</query_batch2>\n"
    )
    assert parse_query_batch2(body) == (
        "1795371327.1791",
        [[("x&y<z>", "ERROR"), ("a&amp;b", "DONE")]],
    )
