"""The submit options of BoincClient on the REAL BOINC 8.3 server, read back from its
database: batch priority, per-job priority, a per-job input template (quorum and
replication fields), target host; and allocation priority (a priority BOINC computes)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from gahp_boinc import Job, JobOptions, JobParams, SyncBoincClient
from gahp_core import GahpClient

TEMPLATE = """<input_template>
    <file_info>
    </file_info>
    <workunit>
        <file_ref>
            <open_name>in</open_name>
        </file_ref>
        <min_quorum>1</min_quorum>
        <target_nresults>1</target_nresults>
        <max_error_results>3</max_error_results>
        <max_total_results>4</max_total_results>
        <max_success_results>2</max_success_results>
        <rsc_fpops_est>1e10</rsc_fpops_est>
        <rsc_fpops_bound>1e12</rsc_fpops_bound>
        <rsc_memory_bound>1e8</rsc_memory_bound>
        <rsc_disk_bound>1e8</rsc_disk_bound>
        <delay_bound>86400</delay_bound>
    </workunit>
</input_template>"""


def test_priorities_templates_and_targets_reach_the_workunits(real_boinc, tmp_path: Path):
    tag = f"opt{int(time.time() * 1000) % 10**9}"
    (tmp_path / "in.txt").write_text(f"options {tag}\n")
    host = real_boinc.sql("SELECT id FROM host ORDER BY id DESC LIMIT 1")
    host_id = int(host[0]["id"]) if host else 0
    inputs = [tmp_path / "in.txt"]
    with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
        c.submit(
            f"{tag}_p",
            real_boinc.app,
            [
                Job(f"{tag}_a", args=["--cpu_time", "1"], inputs=inputs),
                Job(
                    f"{tag}_b",
                    args=["--cpu_time", "1"],
                    inputs=inputs,
                    options=JobOptions(priority=9, input_template=TEMPLATE),
                ),
                Job(
                    f"{tag}_c",
                    args=["--cpu_time", "1"],
                    inputs=inputs,
                    options=JobOptions(target_host=host_id),
                ),
            ],
            params=JobParams(priority=5),
        )
        c.submit(
            f"{tag}_q",
            real_boinc.app,
            [Job(f"{tag}_d", args=["--cpu_time", "1"], inputs=inputs)],
            params=JobParams(allocation_priority=True, rsc_fpops_est=1e10),
        )
        rows = {
            r["name"]: r
            for r in real_boinc.sql(
                "SELECT id, name, priority, min_quorum, target_nresults, max_error_results,"
                f" max_total_results, max_success_results FROM workunit WHERE name LIKE '{tag}%'"
            )
        }
        try:
            assert rows[f"{tag}_a"]["priority"] == "5", rows
            b = rows[f"{tag}_b"]
            assert b["priority"] == "9", b
            assert (
                b["min_quorum"],
                b["target_nresults"],
                b["max_error_results"],
                b["max_total_results"],
                b["max_success_results"],
            ) == ("1", "1", "3", "4", "2")
            if host_id:
                assigned = real_boinc.sql(
                    "SELECT target_id, target_type FROM assignment"
                    f" WHERE workunitid={rows[f'{tag}_c']['id']}"
                )
                assert assigned and assigned[0]["target_id"] == str(host_id), assigned
            # allocation priority: minus the logical end time BOINC computed (not the default)
            assert rows[f"{tag}_d"]["priority"] != "0", rows[f"{tag}_d"]
        finally:
            c.abort_batch(f"{tag}_p")
            c.abort_batch(f"{tag}_q")
            c.retire(f"{tag}_p")
            c.retire(f"{tag}_q")


def test_blahpd_submit_ad_priority_and_target_reach_the_workunit(real_boinc, tmp_path: Path):
    """+BoincPriority, +BoincTargetHost (and +BoincTargetUser) of a BLAH submit ad."""
    host = real_boinc.sql("SELECT id FROM host ORDER BY id DESC LIMIT 1")
    host_id = int(host[0]["id"]) if host else 0
    with _blahpd(real_boinc, tmp_path, "blah options\n") as submit:
        res = submit(Arguments="--cpu_time 1", BoincPriority=7, BoincTargetHost=host_id)
        assert res[0] == "0", res
        bad = submit(BoincPriority="high")
        assert bad[0] != "0" and "BoincPriority" in bad[1], bad
        rows = _workunit(real_boinc, res[2], "id, priority")
        assert rows[0]["priority"] == "7", rows
        if host_id:
            assigned = real_boinc.sql(
                f"SELECT target_id FROM assignment WHERE workunitid={rows[0]['id']}"
            )
            assert assigned and assigned[0]["target_id"] == str(host_id), assigned
        assert submit.blah.call("BLAH_JOB_CANCEL", res[2], timeout=120)[0] == "0"


class _Submitter:
    """``BLAH_JOB_SUBMIT`` of the project's app reading ``in.txt``, with more attributes."""

    def __init__(self, blah: GahpClient, real_boinc, tmp_path: Path) -> None:
        self.blah, self.real_boinc, self.tmp_path = blah, real_boinc, tmp_path

    def __call__(self, **attributes: object) -> list[str]:
        from test_blahpd_real import ad

        return self.blah.call(
            "BLAH_JOB_SUBMIT",
            ad(
                Cmd=f"{self.tmp_path}/{self.real_boinc.app}",
                Iwd=str(self.tmp_path),
                gridtype="boinc",
                In="in.txt",
                **attributes,
            ),
            timeout=300,
        )


@contextlib.contextmanager
def _blahpd(real_boinc, tmp_path: Path, text: str) -> Iterator[_Submitter]:
    """blahpd with its boinc driver on the real project (input ``in.txt`` holds ``text``)."""
    conf = real_boinc.blahpd_config(tmp_path)
    (tmp_path / "in.txt").write_text(text)
    blah = GahpClient([sys.executable, "-m", "gahp_blah", "--config", str(conf)])
    try:
        yield _Submitter(blah, real_boinc, tmp_path)
    finally:
        blah.close()


def _workunit(real_boinc, blah_id: str, columns: str) -> list[dict[str, str]]:
    """``columns`` of the workunit of a BLAH job id, once the job has reached the server."""
    job = blah_id.rsplit("/", 1)[-1]
    deadline = time.monotonic() + 60
    while not (rows := real_boinc.sql(f"SELECT {columns} FROM workunit WHERE name='{job}'")):
        assert time.monotonic() < deadline, "the job never reached the server"
        time.sleep(1)
    return rows


REPLICATION = (
    "min_quorum",
    "target_nresults",
    "max_error_results",
    "max_total_results",
    "max_success_results",
)


def _replication_of(real_boinc, job: str) -> tuple[str, ...]:
    row = real_boinc.one(f"SELECT {', '.join(REPLICATION)} FROM workunit WHERE name='{job}'")
    return tuple(row[k] for k in REPLICATION)


def test_replication_options_without_a_template_reach_the_workunit(real_boinc, tmp_path: Path):
    """JobOptions(min_quorum=..., ...) alone: the client writes the app's own input template
    with them set (the job still has its input and the app's other limits)."""
    tag = f"rep{int(time.time() * 1000) % 10**9}"
    (tmp_path / "in.txt").write_text(f"replication {tag}\n")
    opts = JobOptions(
        min_quorum=1,
        target_nresults=2,
        max_error_results=4,
        max_total_results=6,
        max_success_results=3,
    )
    with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
        c.submit(
            tag,
            real_boinc.app,
            [
                Job(
                    f"{tag}_r", args=["--cpu_time", "1"], inputs=[tmp_path / "in.txt"], options=opts
                ),
            ],
        )
        try:
            assert _replication_of(real_boinc, f"{tag}_r") == ("1", "2", "4", "6", "3")
            row = real_boinc.one(
                f"SELECT rsc_fpops_est, delay_bound FROM workunit WHERE name='{tag}_r'"
            )
            assert float(row["rsc_fpops_est"]) == 1e10 and float(row["delay_bound"]) == 86400
        finally:
            c.abort_batch(tag)
            c.retire(tag)


def test_blahpd_replication_attributes_reach_the_workunit(real_boinc, tmp_path: Path):
    """+BoincMinQuorum, +BoincTargetNresults, +BoincMaxErrorResults, +BoincMaxTotalResults,
    +BoincMaxSuccessResults of a BLAH submit ad, read back from the project's database."""
    with _blahpd(real_boinc, tmp_path, "blah replication\n") as submit:
        res = submit(
            Arguments="--cpu_time 1",
            BoincMinQuorum=1,
            BoincTargetNresults=2,
            BoincMaxErrorResults=3,
            BoincMaxTotalResults=7,
            BoincMaxSuccessResults=4,
        )
        assert res[0] == "0", res
        _workunit(real_boinc, res[2], "id")
        job = res[2].rsplit("/", 1)[-1]
        assert _replication_of(real_boinc, job) == ("1", "2", "3", "7", "4")
        assert submit.blah.call("BLAH_JOB_CANCEL", res[2], timeout=120)[0] == "0"


def test_batches_are_addressed_by_id_where_names_repeat(real_boinc, tmp_path: Path):
    """BOINC's names need not be unique (lookup_name finds one of them): the id returned by
    submit addresses exactly its batch in query_batch, set_expire_time, abort and retire."""
    tag = f"bid{int(time.time() * 1000) % 10**9}"
    (tmp_path / "in.txt").write_text(f"by id {tag}\n")
    inputs = [tmp_path / "in.txt"]
    with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
        first = c.submit(tag, real_boinc.app, [Job(f"{tag}_1", ["--cpu_time", "1"], inputs)])
        second = c.submit(tag, real_boinc.app, [Job(f"{tag}_2", ["--cpu_time", "1"], inputs)])
        try:
            ids = {r["id"] for r in real_boinc.sql(f"SELECT id FROM batch WHERE name='{tag}'")}
            assert ids == {str(first.batch_id), str(second.batch_id)}
            assert [j.name for j in c.query_batch(second.batch_id).jobs] == [f"{tag}_2"]
            c.set_expire_time(second.batch_id, 2_000_000_000)
            rows = {
                r["id"]: r["expire_time"]
                for r in real_boinc.sql(f"SELECT id, expire_time FROM batch WHERE name='{tag}'")
            }
            assert float(rows[str(second.batch_id)]) == 2e9
            assert float(rows[str(first.batch_id)]) != 2e9
            c.abort_batch(second.batch_id)
            state = real_boinc.one(f"SELECT state FROM batch WHERE id={first.batch_id}")
            assert state["state"] == "1", state  # in progress: only the second was aborted
        finally:
            for batch in (first.batch_id, second.batch_id):
                c.abort_batch(batch)
                c.retire(batch)
        states = {
            r["id"]: r["state"]
            for r in real_boinc.sql(f"SELECT id, state FROM batch WHERE name='{tag}'")
        }
        assert set(states.values()) == {"4"}, states  # both retired, each by its id


def test_boinc_gahp_submit_options_reach_the_workunit(real_boinc, tmp_path: Path):
    """BOINC_SUBMIT's NAME=VALUE options after the six job parameters (an extension the
    gridmanager does not send): the batch priority and replication of every job."""
    import sys

    tag = f"gx{int(time.time() * 1000) % 10**9}"
    (tmp_path / "in.txt").write_text(f"gahp options {tag}\n")
    gahp = GahpClient([sys.executable, "-m", "gahp_boinc"])
    try:
        assert gahp.command("BOINC_SELECT_PROJECT", real_boinc.url, real_boinc.auth) == ["S"]
        res = gahp.call(
            "BOINC_SUBMIT",
            tag,
            real_boinc.app,
            "1",
            f"{tag}#1.0",
            "2",
            "--cpu_time",
            "1",
            "1",
            str(tmp_path / "in.txt"),
            "in",
            *["NULL"] * 6,
            "priority=6",
            "min_quorum=1",
            "target_nresults=2",
            "max_total_results=5",
            timeout=300,
        )
        assert res == ["NULL"], res
        row = real_boinc.one(
            "SELECT priority, min_quorum, target_nresults, max_total_results FROM workunit"
            f" WHERE name='{tag}#1.0'"
        )
        assert (
            row["priority"],
            row["min_quorum"],
            row["target_nresults"],
            row["max_total_results"],
        ) == ("6", "1", "2", "5"), row
    finally:
        gahp.close()
        with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
            c.abort_batch(tag)
            c.retire(tag)
