"""The real gridmanager (HTCondor 9.12 and 25.0) and blahpd's status registry: while the Slurm
controller is down, jobs of `grid_resource = batch slurm` are not held (blahpd answers their
last known state), and once it is back they finish with their exact exit code.

The outage (slurmctld stopped for about 30 s) is always ended: slurmctld is started again
with its saved state (its jobs kept) and the test waits until it answers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from htcondor_kit import DONE, HELD, RUNNING, VERSIONS, user_log_events, wait_for

OUTAGE_S = 30.0
JOB = (
    "universe = grid\ngrid_resource = batch slurm\nshould_transfer_files = NO\n"
    "executable = /bin/sh\narguments = \"-c 'sleep 20; exit 7'\"\n"
    "output = out.$(Process)\nerror = err.$(Process)\nlog = job.log\nqueue 2\n"
)


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


def _controller_answers(env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run(["scontrol", "ping"], env=env, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def test_controller_outage_holds_no_job(need_htcondor, jobdirs, batch_env) -> None:
    env = batch_env("slurm")
    conf = env["SLURM_CONF"]
    condors = [need_htcondor(v) for v in VERSIONS]
    clusters = {}
    for condor in condors:
        jobdir = jobdirs(condor, "registry-outage")
        clusters[condor] = (jobdir, condor.submit(jobdir, JOB))
    try:
        for condor, (_, cluster) in clusters.items():
            wait_for(
                lambda c=condor, k=cluster: len(ads := c.ads([k])) == 2
                and all(a.get("JobStatus") == RUNNING for a in ads.values()),
                180,
                f"{condor}: both jobs running",
            )
        pid = _slurmctld_pid(conf)
        assert pid is not None, "cannot find slurmctld's pid"
        marks = {c: _size(c.gridmanager_log) for c in condors}
        os.kill(pid, signal.SIGTERM)
        try:
            deadline = time.monotonic() + 20
            while not _gone(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            down = time.monotonic()
            while time.monotonic() - down < OUTAGE_S:
                for condor, (_, cluster) in clusters.items():
                    for key, ad in condor.ads([cluster]).items():
                        assert ad.get("JobStatus") != HELD, (condor, key, ad.get("HoldReason"))
                time.sleep(2)
            answered = {c: _gahp_results(c.gridmanager_log, marks[c]) for c in condors}
        finally:
            subprocess.run(["/usr/sbin/slurmctld", "-f", conf], env=env, check=True, timeout=60)
            deadline = time.monotonic() + 90
            while not _controller_answers(env):
                assert time.monotonic() < deadline, "slurmctld did not come back"
                time.sleep(0.5)
        for condor, lines in answered.items():
            # blahpd answered the gridmanager's status requests during the outage, and none
            # with an error (the per-job path's scontrol, or an outage beyond the limit).
            assert any("JobStatus = 2" in line for line in lines), (condor, lines[-5:])
            failed = [ln for ln in lines if "did not answer" in ln or "has not answered" in ln]
            assert not failed, (condor, failed[:3])
        for condor, (jobdir, cluster) in clusters.items():
            ads = wait_for(
                lambda c=condor, k=cluster: (h := c.in_history([k])) and len(h) == 2 and h,
                240,
                f"{condor}: both jobs finished",
            )
            for key, ad in ads.items():
                assert (ad.get("JobStatus"), ad.get("ExitCode")) == (DONE, 7), (condor, key, ad)
            assert 12 not in user_log_events(jobdir / "job.log")  # never held
    finally:
        for condor, (_, cluster) in clusters.items():
            condor.remove([cluster])
