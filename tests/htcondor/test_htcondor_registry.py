"""The real gridmanager (HTCondor 9.12 and 25.0) and blahpd's status registry: while the batch
system's server is down, jobs of `grid_resource = batch slurm|pbs|lsf` are not held (blahpd
answers their last known state), and once it is back they finish with their exact exit code.

The outages: slurmctld stopped for about 30 s (started again with its saved state, its jobs
kept); OpenPBS's pbs_server stopped (``qterm -t quick``: running jobs go on) for 60 s; LSF's
mbatchd frozen (SIGSTOP: its sbatchd would restart a stopped one at once) for 60 s. Each is
always ended, and the test waits until the server answers again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from htcondor_kit import DONE, HELD, RUNNING, VERSIONS, user_log_events, wait_for
from live_services import lsf_bin_dir

JOB = (
    "universe = grid\ngrid_resource = batch {system}\nshould_transfer_files = NO\n"
    "executable = /bin/sh\narguments = \"-c 'sleep 20; exit 7'\"\n"
    "output = out.$(Process)\nerror = err.$(Process)\nlog = job.log\nqueue {n}\n"
)
OUTAGE_S = {"slurm": 30.0, "pbs": 60.0, "lsf": 60.0}
JOBS = {"slurm": 2, "pbs": 1, "lsf": 2}  # per HTCondor version (this OpenPBS has 2 CPUs)


def _slurmctld_pid(conf: str) -> int | None:
    try:
        pid = int((Path(conf).parent / "slurmctld.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return any(line.startswith("State:") and "Z" in line for line in fh)
    except OSError:
        return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _gahp_results(path: Path, offset: int) -> list[str]:
    """The GAHP result lines (``GAHP[pid] ->``) the gridmanager logged after ``offset``."""
    try:
        with open(path, errors="replace") as fh:
            fh.seek(offset if offset <= _size(path) else 0)  # 0: rotated meanwhile
            text = fh.read()
    except OSError:
        return []
    return [line for line in text.splitlines() if "GAHP[" in line and "] -> " in line]


def _answers(argv: list[str], env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


class Outage:
    """Stop and start one batch system's server; ``answers`` tells when it is back."""

    def __init__(self, system: str, env: dict[str, str]) -> None:
        self.system, self.env = system, env
        self.pid: int | None = None

    def stop(self) -> None:
        if self.system == "slurm":
            self.pid = _slurmctld_pid(self.env["SLURM_CONF"])
            assert self.pid is not None, "cannot find slurmctld's pid"
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while not _gone(self.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        elif self.system == "pbs":
            bin_dir = Path(self.env["GAHP_PBS_BIN_DIR"])
            subprocess.run(
                [str(bin_dir / "qterm"), "-t", "quick"], env=self.env, check=True, timeout=60
            )
            deadline = time.monotonic() + 20
            while self.answers() and time.monotonic() < deadline:
                time.sleep(0.2)
        else:
            self.pid = _mbatchd_pid()
            assert self.pid is not None, "cannot find mbatchd's pid"
            os.kill(self.pid, signal.SIGSTOP)

    def start(self) -> None:
        if self.system == "slurm":
            conf = self.env["SLURM_CONF"]
            subprocess.run(
                ["/usr/sbin/slurmctld", "-f", conf], env=self.env, check=True, timeout=60
            )
        elif self.system == "pbs":
            sbin = Path(self.env["GAHP_PBS_BIN_DIR"]).parent / "sbin"
            subprocess.run(
                [str(sbin / "pbs_server")],
                env=self.env,
                check=True,
                timeout=60,
                capture_output=True,
            )
        elif self.pid is not None:
            os.kill(self.pid, signal.SIGCONT)

    def answers(self) -> bool:
        if self.system == "slurm":
            return _answers(["scontrol", "ping"], self.env)
        if self.system == "pbs":
            return _answers([str(Path(self.env["GAHP_PBS_BIN_DIR"]) / "qstat"), "-B"], self.env)
        bin_dir = lsf_bin_dir(self.env["LSF_ENVDIR"]) or ""
        return _answers([str(Path(bin_dir) / "bqueues")], self.env)


def _mbatchd_pid() -> int | None:
    """The pid of LSF's mbatchd (the process whose executable is named mbatchd)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "exe")).name == "mbatchd":
                    return int(entry.name)
            except OSError:
                continue
    return None


@pytest.mark.batch_outage
@pytest.mark.parametrize("outage", ["slurm", "pbs+lsf"])
def test_controller_outage_holds_no_job(need_htcondor, jobdirs, batch_env, outage) -> None:
    """Each system's server down while its jobs run (OpenPBS's and LSF's at once)."""
    systems = outage.split("+")
    envs = {system: batch_env(system) for system in systems}
    condors = [need_htcondor(v) for v in VERSIONS]
    clusters = {}  # (condor, system) -> (jobdir, cluster)
    for condor in condors:
        for system in systems:
            jobdir = jobdirs(condor, f"registry-outage-{system}")
            job = JOB.format(system=system, n=JOBS[system])
            clusters[(condor, system)] = (jobdir, condor.submit(jobdir, job))
    outages = [Outage(system, envs[system] or {}) for system in systems]
    try:
        for (condor, system), (_, cluster) in clusters.items():
            wait_for(
                lambda c=condor, k=cluster, n=JOBS[system]: (
                    len(ads := c.ads([k])) == n
                    and all(a.get("JobStatus") == RUNNING for a in ads.values())
                ),
                180,
                f"{condor}: the {system} jobs running",
            )
        marks = {c: _size(c.gridmanager_log) for c in condors}
        try:
            for down_one in outages:
                down_one.stop()
            down = time.monotonic()
            while time.monotonic() - down < max(OUTAGE_S[s] for s in systems):
                for (condor, _system), (_, cluster) in clusters.items():
                    for key, ad in condor.ads([cluster]).items():
                        assert ad.get("JobStatus") != HELD, (condor, key, ad.get("HoldReason"))
                time.sleep(2)
            answered = {c: _gahp_results(c.gridmanager_log, marks[c]) for c in condors}
        finally:
            for back in outages:
                back.start()
            deadline = time.monotonic() + 90
            for back in outages:
                while not back.answers():
                    assert time.monotonic() < deadline, f"{back.system}'s server did not come back"
                    time.sleep(0.5)
        for condor, lines in answered.items():
            # blahpd answered the gridmanager's status requests during the outage, and none
            # with an error (the per-job path's command, or an outage beyond the limit).
            assert any("JobStatus = 2" in line for line in lines), (condor, lines[-5:])
            failed = [
                ln
                for ln in lines
                if "did not answer" in ln or "has not answered" in ln or "failed (exit status" in ln
            ]
            assert not failed, (condor, failed[:3])
        for (condor, system), (jobdir, cluster) in clusters.items():
            ads = wait_for(
                lambda c=condor, k=cluster, n=JOBS[system]: (
                    (h := c.in_history([k])) and len(h) == n and h
                ),
                240,
                f"{condor}: the {system} jobs finished",
            )
            for key, ad in ads.items():
                assert (ad.get("JobStatus"), ad.get("ExitCode")) == (DONE, 7), (condor, key, ad)
            assert 12 not in user_log_events(jobdir / "job.log")  # never held
    finally:
        for (condor, _system), (_, cluster) in clusters.items():
            condor.remove([cluster])
