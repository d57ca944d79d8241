"""blahpd beside HTCondor's C blahpd on the remote path (over SSH), back to back in one run.

Needs `.ci/remote-up.sh` (its env file, ``$GAHP_REMOTE_DIR/env``, default /tmp/gahp-remote)
and Slurm.  Both servers are in the cluster account's ``~/bosco/glite``, installed by
``condor_remote_cluster`` from the shared tarball: the C blahpd as ``bin/blahpd.orig`` (moved
aside by ``blahpd install-remote``; it reads the installed ``etc/blah.config``), ours as
``bin/blahpd``.

1. STATUS: each blahpd is started over SSH exactly as ``remote_gahp`` starts it (``ssh
   user@host /bin/bash -l -c 'BLAHPD_LOCATION=~/bosco/glite ... ~/bosco/glite/bin/<it>'``),
   submits N ``sleep 3600`` jobs on Slurm (held with ``scontrol hold`` at once, so they
   take no CPUs), then two rounds of N BLAH_JOB_STATUS, 50 in flight: the first, then one
   6 s later.  Wall time and slurmctld RPCs of each round (``sdiag`` difference; others'
   use of the controller adds noise).  All jobs are cancelled.
2. BURST: J short jobs through the access point's HTCondor 25.0.13 and the real
   ``remote_gahp`` + ``condor_ft-gahp`` (an input file each), ``grid_resource = batch slurm
   user@127.0.0.1:<port>`` for ours, the same ``--rgahp-script ~/bosco/glite/bin/blahpd.orig``
   for the C one: submit to the last job in the history, the remote BLAH server's CPU (its
   process tree, sampled from ``/proc``), and how many jobs ended with their true exit code.

Usage: python benchmarks/blah_remote_vs_c_blahp.py [--small] [--n N] [--jobs J]
           [--parts status,burst]
"""

from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "htcondor"))

import blah_status_scale as scale  # noqa: E402
from blah_vs_c_blahp import Died, pipelined, ratio, table  # noqa: E402
from htcondor_kit import DONE, HTCondor, read_env  # noqa: E402

from gahp_core import GahpClient  # noqa: E402

C = "C blahpd"
OURS = "ours"
SCRIPT = {C: "blahpd.orig", OURS: "blahpd"}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Remote:
    condor: HTCondor
    user: str
    home: Path
    resource: str
    port: int


def find_remote() -> Remote | None:
    path = Path(os.environ.get("GAHP_REMOTE_DIR", "/tmp/gahp-remote")) / "env"
    if not path.exists() or os.geteuid() != 0:
        return None
    env = read_env(path)
    condor = HTCondor(env)
    if not condor.answers():
        return None
    return Remote(
        condor,
        env["GAHP_REMOTE_USER"],
        Path(env["GAHP_REMOTE_HOME"]),
        env["GAHP_REMOTE_RESOURCE"],
        int(env["GAHP_REMOTE_PORT"]),
    )


def ssh_blahpd(remote: Remote, side: str) -> GahpClient:
    """A blahpd started the way remote_gahp starts it."""
    glite = "~/bosco/glite"
    command = f"'BLAHPD_LOCATION={glite} GLITE_LOCATION={glite} {glite}/bin/{SCRIPT[side]}'"
    return GahpClient(
        [
            "runuser",
            "-u",
            remote.condor.owner,
            "--",
            "ssh",
            "-p",
            str(remote.port),
            "-o",
            "BatchMode=yes",
            f"{remote.user}@127.0.0.1",
            "/bin/bash",
            "-l",
            "-c",
            command,
        ]
    )


# ---------------------------------------------------------------------- part 1: status
@dataclass
class StatusRow:
    side: str
    n: int
    submitted: int = 0
    submit_s: float = 0.0
    first_s: float = 0.0
    first_rpcs: int = 0
    second_s: float = 0.0
    second_rpcs: int = 0
    answered: int = 0
    note: str = ""


def _rpcs(env: dict[str, str], before: dict[str, int]) -> int:
    after = scale.sdiag_counts(env)
    after.subtract(before)
    return sum(after.values())


def status_side(remote: Remote, env: dict[str, str], side: str, n: int) -> StatusRow:
    row = StatusRow(side, n)
    ad = (
        f'[ Cmd = "/bin/sleep"; Args = "3600"; Iwd = "{remote.home}"; Out = "/dev/null"; '
        f'Err = "/dev/null"; gridtype = "slurm" ]'
    )
    c = ssh_blahpd(remote, side)
    natives: list[str] = []
    try:
        row.submit_s, got, _ = pipelined(c, "BLAH_JOB_SUBMIT", [ad] * n)
        jobids = [r[2] for r in got if r and r[0] == "0" and len(r) > 2]
        natives = [j.rsplit("/", 1)[-1] for j in jobids]
        row.submitted = len(jobids)
        if natives:
            subprocess.run(
                ["scontrol", "hold", ",".join(natives)],
                env=env,
                capture_output=True,
                timeout=60,
                check=False,
            )
        if not jobids:
            row.note = f"no job submitted: {got[:1]}"
            return row
        before = scale.sdiag_counts(env)
        row.first_s, first, _ = pipelined(c, "BLAH_JOB_STATUS", jobids)
        row.first_rpcs = _rpcs(env, before)
        time.sleep(6)
        before = scale.sdiag_counts(env)
        row.second_s, second, _ = pipelined(c, "BLAH_JOB_STATUS", jobids)
        row.second_rpcs = _rpcs(env, before)
        row.answered = sum(1 for r in first + second if r and r[0] == "0")
        c.quit(timeout=10)
    except Died as e:
        row.note = f"died: {e}"
    finally:
        c.close()
        for i in range(0, len(natives), 200):
            subprocess.run(
                ["scancel", *natives[i : i + 200]],
                env=env,
                capture_output=True,
                timeout=60,
                check=False,
            )
    return row


def status_table(rows: list[StatusRow]) -> None:
    by = {r.side: r for r in rows}
    c, o = by.get(C), by.get(OURS)
    lines = []
    for label, get in (
        ("jobs submitted", lambda r: r.submitted),
        ("statuses answered (2 rounds)", lambda r: r.answered),
        ("submit N jobs (s)", lambda r: r.submit_s),
        ("first status round (s)", lambda r: r.first_s),
        ("slurmctld RPCs, first round", lambda r: r.first_rpcs),
        ("second round, 6 s later (s)", lambda r: r.second_s),
        ("slurmctld RPCs, second round", lambda r: r.second_rpcs),
    ):
        cv, ov = (get(c) if c else None), (get(o) if o else None)
        same = "(s)" in label or "RPCs" in label
        lines.append(
            [
                label,
                _fmt(cv),
                _fmt(ov),
                ratio(cv, ov) if cv is not None and ov is not None and same else "-",
            ]
        )
    n = (o or c).n if (o or c) else 0
    table(f"status over SSH, {n} Slurm jobs, 50 in flight", ["", C, OURS, "C / ours"], lines)
    for r in rows:
        if r.note or r.answered < 2 * r.submitted:
            print(f"  {r.side}: answered {r.answered}/{2 * r.submitted} {r.note}")


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


# ---------------------------------------------------------------------- part 2: burst
def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _blah_trees(uid: int, marker: str) -> dict[int, float]:
    """CPU seconds of each BLAH server process of ``uid`` whose command line has
    ``marker``: itself, its reaped children and its live descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    roots = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or (st := _stat(int(d))) is None:
            continue
        kids.setdefault(int(st[1]), []).append(int(d))
        try:
            if os.stat(f"/proc/{d}").st_uid != uid:
                continue
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd and "ssh" not in cmd.split()[0]:
            roots.append(int(d))
    out = {}
    for pid in roots:
        todo, cpu = [pid], 0
        while todo:
            p = todo.pop()
            if s := _stat(p):
                cpu += sum(int(x) for x in s[11:15])
                todo += kids.get(p, [])
        out[pid] = cpu / tick
    return out


@dataclass
class BurstRow:
    side: str
    jobs: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    exact: int = 0
    done: int = 0
    note: str = ""


def burst_side(remote: Remote, side: str, jobs: int, work: Path) -> BurstRow:
    row = BurstRow(side, jobs)
    condor = remote.condor
    d = work / side.replace(" ", "-")
    d.mkdir(parents=True)
    os.chown(d, condor.uid, condor.gid)
    (d / "data.txt").write_text("input\n")
    os.chown(d / "data.txt", condor.uid, condor.gid)
    extra = f" --rgahp-script ~/bosco/glite/bin/{SCRIPT[C]}" if side == C else ""
    sub = (
        f"universe = grid\ngrid_resource = batch slurm {remote.resource}{extra}\n"
        "executable = /bin/sh\narguments = \"-c 'cat data.txt >/dev/null; exit $(( $1 % 7 ))'"
        ' x $(Process)"\ntransfer_executable = false\ntransfer_input_files = data.txt\n'
        "should_transfer_files = YES\nwhen_to_transfer_output = ON_EXIT\n"
        f"output = out.$(Process)\nlog = burst.log\nqueue {jobs}\n"
    )
    uid = pwd.getpwnam(remote.user).pw_uid
    marker = "blahpd.orig" if side == C else "gahp_blah"
    base = _blah_trees(uid, marker)
    last = dict(base)
    t0 = time.monotonic()
    cluster = condor.submit(d, sub)
    try:
        deadline = t0 + 1200
        while time.monotonic() < deadline:
            for pid, cpu in _blah_trees(uid, marker).items():
                last[pid] = max(cpu, last.get(pid, 0.0))
            ads = condor.in_history([cluster])
            if len(ads) >= jobs:
                break
            time.sleep(0.5)
        else:
            row.note = "not all jobs finished in 1200 s"
        row.wall_s = time.monotonic() - t0
        row.cpu_s = sum(cpu - base.get(pid, 0.0) for pid, cpu in last.items())
        ads = condor.in_history([cluster])
        row.done = sum(1 for a in ads.values() if a.get("JobStatus") == DONE)
        row.exact = sum(1 for (_c, p), a in ads.items() if a.get("ExitCode") == p % 7)
    finally:
        condor.remove([cluster])
    return row


def burst_table(rows: list[BurstRow]) -> None:
    by = {r.side: r for r in rows}
    c, o = by.get(C), by.get(OURS)
    lines = []
    for label, get in (
        ("submit to last job done (s)", lambda r: r.wall_s),
        ("remote BLAH server CPU (s)", lambda r: r.cpu_s),
        ("jobs completed", lambda r: r.done),
        ("with their true exit code", lambda r: r.exact),
    ):
        cv, ov = (get(c) if c else None), (get(o) if o else None)
        lines.append(
            [
                label,
                _fmt(cv),
                _fmt(ov),
                ratio(cv, ov)
                if cv is not None and ov is not None and label.endswith("(s)")
                else "-",
            ]
        )
    n = (o or c).jobs if (o or c) else 0
    table(
        f"burst over SSH: {n} jobs, HTCondor 25.0.13 remote_gahp + condor_ft-gahp, Slurm",
        ["", C, OURS, "C / ours"],
        lines,
    )
    for r in rows:
        if r.note:
            print(f"  {r.side}: {r.note}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", action="store_true", help="N=20, J=30")
    p.add_argument("--n", type=int, help="jobs of the status round (default 100)")
    p.add_argument("--jobs", type=int, help="jobs of the burst (default 100)")
    p.add_argument("--parts", default="status,burst")
    args = p.parse_args(argv)
    n = args.n or (20 if args.small else 100)
    jobs = args.jobs or (30 if args.small else 100)
    remote = find_remote()
    env = scale.slurm_env()
    if remote is None or env is None:
        why = "no remote path (bash .ci/remote-up.sh)" if remote is None else "no Slurm"
        if os.environ.get("GAHP_REQUIRE_REMOTE") == "1":
            log(f"GAHP_REQUIRE_REMOTE=1 but {why}")
            return 1
        print(f"skipped: {why}")
        return 0
    parts = set(args.parts.split(","))
    if "status" in parts:
        rows = []
        for side in (C, OURS):
            log(f"status over SSH: {side}, {n} jobs")
            rows.append(status_side(remote, env, side, n))
        status_table(rows)
    if "burst" in parts:
        work = Path(os.environ.get("GAHP_REMOTE_JOBS", "/tmp/gahp-remote-jobs"))
        work.mkdir(parents=True, exist_ok=True)
        work.chmod(0o755)
        run = work / f"bench-{os.getpid()}"
        run.mkdir()
        run.chmod(0o755)
        brows = []
        for side in (C, OURS):
            log(f"burst over SSH: {side}, {jobs} jobs")
            brows.append(burst_side(remote, side, jobs, run))
        burst_table(brows)
        subprocess.run(["rm", "-rf", str(run)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
