"""`grid_resource = batch boinc` (blahpd's boinc driver) driven by HTCondor 25.0's gridmanager
against the project emulator, named in blahpd's configuration ([driver.boinc]), which the test
extends for its duration.  On 9.12 `BOINC_GAHP` is set for the `boinc` grid type and would
take these jobs.

25.0 sends `BLAH_PING <reqid> boinc` before any submit, and a failed ping marks the resource
down; with no project configured the driver answers the ping as up (tests/gahp_lrms/
test_boinc_ping.py), so jobs that name their own project still get submitted."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import (
    DONE,
    HELD,
    REMOVED,
    RUNNING,
    Emulator,
    HTCondor,
    owned,
    running_emulator,
    stop_gridmanagers,
    user_log_events,
)

VERSION = "25.0.13"
DEADLINE_S = 150.0
MANY = 6


@dataclass
class Runs:
    condor: HTCondor
    jobdir: Path
    clusters: dict[str, int] = field(default_factory=dict)
    ads: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    removed_id: str = ""


def _desc(emulator: Emulator, body: str, n: int = 1) -> str:
    return (
        "universe = grid\ngrid_resource = batch boinc\ntransfer_executable = false\n"
        f"{body}\nqueue {n}\n"
    )


@pytest.fixture(scope="module")
def other_project(tmp_path_factory) -> Iterator[Emulator]:
    """A second project, named by one job only (``+remote_BoincProjectUrl``)."""
    with running_emulator(tmp_path_factory.mktemp("other-project")) as emu:
        yield emu


@pytest.fixture(scope="module")
def runs(htcondors, emulator: Emulator, other_project: Emulator, jobdirs) -> Iterator[Runs | None]:
    condor = htcondors[VERSION][0]
    if condor is None:
        yield None
        return
    d = jobdirs(condor, "blah-boinc")
    owned(condor, d / "other.auth", other_project.authenticator + "\n").chmod(0o600)
    # a directory of its own: its output file 'out' must not be another job's
    (d / "other").mkdir()
    os.chown(d / "other", condor.uid, condor.gid)
    owned(condor, d / "other" / "in.txt", "other project\n")
    auth = owned(condor, d / "auth", emulator.authenticator + "\n")
    auth.chmod(0o600)
    owned(condor, d / "in.txt", "boinc via blah\n")
    (d / "many").mkdir()
    os.chown(d / "many", condor.uid, condor.gid)
    for i in range(MANY):
        owned(condor, d / "many" / f"in.{i}", f"job {i}\n")
    r = Runs(condor, d)

    def desc(body: str, n: int = 1) -> str:
        return _desc(emulator, body, n)

    toml = condor.dir / "blahpd.toml"
    original = toml.read_text()
    toml.write_text(
        original + f'\n[driver.boinc]\nproject_url = "{emulator.url}"\n'
        f'authenticator_file = "{auth}"\n'
    )
    stop_gridmanagers(condor)  # the next blahpd reads the new configuration

    try:
        r.clusters["upper"] = condor.submit(
            d,
            desc(
                "executable = uppercase\narguments = --repeat 2\ninput = in.txt\n"
                "transfer_output_files = out\noutput = result.$(Process).txt\n"
                "error = stderr.$(Process).txt\nlog = upper.log",
                2,
            ),
            "upper.sub",
        )
        r.clusters["other"] = condor.submit(
            d,
            desc(
                "executable = uppercase\ninitialdir = other\ninput = in.txt\noutput = other.txt\n"
                "log = other.log\n"
                f'+remote_BoincProjectUrl = "{other_project.url}"\n'
                f'+remote_BoincAuthenticatorFile = "{d / "other.auth"}"'
            ),
            "other.sub",
        )
        r.clusters["many"] = condor.submit(
            d,
            desc(
                "executable = uppercase\ninitialdir = many\ninput = in.$(Process)\n"
                "output = res.$(Process)\nlog = many.log",
                MANY,
            ),
            "many.sub",
        )
        r.clusters["fail"] = condor.submit(
            d,
            desc(
                "executable = fail\narguments = --exit-code 7\ninput = in.txt\n"
                "output = fail.out\nerror = fail.err\nlog = fail.log"
            ),
            "fail.sub",
        )
        r.clusters["rm"] = condor.submit(
            d,
            desc(
                "executable = worker\narguments = --cpu_time 40\ninput = in.txt\n"
                "output = rm.out\nerror = rm.err\nlog = rm.log"
            ),
            "rm.sub",
        )
        ids = list(r.clusters.values())
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            ads = condor.ads(ids)
            ads.update({k: {**v, "__history": True} for k, v in condor.in_history(ids).items()})
            r.ads = ads
            rm = ads.get((r.clusters["rm"], 0), {})
            if not r.removed_id and rm.get("JobStatus") == RUNNING:
                r.removed_id = rm.get("GridJobId", "").split()[-1]
                condor.tool("condor_rm", str(r.clusters["rm"]))
            if len(ads) == 5 + MANY and all(
                a.get("__history") or a.get("JobStatus") == HELD for a in ads.values()
            ):
                break
            time.sleep(1)
    finally:
        toml.write_text(original)
        stop_gridmanagers(condor)
    yield r
    condor.remove(ids)


def _need(need_htcondor, runs: Runs | None) -> Runs:
    need_htcondor(VERSION)
    assert runs is not None
    return runs


def test_batch_boinc_outputs_come_back(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    for i in range(2):
        ad = r.ads.get((r.clusters["upper"], i), {})
        assert ad.get("JobStatus") == DONE and ad.get("ExitCode") == 0, ad
        assert (r.jobdir / f"result.{i}.txt").read_text() == "BOINC VIA BLAH\n" * 2
    assert (r.jobdir / "out").read_text() == "BOINC VIA BLAH\n" * 2
    assert user_log_events(r.jobdir / "upper.log").count(5) == 2


def test_batch_boinc_job_names_its_own_project(
    need_htcondor, runs, emulator, other_project
) -> None:
    r = _need(need_htcondor, runs)
    ad = r.ads.get((r.clusters["other"], 0), {})
    assert ad.get("JobStatus") == DONE and ad.get("ExitCode") == 0, ad
    assert (r.jobdir / "other" / "other.txt").read_text() == "OTHER PROJECT\n"
    assert other_project.workunits() == 1, "the job did not run on the project it named"
    # the remote_ attributes reached blahpd without their prefix
    sent = r.condor.gahp_lines("<- 'BLAH_JOB_SUBMIT ", "other.txt")
    assert sent and f'BoincProjectUrl\\ =\\ "{other_project.url}"' in sent[-1], sent[-1:]


def test_batch_boinc_failed_job_completes_with_its_exit_code(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    ad = r.ads.get((r.clusters["fail"], 0), {})
    assert ad.get("JobStatus") == DONE and ad.get("ExitCode") == 7, ad
    assert "exit status 7" in (r.jobdir / "fail.err").read_text()


def test_batch_boinc_condor_rm_aborts(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    assert r.removed_id, "the job never ran"
    ad = r.ads.get((r.clusters["rm"], 0), {})
    assert ad.get("JobStatus") == REMOVED and ad.get("__history"), ad
    sent = r.condor.gahp_lines("<- 'BLAH_JOB_CANCEL ", f" {r.removed_id}'")
    assert sent, "no BLAH_JOB_CANCEL"
    gahp = sent[-1].split("GAHP[", 1)[1].split("]", 1)[0]
    reqid = sent[-1].split("BLAH_JOB_CANCEL ", 1)[1].split()[0]
    assert r.condor.gahp_lines(f"GAHP[{gahp}] -> '{reqid}' '0'"), "cancel failed"


def test_batch_boinc_queue_n_each_output_is_its_own(need_htcondor, runs) -> None:
    r = _need(need_htcondor, runs)
    for i in range(MANY):
        ad = r.ads.get((r.clusters["many"], i), {})
        assert ad.get("JobStatus") == DONE, ad
    got = {i: (r.jobdir / "many" / f"res.{i}").read_text() for i in range(MANY)}
    assert got == {i: f"JOB {i}\n" for i in range(MANY)}
