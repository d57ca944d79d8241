"""The sequences every command-line driver inherits from CommandDriver (submit, cancel), run
against stand-in commands: each system's job-id output, "unknown job" message and
cancellation mark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from lrms_helpers import sync_driver

from gahp_lrms import DriverError, JobSpec
from gahp_lrms.base import CommandDriver

_SGE_XML = (
    "<?xml version='1.0'?><job_info><queue_info><job_list state='running'>"
    "<JB_job_number>5</JB_job_number><state>r</state><queue_name>all.q@vm</queue_name>"
    "</job_list></queue_info></job_info>"
)
_BJOBS = '{"RECORDS":[{"JOBID":"5","STAT":"RUN","EXEC_HOST":"vm"}]}'
_QSTAT_PBSPRO = (
    'case "$1" in --version) echo "pbs_version = 23.06.06" ;;'
    ' *) echo \'{"Jobs":{"5.vm":{"job_state":"R"}}}\' ;; esac'
)


@attrs.frozen
class System:
    """A batch system as its driver sees it: the stand-ins for its status commands, its
    submit command and what it prints, its cancel command and its "unknown job" message."""

    name: str
    job: str
    status: dict[str, str]
    submit: str
    printed: str
    cancel: str
    unknown: str
    marks: bool  # records cancelled jobs in state_dir/cancelled


SYSTEMS = [
    System(
        "slurm",
        "5",
        {"scontrol": "echo JobId=5 JobState=CANCELLED"},
        "sbatch",
        "5;cluster",
        "scancel",
        "scancel: error: Kill job error on job id 5: Invalid job id specified",
        False,
    ),
    System(
        "pbs",
        "5.vm",
        {"qstat": _QSTAT_PBSPRO},
        "qsub",
        "5.vm",
        "qdel",
        "qdel: Unknown Job Id 5.vm",
        True,
    ),
    System(
        "sge",
        "5",
        {"qstat": f'echo "{_SGE_XML}"'},
        "qsub",
        "5",
        "qdel",
        'denied: job "5" does not exist',
        True,
    ),
    System(
        "lsf",
        "5",
        {"bjobs": f"echo '{_BJOBS}'"},
        "bsub",
        "Job <5> is submitted to default queue <normal>.",
        "bkill",
        "Job <5>: No matching job found",
        True,
    ),
]
_IDS = [s.name for s in SYSTEMS]
_PBS_EXITS = {"qdel: Unknown Job Id 5.vm": 153}  # PBS's qdel speaks through its exit status


def _driver(tmp_path: Path, system: System, commands: dict[str, str]) -> CommandDriver:
    """The driver of ``system`` on stand-in commands (each logs its arguments, working
    directory and standard input to ``tmp_path/calls``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in {**system.status, **commands}.items():
        path = bin_dir / name
        path.write_text(
            f"#!/bin/sh\n{{ echo \"{name} $* @ $PWD\"; cat; }} >> '{tmp_path}/calls'\n{body}\n"
        )
        path.chmod(0o755)
    config: dict[str, Any] = {"bin_dir": str(bin_dir), "cancel_wait_s": 1}
    if system.name == "pbs":
        config["flavor"] = "pbspro"
    driver = sync_driver(system.name, config, tmp_path / "state")
    assert isinstance(driver.blocking, CommandDriver)
    return driver


def _fails(message: str, status: int = 1) -> str:
    return f"echo '{message}' >&2; exit {status}"


def _calls(tmp_path: Path) -> str:
    return (tmp_path / "calls").read_text()


# ---------------------------------------------------------------------- submit
@pytest.mark.parametrize("system", SYSTEMS, ids=_IDS)
def test_submit_runs_the_submit_command_and_tracks_the_job(system, tmp_path):
    driver = _driver(tmp_path, system, {system.submit: f"echo '{system.printed}'"})
    if system.marks:
        driver._record("cancelled", system.job)  # of an earlier job with this number
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert driver.submit(JobSpec("/bin/true", workdir=str(workdir))) == system.job
    assert not driver._cancelled(system.job)  # a new job, not the cancelled one
    assert driver.statuses.registry is not None and system.job in driver.statuses.registry.tracked()
    assert f"{system.submit} " in _calls(tmp_path)
    if system.name == "lsf":  # the job runs where bsub does
        assert f"@ {workdir}\n" in _calls(tmp_path)
    if system.name == "pbs":  # qsub gets the script as a file, deleted afterwards
        assert not list((tmp_path / "state" / "pbs").iterdir())


@pytest.mark.parametrize("system", SYSTEMS, ids=_IDS)
def test_submit_output_without_a_job_id_is_an_error(system, tmp_path):
    driver = _driver(tmp_path, system, {system.submit: "echo 'all is well'"})
    with pytest.raises(DriverError, match=f"^{system.submit} printed no job id: 'all is well'"):
        driver.submit(JobSpec("/bin/true"))


@pytest.mark.parametrize("system", SYSTEMS, ids=_IDS)
def test_a_failing_submit_command_is_an_error(system, tmp_path):
    driver = _driver(tmp_path, system, {system.submit: _fails("no such queue")})
    with pytest.raises(DriverError, match=f"^{system.submit} failed .*no such queue"):
        driver.submit(JobSpec("/bin/true"))


def test_a_relative_working_directory_is_made_absolute(tmp_path, monkeypatch):
    slurm = SYSTEMS[0]
    driver = _driver(tmp_path, slurm, {"sbatch": "echo 5"})
    monkeypatch.chdir(tmp_path)
    driver.submit(JobSpec("/bin/true", workdir="work"))
    driver.submit(JobSpec("/bin/true"))  # none: sbatch's own (the server's)
    first, second = (line for line in _calls(tmp_path).splitlines() if line.startswith("sbatch"))
    assert f" -D {tmp_path}/work " in first and " -D " not in second


# ---------------------------------------------------------------------- cancel
@pytest.mark.parametrize("system", SYSTEMS, ids=_IDS)
def test_cancel_of_a_job_the_system_does_not_know_is_no_error(system, tmp_path):
    status = _PBS_EXITS.get(system.unknown, 1)
    driver = _driver(tmp_path, system, {system.cancel: _fails(system.unknown, status)})
    driver.cancel(system.job)
    assert f"{system.cancel} {system.job} " in _calls(tmp_path)
    assert not driver._cancelled(system.job)  # it ended by itself: not cancelled


@pytest.mark.parametrize("system", SYSTEMS, ids=_IDS)
def test_a_cancel_command_failing_otherwise_is_an_error(system, tmp_path):
    driver = _driver(tmp_path, system, {system.cancel: _fails("permission denied")})
    with pytest.raises(DriverError, match=f"^{system.cancel} failed .*permission denied"):
        driver.cancel(system.job)
    # Grid Engine keeps its mark (a job being deleted already stays REMOVED).
    assert driver._cancelled(system.job) is (system.name == "sge")


@pytest.mark.parametrize("system", SYSTEMS, ids=_IDS)
def test_a_cancelled_job_is_marked_where_the_system_needs_it(system, tmp_path):
    driver = _driver(tmp_path, system, {system.cancel: "exit 0"})
    driver.cancel(system.job)
    assert driver._cancelled(system.job) is system.marks


def test_a_malformed_id_is_refused_before_any_command(tmp_path):
    for system in SYSTEMS:
        driver = _driver(tmp_path / system.name, system, {system.cancel: "exit 0"})
        with pytest.raises(DriverError, match="malformed"):
            driver.cancel("5; rm -rf /")
        assert not (tmp_path / system.name / "calls").exists()
