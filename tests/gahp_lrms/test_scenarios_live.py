"""The scenarios every job driver must pass on its real batch system, written once and run on
each: Slurm, Slurm's PBS wrappers (Torque-style pbs), the real OpenPBS, Grid Engine and LSF.

What a system does differently is data in its :class:`Live` record (its job-script directive,
its file-name placeholders, how a signal shows, how long one scheduling pass takes); checks of
what only one system shows (``qstat -j``, ``bjobs -l``) are its ``inspect`` function. The
system's own behaviours (suspension, accounting lag, history, bulk queries) stay in its
``test_<system>_live.py``. Each system's cases form their own xdist group (see
``tests/conftest.py``), so the systems run side by side as their modules did."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from lrms_helpers import ECHO_PROGRAM, TRICKY_ARGS, TRICKY_ENV, lsf_mkdir, sync_driver, wait_status

from gahp_lrms import Driver, DriverError, JobInfo, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def _sge_submitted(driver: Driver, jid: str) -> None:
    details = driver._run("qstat", "-j", jid).stdout
    assert "h_rt=300" in details and "h_vmem=1000M" in details
    assert "job_name:                   tricky_name____x_" in details and "pwned" not in details


def _lsf_submitted(driver: Driver, jid: str) -> None:
    details = driver._run("bjobs", "-l", jid).stdout
    assert "Job Name <tricky_name____x_>" in details and "pwned" not in details
    assert "Project <gahp.test>" in details and "Queue <normal>" in details
    assert "RUNLIMIT" in details and "5.0 min" in details
    assert "1024000 K" in details  # -M is in MB (1000 MB = 1024000 KB)


def _openpbs_submitted(driver: Driver, jid: str) -> None:
    listed = json.loads(driver._run("qstat", "-x", "-f", "-F", "json", jid).stdout)
    job = listed["Jobs"][jid]
    assert job["Resource_List"]["walltime"] == "00:05:00"
    assert job["Resource_List"]["select"] == "1:ncpus=1:mem=100mb"
    assert job["Job_Name"] == "tricky_name____x_" and job["queue"] == "workq"


@attrs.frozen
class Live:
    """One real batch system, as the shared scenarios see it."""

    name: str
    driver_fixture: str
    directive: str
    """The prefix of a job-script directive line, smuggled into arguments and environment."""
    placeholders: str = "%j"
    """Strings the system would expand in a file name (they must stay literal)."""
    job_dir_fixture: str = "tmp_path"
    """A directory the jobs' owner may write (LSF's jobs run as another user)."""
    submit_options: dict[str, object] = attrs.field(factory=lambda: {"memory_mb": 100})
    inspect: Callable[[Driver, str], None] | None = None
    """Checks of the submitted job in the system's own words."""
    killed: tuple[int | None, int | None] = (None, 9)
    """(exit_code, exit_signal) of a job whose shell is killed by SIGKILL."""
    pass_s: float = 0.5
    """Longer than one scheduling pass: a held job would have started by then."""
    not_held: str = "held"
    """What a release of a job that is not held says."""
    wallclock: bool = True
    """Whether the driver reports a job's wall-clock time."""
    timeout: float = 30.0

    def mkdir(self, path: Path) -> Path:
        return lsf_mkdir(path) if self.name == "lsf" else _mkdir(path)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


SYSTEMS = {
    live.name: live
    for live in (
        Live("slurm", "slurm_driver", "#SBATCH", wallclock=False),
        Live("pbs-wrappers", "pbs_driver", "#PBS", wallclock=False),
        Live(
            "openpbs",
            "openpbs_driver",
            "#PBS",
            "%j $PBS_JOBID",
            inspect=_openpbs_submitted,
            killed=(137, None),  # the job's shell reports 128 + 9
            pass_s=0.0,
            not_held="not held",
            timeout=60.0,
        ),
        Live(
            "sge",
            "sge_driver",
            "#$",
            "%j $JOB_ID",
            submit_options={"memory_mb": 1000},
            inspect=_sge_submitted,
            pass_s=1.5,
            not_held="not held",
        ),
        Live(
            "lsf",
            "lsf_driver",
            "#BSUB",
            "%J %I $LSB_JOBID",
            job_dir_fixture="lsf_job_dir",
            submit_options={"memory_mb": 1000, "queue": "normal", "project": "gahp.test"},
            inspect=_lsf_submitted,
            pass_s=2.5,
            not_held="not held",
        ),
    )
}


@attrs.frozen
class Case:
    """A scenario's view of one system: its record, a driver on it, a directory for jobs."""

    live: Live
    driver: Driver
    job_dir: Path

    def spec(self, script: str, **options: object) -> JobSpec:
        return JobSpec("/bin/sh", ("-c", script), workdir=str(self.job_dir), **options)

    def wait(self, jid: str, *wanted: JobStatus) -> JobInfo:
        return wait_status(self.driver, jid, *(wanted or DONE), timeout=self.live.timeout)

    def restarted(self) -> Driver:
        """A new driver object on the same state: a restarted server."""
        return sync_driver(self.driver.name, dict(self.driver.config), self.driver.state_dir)

    def started_sleeper(self, seconds: int = 60) -> str:
        """Submit a sleeping job and return once its process really runs (not just allocated)."""
        marker = self.job_dir / f"started-{time.monotonic_ns()}"
        jid = self.driver.submit(self.spec(f"touch '{marker}'; exec sleep {seconds}"))
        self.wait(jid, JobStatus.RUNNING)
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "job reported RUNNING but never started"
            time.sleep(0.05)
        return jid


def systems(*names: str) -> pytest.MarkDecorator:
    """Run a scenario on these systems only (all when none are named)."""
    return pytest.mark.parametrize("case", names or tuple(SYSTEMS), indirect=True)


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    live = SYSTEMS[request.param]
    driver = request.getfixturevalue(live.driver_fixture)
    yield Case(live, driver, request.getfixturevalue(live.job_dir_fixture))


@systems()
def test_ping(case: Case) -> None:
    case.driver.ping()


@systems()
def test_tricky_job_runs_with_everything_intact(case: Case) -> None:
    """Hostile strings everywhere: shell syntax, quotes, newlines, the system's own directive
    lines and file-name placeholders; none is interpreted, all arrive intact."""
    live = case.live
    echo = case.job_dir / "echo prog.py"
    echo.write_text(f"#!{PYTHON}\n{ECHO_PROGRAM}")
    echo.chmod(0o755)
    work = live.mkdir(case.job_dir / f"work dir {live.placeholders}")
    (work / "in put.txt").write_text("line 1\nline 2\n")
    args = (*TRICKY_ARGS, f"x\n{live.directive} -N pwned\ny", f"  {live.directive} -q nosuch")
    env = {**TRICKY_ENV, "GAHP_T_EXIT": "3", "GAHP_T_DIRECTIVE": f"a\n{live.directive} -q no\nb"}
    stderr = case.job_dir / f"err's {live.placeholders} $HOME.txt"
    spec = JobSpec(
        str(echo),
        args,
        environment=env,
        stdin="in put.txt",
        stdout=f"out {live.placeholders}.json",
        stderr=str(stderr),
        workdir=str(work),
        name="tricky name; $(x)",
        runtime_s=300,
        **live.submit_options,  # type: ignore[arg-type]
    )
    jid = case.driver.submit(spec)
    assert jid and " " not in jid
    if live.inspect is not None:
        live.inspect(case.driver, jid)
    info = case.wait(jid)
    assert info.status is JobStatus.COMPLETED
    assert (info.exit_code, info.exit_signal) == (3, None)
    assert info.worker_node
    got = json.loads((work / f"out {live.placeholders}.json").read_text())
    assert got["argv"] == list(args)
    assert got["env"] == env
    assert got["cwd"] == str(work)
    assert got["stdin"] == "line 1\nline 2\n"
    assert stderr.read_text() == "to stderr\n"


@systems()
def test_idle_running_completed_and_restart(case: Case) -> None:
    jid = case.driver.submit(case.spec("sleep 2; exit 0"))
    assert case.driver.status(jid).status in (JobStatus.IDLE, JobStatus.RUNNING)
    info = case.wait(jid, JobStatus.RUNNING)
    assert info.worker_node
    again = case.restarted()
    info = wait_status(again, jid, *DONE, timeout=case.live.timeout)
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, 0, None)
    if case.live.wallclock:
        assert info.wallclock_s is not None and info.wallclock_s >= 1


@systems()
def test_killed_by_signal(case: Case) -> None:
    info = case.wait(case.driver.submit(case.spec("kill -KILL $$")))
    assert info.status is JobStatus.COMPLETED
    assert (info.exit_code, info.exit_signal) == case.live.killed


@systems("slurm", "pbs-wrappers", "openpbs", "sge")  # LSF: more in test_lsf_live.py
def test_start_held_then_release(case: Case) -> None:
    marker = case.job_dir / "ran"
    jid = case.driver.submit(
        JobSpec("/bin/touch", (str(marker),), start_held=True, workdir=str(case.job_dir))
    )
    info = case.driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason
    case.driver.hold(jid)  # already held: fine
    time.sleep(case.live.pass_s)
    assert not marker.exists()
    case.driver.resume(jid)
    info = case.wait(jid)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    assert marker.exists()
    with pytest.raises(DriverError, match=case.live.not_held):
        case.driver.resume(jid)


@systems("slurm", "pbs-wrappers", "sge")  # OpenPBS, LSF: more in their own modules
def test_cancel_running_job(case: Case) -> None:
    jid = case.started_sleeper()
    case.driver.cancel(jid)
    info = wait_status(case.driver, jid, *DONE, timeout=15)
    assert info.status is JobStatus.REMOVED
    case.driver.cancel(jid)  # cancelling a removed job is a no-op
    assert case.restarted().status(jid).status is JobStatus.REMOVED


@systems()
def test_cancel_of_finished_job_changes_nothing(case: Case) -> None:
    jid = case.driver.submit(case.spec("exit 2"))
    info = case.wait(jid)
    case.driver.cancel(jid)
    again = case.restarted().status(jid)
    assert (again.status, again.exit_code) == (JobStatus.COMPLETED, 2)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 2)


@systems("slurm", "pbs-wrappers")  # the others: more in their own modules
def test_unknown_job_gets_definite_answer(case: Case) -> None:
    info = case.driver.status("987654")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "no longer known" in info.exit_reason
    case.driver.cancel("987654")


@systems("slurm", "pbs-wrappers", "openpbs", "sge")  # LSF: more in test_lsf_live.py
def test_malformed_id(case: Case) -> None:
    for bad in ("1; rm -rf /", "-u", ""):
        with pytest.raises(DriverError, match="malformed"):
            case.driver.status(bad)
    with pytest.raises(DriverError, match="malformed"):
        case.driver.cancel("-u")


@systems("slurm", "pbs-wrappers", "openpbs")  # SGE's and LSF's slots: their own modules
def test_count_runs_instances(case: Case) -> None:
    out = case.job_dir / "out"
    info = case.wait(case.driver.submit(case.spec("echo $$; exit 0", stdout=str(out), count=2)))
    assert info.exit_code == 0
    assert len(out.read_text().split()) == 2
