"""blahpd on the live Slurm: submit and status throughput for N jobs.

All N BLAH_JOB_SUBMIT requests are pipelined (the server runs them in its worker pool),
then all N BLAH_JOB_STATUS requests; each phase is timed until its last result arrives.

Usage: python benchmarks/blah_slurm.py [--jobs 500] [--workers 8]  (needs Slurm up:
bash .ci/slurm-up.sh; SLURM_CONF is read from the environment or /tmp/gahp-slurm)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from gahp_core import GahpClient


def phase(c: GahpClient, command: str, args: list[str]) -> tuple[float, dict[str, list[str]]]:
    ids = []
    t0 = time.perf_counter()
    payload = []
    for arg in args:
        rid = c.reqid()
        ids.append(rid)
        payload.append(f"{command} {rid} {arg}\r\n".encode())
    c.send_raw(b"".join(payload))
    for _ in ids:
        if c.read_line(timeout=120) != "S":
            raise SystemExit(f"{command} not accepted")
    got = c.wait_results(ids, timeout=900, poll=0.05)
    return time.perf_counter() - t0, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--workers", type=int, default=8)
    a = ap.parse_args()
    env = dict(os.environ)
    conf = Path(os.environ.get("GAHP_SLURM_DIR", "/tmp/gahp-slurm")) / "slurm.conf"
    if "SLURM_CONF" not in env and conf.exists():
        env["SLURM_CONF"] = str(conf)
    work = Path(tempfile.mkdtemp(prefix="blah-bench-"))
    ad = (
        f'[\\ Cmd\\ =\\ "/bin/true";\\ Iwd\\ =\\ "{work}";\\ Out\\ =\\ "/dev/null";'
        f'\\ Err\\ =\\ "/dev/null";\\ gridtype\\ =\\ "slurm"\\ ]'
    )
    c = GahpClient(
        [
            sys.executable,
            "-m",
            "gahp_blah",
            "--state-dir",
            str(work / "state"),
            "--workers",
            str(a.workers),
        ],
        env=env,
    )
    t_submit, got = phase(c, "BLAH_JOB_SUBMIT", [ad] * a.jobs)
    failed = [v for v in got.values() if v[0] != "0"]
    if failed:
        raise SystemExit(f"{len(failed)} submissions failed, e.g. {failed[0]}")
    jobids = [v[2] for v in got.values()]
    t_status, got = phase(c, "BLAH_JOB_STATUS", jobids)
    bad = [v for v in got.values() if v[0] != "0"]
    c.quit()
    print(
        f"blahpd on Slurm, {a.jobs} jobs, {a.workers} workers: "
        f"submit {a.jobs / t_submit:.1f} jobs/s ({t_submit:.1f} s), "
        f"status {a.jobs / t_status:.1f} queries/s ({t_status:.1f} s), "
        f"{len(bad)} status errors"
    )
    subprocess_cancel(jobids, env)


def subprocess_cancel(jobids: list[str], env: dict[str, str]) -> None:
    """Leave the shared Slurm clean: cancel whatever is still queued."""
    import subprocess

    natives = [j.rsplit("/", 1)[1] for j in jobids]
    for i in range(0, len(natives), 200):
        subprocess.run(["scancel", *natives[i : i + 200]], env=env, capture_output=True, timeout=60)


if __name__ == "__main__":
    main()
