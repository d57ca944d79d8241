"""The GAHP under adverse conditions, with the real gridmanager:

* blahpd whose log file cannot be opened still starts and runs jobs (both versions);
* blahpd killed while its job runs: the schedd starts a new gridmanager (SCHEDD_INTERVAL), whose
  new blahpd recovers the same batch job and its outcome (both versions);
* boinc-gahp killed while its job runs (9.12): the outcome is recovered from the project.

The first phase runs on both versions at once, then the second.  The wrapper written by
`.ci/htcondor-up.sh` takes its log path from bin/blahpd.log-path when that file exists.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import (
    DONE,
    HELD,
    RUNNING,
    VERSIONS,
    Emulator,
    HTCondor,
    alive,
    gahp_pid,
    owned,
    stop_gridmanagers,
)

PHASE_S = 120.0


@dataclass
class Case:
    """One version's jobs in both phases."""

    condor: HTCondor
    jobdir: Path
    clusters: dict[str, int] = field(default_factory=dict)
    ads: dict[str, dict[str, Any]] = field(default_factory=dict)
    first_grid_id: dict[str, str] = field(default_factory=dict)
    killed: dict[str, int] = field(default_factory=dict)
    unwritable_log: str = ""

    def refresh(self) -> None:
        ids = list(self.clusters.values())
        ads = self.condor.ads(ids)
        ads.update({k: {**v, "__history": True} for k, v in self.condor.in_history(ids).items()})
        for key, cluster in self.clusters.items():
            if (cluster, 0) in ads:
                self.ads[key] = ads[(cluster, 0)]

    def settled(self, keys: list[str]) -> bool:
        return all(
            self.ads.get(k, {}).get("__history") or self.ads.get(k, {}).get("JobStatus") == HELD
            for k in keys
        )


def _grid(body: str, resource: str = "batch fork") -> str:
    return f"universe = grid\ngrid_resource = {resource}\nshould_transfer_files = NO\n{body}\n"


@pytest.fixture(scope="module")
def cases(htcondors, jobdirs, emulator: Emulator) -> Iterator[dict[str, Case]]:
    out: dict[str, Case] = {}
    for version in VERSIONS:
        condor = htcondors[version][0]
        if condor is not None:
            out[version] = Case(condor, jobdirs(condor, "restarts"))
    switches: list[Path] = []
    try:
        # ---- phase 1: blahpd's log cannot be opened
        for case in out.values():
            c = case.condor
            locked = c.dir / "unwritable"
            locked.mkdir(mode=0o755, exist_ok=True)
            os.chown(locked, 0, 0)
            case.unwritable_log = str(locked / "blahpd.log")
            switch = c.dir / "bin" / "blahpd.log-path"
            switch.write_text(case.unwritable_log + "\n")
            switch.chmod(0o644)
            switches.append(switch)
            stop_gridmanagers(c)
            case.clusters["nolog"] = c.submit(
                case.jobdir,
                _grid(
                    "executable = /bin/echo\narguments = logless\noutput = nolog.out\n"
                    "error = nolog.err\nlog = nolog.log\nqueue"
                ),
                "nolog.sub",
            )
        _drive(out, ["nolog"])
        for switch in switches:
            switch.unlink()
        switches.clear()
        for case in out.values():
            stop_gridmanagers(case.condor)

        # ---- phase 2: the GAHP is killed while its job runs
        for version, case in out.items():
            c = case.condor
            case.clusters["kill"] = c.submit(
                case.jobdir,
                _grid(
                    "executable = /bin/sh\narguments = \"-c 'sleep 25; echo survived; exit 4'\"\n"
                    "output = kill.out\nerror = kill.err\nlog = kill.log\nqueue"
                ),
                "kill.sub",
            )
            if version == "9.12.0":
                owned(c, case.jobdir / "in", "boinc input\n")
                owned(c, case.jobdir / "auth", emulator.authenticator + "\n")
                case.clusters["boinc"] = c.submit(
                    case.jobdir,
                    (
                        f"universe = grid\ngrid_resource = boinc {emulator.url}\n"
                        "boinc_authenticator_file = auth\nexecutable = worker\n"
                        "arguments = --cpu_time 15\ntransfer_input_files = in\n"
                        'transfer_output_files = out\ntransfer_output_remaps = "out = boinc.out"\n'
                        "log = boinc.log\nqueue\n"
                    ),
                    "boinc.sub",
                )
        _drive(out, ["kill", "boinc"], kill=True)
        yield out
    finally:
        for switch in switches:
            switch.unlink(missing_ok=True)
        for case in out.values():
            case.condor.remove(case.clusters.values())


def _drive(cases: dict[str, Case], keys: list[str], kill: bool = False) -> None:
    """Poll until these jobs settle; with ``kill``, SIGKILL each job's GAHP once it runs."""
    end = time.monotonic() + PHASE_S
    while time.monotonic() < end:
        for case in cases.values():
            case.refresh()
            for key in keys:
                ad = case.ads.get(key, {})
                if not kill or key in case.killed or ad.get("JobStatus") != RUNNING:
                    continue
                if key == "kill" and "boinc" in case.clusters and "boinc" not in case.killed:
                    continue  # one GAHP death at a time: boinc-gahp's first (9.12)
                grid_id = ad.get("GridJobId", "")
                case.first_grid_id[key] = grid_id
                if key == "boinc":
                    batch = grid_id.split()[-1].rsplit("#", 1)[0]
                    pid = gahp_pid(case.condor, batch)
                else:  # the GAHP that last spoke of the job (a dead one's pid is skipped)
                    pid = gahp_pid(case.condor, grid_id.split()[-1])
                if pid and alive(pid):
                    os.kill(pid, signal.SIGKILL)
                    case.killed[key] = pid
        if all(case.settled([k for k in keys if k in case.clusters]) for case in cases.values()):
            return
        time.sleep(1)


def _case(cases, need_htcondor, version: str) -> Case:
    need_htcondor(version)
    return cases[version]


@pytest.mark.parametrize("version", VERSIONS)
def test_jobs_run_when_the_gahp_log_cannot_be_opened(cases, need_htcondor, version) -> None:
    case = _case(cases, need_htcondor, version)
    ad = case.ads.get("nolog", {})
    assert ad.get("JobStatus") == DONE and ad.get("ExitCode") == 0, ad
    assert (case.jobdir / "nolog.out").read_text() == "logless\n"
    assert not Path(case.unwritable_log).exists()
    blah_id = ad["GridJobId"].split()[-1]
    pid = gahp_pid(case.condor, "-> '", f"'{blah_id}'")
    assert pid, "the submit result is not in the GridmanagerLog"
    # the GAHP that ran the job said on stderr (relayed into the GridmanagerLog) why it logs
    # nowhere: it was the one started with the unwritable --log
    warning = case.condor.gahp_lines(f"GAHP[{pid}] (stderr) -> ", case.unwritable_log)
    assert warning and "cannot open log file" in warning[-1], "no stderr warning from the GAHP"


@pytest.mark.parametrize("version", VERSIONS)
def test_blahpd_killed_mid_job_outcome_recovered(cases, need_htcondor, version) -> None:
    case = _case(cases, need_htcondor, version)
    assert "kill" in case.killed, f"the job never ran: {case.ads.get('kill')}"
    ad = case.ads["kill"]
    assert ad.get("__history") and ad.get("JobStatus") == DONE, ad
    assert ad.get("ExitCode") == 4, ad
    assert ad["GridJobId"] == case.first_grid_id["kill"], "the job was submitted again"
    assert (case.jobdir / "kill.out").read_text() == "survived\n"
    blah_id = ad["GridJobId"].split()[-1]
    pollers = {
        int(ln.split("GAHP[", 1)[1].split("]", 1)[0])
        for ln in case.condor.gahp_lines("<- 'BLAH_JOB_STATUS ", f" {blah_id}'")
    }
    assert pollers - {case.killed["kill"]}, "no new blahpd polled the job"


def test_boinc_gahp_killed_mid_job_outcome_recovered(cases, need_htcondor) -> None:
    case = _case(cases, need_htcondor, "9.12.0")
    assert "boinc" in case.killed, f"the job never ran: {case.ads.get('boinc')}"
    ad = case.ads["boinc"]
    assert ad.get("__history") and ad.get("JobStatus") == DONE, ad
    assert (case.jobdir / "boinc.out").read_text() == "BOINC INPUT\n"
