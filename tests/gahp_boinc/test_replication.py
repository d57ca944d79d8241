"""Replication and quorum per job (min_quorum, target_nresults, max_*_results): refused when
BOINC's create_work would refuse them, written into the job's own input template (the
application's, amended), and honoured by the emulator (tests/boinc_real reads the real
server's database)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from gahp_boinc import Job, JobOptions, SyncBoincClient
from gahp_boinc._templates import input_template_of, with_replication  # private: the rewrite itself
from gahp_boinc.emulator import EmulatorServer

TRANSCRIPT = (
    Path(__file__).parents[3] / "shared" / "boinc-real-transcripts" / "02-get_templates.txt"
)
APP_TEMPLATE = """<input_template>
    <file_info>
    </file_info>
    <workunit>
        <file_ref>
            <open_name>in</open_name>
        </file_ref>
        <target_nresults>1</target_nresults>
        <min_quorum>1</min_quorum>
        <rsc_fpops_est>1e10</rsc_fpops_est>
    </workunit>
</input_template>"""


@pytest.mark.parametrize(
    "values",
    [
        {"min_quorum": 0},
        {"target_nresults": 1001},
        {"max_total_results": True},
        {"max_success_results": 5, "max_total_results": 3},
        {"max_error_results": 4, "max_total_results": 3},
        {"target_nresults": 4, "max_success_results": 3},
        {"min_quorum": 3, "target_nresults": 2},
    ],
)
def test_values_create_work_would_refuse_are_refused(values):
    with pytest.raises(ValueError):
        JobOptions(**values)


def test_the_apps_template_is_amended_not_replaced():
    out = ET.fromstring(
        with_replication(
            APP_TEMPLATE, {"min_quorum": 2, "target_nresults": 3, "max_total_results": 6}
        )
    )
    wu = out.find("workunit")
    assert wu is not None
    assert [wu.findtext(k) for k in ("min_quorum", "target_nresults", "max_total_results")] == [
        "2",
        "3",
        "6",
    ]
    assert wu.findtext("rsc_fpops_est") == "1e10"
    assert wu.findtext("file_ref/open_name") == "in"
    assert out.find("file_info") is not None
    assert len(wu.findall("min_quorum")) == 1


@pytest.mark.skipif(not TRANSCRIPT.is_file(), reason="no real-server transcripts beside the repo")
def test_the_template_is_read_from_a_real_get_templates_reply():
    body = TRANSCRIPT.read_bytes().split(b"===== RESPONSE BODY (verbatim) =====\n", 1)[1]
    template = ET.fromstring(input_template_of(body))
    assert template.tag == "input_template"
    assert template.findtext("workunit/min_quorum") == "1"


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    with EmulatorServer(
        state_dir=tmp_path_factory.mktemp("emu"), job_delay=0.05, inline_apps=True
    ) as srv:
        yield srv


def test_a_quorum_of_two_runs_two_instances_on_the_emulator(emu, tmp_path):
    (tmp_path / "in.txt").write_text("replicated\n")
    jobs = [
        Job(
            "rq_two",
            inputs=[tmp_path / "in.txt"],
            options=JobOptions(min_quorum=2, target_nresults=2),
        ),
        Job("rq_one", inputs=[tmp_path / "in.txt"]),
    ]
    with SyncBoincClient(emu.url, emu.authenticator) as c:
        c.submit("rq", "worker", jobs)
        assert c.wait("rq", interval=0.1, timeout=60) == {"rq_two": "DONE", "rq_one": "DONE"}
        info = c.query_batch("rq")
        by_name = {j.name: j.id for j in info.jobs}
        assert len(c.query_job(by_name["rq_two"])) == 2
        assert len(c.query_job(by_name["rq_one"])) == 1
    row = emu.project.store.one(
        "SELECT min_quorum, target_nresults FROM workunit WHERE name='rq_two'"
    )
    assert row is not None and (row["min_quorum"], row["target_nresults"]) == (2, 2)
