"""The operator guides, followed to the letter on a real HTCondor.

Each guide's wrapper script and HTCondor knobs are installed in a personal HTCondor of
their own (the release of the running one), with site paths moved under a scratch
directory, and the guide's submit file runs there.

The switching guides (moving-from-c-blahp.md, moving-from-boinc-c-gahp.md) are followed the
same way, from a personal HTCondor running the C original: a job submitted through it is in
flight when the guide's knobs and commands switch HTCondor to ours, and finishes through ours
(and, for the blahp, a job submitted through ours finishes through the C blahp after the
guide's rollback).

The BLAH guide's wrapper script, directory set-up, blahpd configuration and HTCondor knob are
taken from docs/operators/htcondor-blah.md and installed in a personal HTCondor 25.0 of
their own (site paths such as /opt/gahp and /etc/gahp moved under a scratch directory, the
Slurm configuration pointed at the test cluster's); then the guide's own submit file runs on
Slurm and its "checking by hand" session is replayed through the wrapper as the job owner.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from htcondor_kit import (
    DONE,
    HELD,
    JOBS_ROOT,
    RUNNING,
    HTCondor,
    alive,
    gridmanagers,
    owned,
    running_emulator,
    wait_for,
)
from live_services import env_file, unavailable

from gahp_core.testing import GahpClient

ROOT = Path(__file__).resolve().parents[2]
BLAH_GUIDE = ROOT / "docs" / "operators" / "htcondor-blah.md"
BOINC_GUIDE = ROOT / "docs" / "operators" / "htcondor-boinc.md"
MOVE_BLAH = ROOT / "docs" / "operators" / "moving-from-c-blahp.md"
MOVE_BOINC = ROOT / "docs" / "operators" / "moving-from-boinc-c-gahp.md"
SHARED = Path(os.environ.get("GAHP_SHARED", ROOT.parent / "shared"))
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)


def scratch_site() -> Path:
    JOBS_ROOT.mkdir(parents=True, exist_ok=True)
    site = Path(tempfile.mkdtemp(prefix="guide-", dir=JOBS_ROOT))
    site.chmod(0o755)
    return site


def site_moves(site: Path) -> dict[str, str]:
    """Where the guides' site paths go in a test: the GAHPs' venv, wrappers and logs."""
    venv = Path(os.environ.get("GAHP_VENV", "/opt/gahp-venv"))
    return {
        "/opt/gahp/": f"{venv}/",
        "/usr/local/libexec/": f"{site}/libexec/",
        "/var/log/gahp": f"{site}/var/log/gahp",
    }


def install_wrapper(page: Path, name: str, moves: dict[str, str]) -> Path:
    """Write the page's wrapper script ``name`` where its comment says, moved."""
    text = next(b for b in blocks(page, "sh") if name in b)
    path = re.search(r"^# (/\S+)$", text, re.M)
    assert path, f"the guide's {name} names its path in a comment"
    wrapper = Path(relocate(path[1], moves))
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(relocate(text, moves))
    wrapper.chmod(0o755)
    return wrapper


def blah_guide_dirs(site: Path, moves: dict[str, str], owner: str) -> None:
    """The BLAH guide's directories, made as it says (root's parents, one directory per job
    owner), for ``owner``."""
    setup = next(b for b in blocks(BLAH_GUIDE, "sh") if b.lstrip().startswith("install"))
    assert "1777" not in setup
    script = relocate(setup, moves).replace("for user in alice bob;", f"for user in {owner};")
    subprocess.run(["sh", "-ec", f"mkdir -p {site}/var/log {site}/var/lib\n{script}"], check=True)


def _user_log_dir(logs: Path, owner: str) -> None:
    """The guides' log layout: ``logs`` root's (755), ``logs/<owner>`` the owner's (700)."""
    logs.mkdir(parents=True, mode=0o755)
    pw = pwd.getpwnam(owner)
    (logs / owner).mkdir(mode=0o700)
    os.chown(logs / owner, pw.pw_uid, pw.pw_gid)


def blocks(page: Path, lang: str) -> list[str]:
    """The page's fenced code blocks of one language, in order."""
    return [m["body"] for m in FENCE.finditer(page.read_text()) if m["lang"] == lang]


def relocate(text: str, moves: dict[str, str]) -> str:
    for old, new in moves.items():
        text = text.replace(old, new)
    return text


class GuideCondor:
    """A personal HTCondor (the 25.0 release of the running one) configured by the guide."""

    def __init__(self, base: HTCondor, site: Path, knobs: str, collector_port: int) -> None:
        self.site = site
        local = site / "condor-local"
        for sub in ("log", "spool", "execute", "lock", "run"):
            (local / sub).mkdir(parents=True)
        config = base.dir / "condor_config"
        lines = []
        for line in config.read_text().splitlines():
            name = line.partition("=")[0].strip()
            if name == "LOCAL_DIR":
                line = f"LOCAL_DIR = {local}"
            elif name in ("BATCH_GAHP", "BOINC_GAHP") or name.endswith("_GAHP"):
                continue  # the guide's knobs, below, and nothing else
            elif name == "COLLECTOR_HOST":
                line = f"COLLECTOR_HOST = 127.0.0.1:{collector_port}"
            lines.append(line)
        self.config = site / "condor_config"
        self.config.write_text("\n".join(lines) + "\n# from the guide\n" + knobs)
        self.config.chmod(0o644)
        subprocess.run(["chown", "-R", f"{base.uid}:{base.gid}", str(local)], check=True)
        self.condor = HTCondor(
            {
                "GAHP_HTCONDOR_VERSION": base.version,
                "CONDOR_CONFIG": str(self.config),
                "GAHP_HTCONDOR_BIN": str(base.bin),
                "GAHP_HTCONDOR_USER": base.owner,
                "GAHP_HTCONDOR_DIR": str(site),
                "GAHP_HTCONDOR_LOG": str(local / "log"),
            }
        )
        self.pidfile = local / "run" / "master.pid"
        master = base.bin.parent / "sbin" / "condor_master"
        subprocess.run(
            [
                "runuser",
                "-u",
                base.owner,
                "--",
                "env",
                f"CONDOR_CONFIG={self.config}",
                str(master),
                "-pidfile",
                str(self.pidfile),
            ],
            check=True,
            timeout=60,
        )
        wait_for(self.condor.answers, 60, "the guide's HTCondor to answer condor_q")

    def stop(self) -> None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return
        end = time.monotonic() + 30
        while time.monotonic() < end and Path(f"/proc/{pid}").exists():
            time.sleep(0.2)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, 9)


@pytest.fixture(scope="module")
def blah_site(need_htcondor, batch_env) -> Iterator[tuple[GuideCondor, dict[str, str]]]:
    base = need_htcondor("25.0.13")
    slurm = batch_env("slurm")
    assert slurm is not None
    site = scratch_site()
    moves = {
        **site_moves(site),
        "/etc/gahp": f"{site}/etc/gahp",
        "/var/lib/gahp-blah": f"{site}/var/lib/gahp-blah",
        "/etc/slurm/slurm.conf": slurm["SLURM_CONF"],
    }
    install_wrapper(BLAH_GUIDE, "blahpd-wrapper", moves)
    blah_guide_dirs(site, moves, base.owner)
    # the blahpd configuration: the guide's first TOML block
    toml = next(b for b in blocks(BLAH_GUIDE, "toml") if "[driver.slurm]" in b)
    conf = Path(f"{site}/etc/gahp/blahpd.toml")
    conf.write_text(relocate(toml, moves))
    conf.chmod(0o644)
    knobs = relocate(next(b for b in blocks(BLAH_GUIDE, "ini") if "BATCH_GAHP" in b), moves)
    guide = GuideCondor(base, site, knobs, collector_port=19632)
    yield guide, moves
    guide.stop()
    if os.environ.get("GAHP_HTCONDOR_KEEP") != "1":
        shutil.rmtree(site, ignore_errors=True)


def test_blah_guide_submit_file_runs_on_slurm(blah_site):
    guide, moves = blah_site
    condor = guide.condor
    jobdir = guide.site / "job"
    jobdir.mkdir()
    os.chown(jobdir, condor.uid, condor.gid)
    submit = next(b for b in blocks(BLAH_GUIDE, "text") if "grid_resource = batch slurm" in b)
    owned(condor, jobdir / "analyze.sh", '#!/bin/sh\necho "analyzed $1: $(wc -c < "$1") bytes"\n')
    (jobdir / "analyze.sh").chmod(0o755)
    owned(condor, jobdir / "input.dat", "twelve bytes")
    cluster = condor.submit(jobdir, submit)
    ads = wait_for(
        lambda: {
            k: a for k, a in condor.ads([cluster]).items() if a.get("JobStatus") in (DONE, HELD)
        },
        180,
        "the guide's job to complete",
    )
    ad = ads[(cluster, 0)]
    assert ad.get("JobStatus") == DONE and ad.get("ExitCode") == 0, ad.get("HoldReason", ad)
    assert (jobdir / "job.out").read_text() == "analyzed input.dat: 12 bytes\n"
    assert condor.gahp_lines("BLAH_JOB_SUBMIT", 'gridtype\\ =\\ "slurm"')
    # the wrapper's paths: per-user log and state directory, as the guide promises
    owner = condor.owner
    log = Path(moves["/var/log/gahp"]) / owner / "BlahpdLog"
    assert log.is_file() and "submitted slurm/" in log.read_text()
    state = Path(moves["/var/lib/gahp-blah"]) / owner
    assert state.is_dir() and state.stat().st_uid == condor.uid


def test_blah_guide_checking_by_hand(blah_site):
    guide, moves = blah_site
    wrapper = relocate("/usr/local/libexec/blahpd-wrapper", moves)
    shown = next(b for b in blocks(BLAH_GUIDE, "text") if "gahp-shell" in b).splitlines()
    with GahpClient(["runuser", "-u", guide.condor.owner, "--", wrapper]) as client:
        # the banner the guide shows, but for the version and date
        assert client.banner.split()[-4:] == shown[1].split()[-4:], client.banner
        assert client.call("BLAH_PING", "slurm") == ["0", "No error"]


@pytest.fixture(scope="module")
def boinc_site(need_htcondor, emulator) -> Iterator[tuple[GuideCondor, dict[str, str]]]:
    base = need_htcondor("9.12.0")
    site = scratch_site()
    moves = {
        **site_moves(site),
        "https://boinc.example.org/myproject/": emulator.url,
        "/home/alice/.boinc/myproject.auth": f"{site}/job/myproject.auth",
    }
    install_wrapper(BOINC_GUIDE, "boinc-gahp-wrapper", moves)
    logs = Path(moves["/var/log/gahp"])
    _user_log_dir(logs, base.owner)  # as the guide says: root's parent, the user's directory
    knobs = relocate(next(b for b in blocks(BOINC_GUIDE, "ini") if "BOINC_GAHP" in b), moves)
    guide = GuideCondor(base, site, knobs, collector_port=19633)
    yield guide, moves
    guide.stop()
    if os.environ.get("GAHP_HTCONDOR_KEEP") != "1":
        shutil.rmtree(site, ignore_errors=True)


def test_boinc_guide_submit_file_runs_on_htcondor9(boinc_site, emulator):
    guide, moves = boinc_site
    condor = guide.condor
    jobdir = guide.site / "job"
    jobdir.mkdir()
    os.chown(jobdir, condor.uid, condor.gid)
    owned(condor, jobdir / "myproject.auth", emulator.authenticator + "\n")
    owned(condor, jobdir / "in", "shared by every job\n")
    submit = relocate(next(b for b in blocks(BOINC_GUIDE, "text") if "grid_resource" in b), moves)
    n = int(re.search(r"^queue (\d+)$", submit, re.M)[1])
    cluster = condor.submit(jobdir, submit)
    ads = wait_for(
        lambda: (
            lambda a: (
                a
                if len(a) == n and all(x.get("JobStatus") in (DONE, HELD) for x in a.values())
                else None
            )
        )(condor.ads([cluster])),
        240,
        "the guide's BOINC jobs to finish",
    )
    for (_, proc), ad in sorted(ads.items()):
        assert ad.get("JobStatus") == DONE, (proc, ad.get("HoldReason"))
        assert (jobdir / f"out.{proc}").read_text() == "SHARED BY EVERY JOB\n"
        assert "<stderr_txt>" in (jobdir / f"job.{proc}.err").read_text()
    submits = condor.gahp_lines("<- 'BOINC_SUBMIT ")
    assert len(submits) == 1 and f" uppercase {n} " in submits[0], submits
    log = Path(moves["/var/log/gahp"]) / condor.owner / "BoincGahpLog"
    assert log.is_file() and emulator.authenticator not in log.read_text()


# ---------------------------------------------------------------------- switching guides
def ini_block(page: Path, needle: str) -> str:
    return next(b for b in blocks(page, "ini") if needle in b)


def follow_commands(guide: GuideCondor, page: Path) -> None:
    """Run the page's "tell HTCondor" commands on the guide's HTCondor, whose release has
    no condor_reconfig: each command the page gives is done here by its equivalent, and a
    command this function does not know fails the test."""
    text = next(b for b in blocks(page, "sh") if "condor_reconfig" in b)
    for line in text.splitlines():
        command = line.partition("#")[0].strip()
        if not command:
            continue
        if command == "condor_reconfig":  # what it does: SIGHUP to the master
            os.kill(int(guide.pidfile.read_text().strip()), 1)
        elif command == "pkill -TERM -f '^condor_gridmanager '":  # this HTCondor's only
            stopping = gridmanagers(guide.condor, guide.pidfile)
            for pid in stopping:
                os.kill(pid, 15)
            wait_for(
                lambda pids=stopping: not any(alive(p) for p in pids),
                30,
                "the gridmanagers to stop",
                interval=0.2,
            )
        else:
            pytest.fail(f"the guide's command {command!r} is not followed by this test")


def gahp_banners(condor: HTCondor) -> dict[int, str]:
    """GAHP pid -> banner, from the GridmanagerLog (the version line precedes the GAHP's
    first protocol line)."""
    banners: dict[int, str] = {}
    pending: str | None = None
    for path in sorted(condor.log_dir.glob(f"GridmanagerLog.{condor.owner}*"), reverse=True):
        for line in path.read_text(errors="replace").splitlines():
            if "GAHP server version:" in line:
                pending = line.split("GAHP server version:", 1)[1].strip()
            elif pending is not None and "GAHP[" in line:
                banners[int(line.split("GAHP[", 1)[1].split("]", 1)[0])] = pending
                pending = None
    return banners


def served_by(condor: HTCondor, *needles: str) -> list[str]:
    """The banners of the GAHPs that were sent a request with these needles, in order."""
    banners = gahp_banners(condor)
    out = []
    for line in condor.gahp_lines("<- '", *needles):
        out.append(banners.get(int(line.split("GAHP[", 1)[1].split("]", 1)[0]), "?"))
    return out


def job_ad(
    condor: HTCondor, cluster: int, states: tuple[int, ...], what: str, deadline_s: float = 300
) -> dict:
    """The job's ad once it is in one of ``states`` (with its GridJobId, unless DONE); a
    held job fails at once. The deadline allows for a Slurm busy with other tests' jobs."""

    def check():
        ad = condor.ads([cluster]).get((cluster, 0), {})
        if ad.get("JobStatus") == HELD:
            pytest.fail(f"{what}: held: {ad.get('HoldReason')}", pytrace=False)
        if ad.get("JobStatus") in states and (ad.get("GridJobId") or DONE in states):
            return ad
        return None

    return wait_for(check, deadline_s, what)


C_BLAHP = "blahp-25.0.13"
INFN = "INFN blahpd"
OURS_BLAH = "Python BLAH"


def test_moving_from_c_blahp_side_by_side_and_back(need_htcondor, batch_env):
    """A Slurm job submitted through the C blahp 25.0.13 runs while the guide's side-by-side
    knob and commands switch `batch slurm` to our blahpd: ours follows the C blahp's job id
    to the end (with the exact exit code). A job submitted through ours runs while the
    guide's rollback returns to the C blahp, which follows it to the end."""
    base = need_htcondor("25.0.13")
    slurm = batch_env("slurm")
    assert slurm is not None
    tarball = SHARED / "blahp" / f"{C_BLAHP}-debian12-x86_64.tar.xz"
    if not tarball.is_file():
        unavailable("GAHP_REQUIRE_HTCONDOR", f"no C blahp to move from ({tarball} missing)")
    site = scratch_site()
    guide = None
    clusters: list[int] = []
    try:
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(site)], check=True)
        c_blahp = site / C_BLAHP
        with (c_blahp / "etc" / "blah.config").open("a") as fh:  # the site before the move
            fh.write(f"export SLURM_CONF={slurm['SLURM_CONF']}\n")
        moves = {
            **site_moves(site),
            "/etc/gahp": f"{site}/etc/gahp",
            "/var/lib/gahp-blah": f"{site}/var/lib/gahp-blah",
            "/etc/slurm/slurm.conf": slurm["SLURM_CONF"],
            "/usr/libexec/blahp": f"{c_blahp}/libexec",
        }
        install_wrapper(BLAH_GUIDE, "blahpd-wrapper", moves)
        blah_guide_dirs(site, moves, base.owner)
        toml = next(b for b in blocks(MOVE_BLAH, "toml") if "[driver.slurm]" in b)
        conf = Path(relocate("/etc/gahp/blahpd.toml", moves))
        conf.write_text(relocate(toml, moves))
        conf.chmod(0o644)
        before = f"BATCH_GAHP = {c_blahp}/bin/blahpd\nBLAHPD_LOCATION = {c_blahp}\n"
        guide = GuideCondor(base, site, before, collector_port=19634)
        condor = guide.condor
        jobdir = site / "job"
        jobdir.mkdir()
        os.chown(jobdir, condor.uid, condor.gid)
        owned(
            condor,
            jobdir / "wait.sh",
            '#!/bin/sh\nwhile [ ! -e "$1" ]; do sleep 1; done\necho "$2 finished"\nexit $3\n',
        )
        (jobdir / "wait.sh").chmod(0o755)

        def submit(name: str, code: int) -> int:
            clusters.append(
                condor.submit(
                    jobdir,
                    (
                        "universe = grid\ngrid_resource = batch slurm\nexecutable = wait.sh\n"
                        f"arguments = {jobdir}/go-{name} {name} {code}\n"
                        f"output = {name}.out\nerror = {name}.err\nlog = {name}.log\nqueue\n"
                    ),
                    name=f"{name}.sub",
                )
            )
            return clusters[-1]

        a = submit("a", 7)
        a_id = job_ad(condor, a, (RUNNING,), "job a to run through the C blahp")["GridJobId"]
        # side by side: the guide's knob for Slurm, then its commands
        side = relocate(ini_block(MOVE_BLAH, "SLURM_GAHP"), moves)
        guide.config.write_text(guide.config.read_text() + side)
        follow_commands(guide, MOVE_BLAH)
        b = submit("b", 0)
        owned(condor, jobdir / "go-a", "")
        done_a = job_ad(condor, a, (DONE,), "job a to finish through our blahpd")
        b_id = job_ad(condor, b, (RUNNING,), "job b to run through our blahpd")["GridJobId"]
        # rolling back: the knob removed, the same commands
        guide.config.write_text(guide.config.read_text().replace(side, ""))
        follow_commands(guide, MOVE_BLAH)
        owned(condor, jobdir / "go-b", "")
        done_b = job_ad(condor, b, (DONE,), "job b to finish through the C blahp")

        a_blah, b_blah = a_id.split()[-1], b_id.split()[-1]
        assert re.fullmatch(r"slurm/\d{8}/\d+", a_blah), a_id
        assert (done_a.get("ExitCode"), (jobdir / "a.out").read_text()) == (7, "a finished\n")
        assert (done_b.get("ExitCode"), (jobdir / "b.out").read_text()) == (0, "b finished\n")
        submits = served_by(condor, "BLAH_JOB_SUBMIT")
        assert len(submits) == 2, submits
        assert INFN in submits[0] and OURS_BLAH in submits[1], submits  # a by C, b by ours
        status_a = served_by(condor, "BLAH_JOB_STATUS", f" {a_blah}'")
        assert INFN in status_a[0] and OURS_BLAH in status_a[-1], status_a
        status_b = served_by(condor, "BLAH_JOB_STATUS", f" {b_blah}'")
        assert OURS_BLAH in status_b[0] and INFN in status_b[-1], status_b
    finally:
        if guide is not None:
            for name in ("go-a", "go-b"):  # a failed run's jobs end, not wait in Slurm
                with contextlib.suppress(OSError):
                    owned(guide.condor, site / "job" / name, "")
            guide.condor.remove(clusters)
            guide.stop()
        if os.environ.get("GAHP_HTCONDOR_KEEP") != "1":
            shutil.rmtree(site, ignore_errors=True)


OURS_BOINC = "Python BOINC GAHP"
C_BOINC = "BOINC 8.3.0 GAHP"


def c_boinc_gahp() -> Path:
    """BOINC's C GAHP, built with the real BOINC server's bundle (`.ci/boinc-server-up.sh`)."""
    env = Path(os.environ.get("GAHP_BOINC_DIR", "/tmp/gahp-boinc-server")) / "env"
    path = Path(env_file(env).get("GAHP_BOINC_C_GAHP") or "/nonexistent")
    if not os.access(path, os.X_OK):
        unavailable(
            "GAHP_REQUIRE_HTCONDOR",
            f"no BOINC C GAHP to move from ({path}; "
            "`bash .ci/boinc-server-up.sh` writes GAHP_BOINC_C_GAHP in {env})",
        )
    return path


def test_moving_from_boinc_c_gahp_jobs_on_the_project_finish(need_htcondor, tmp_path):
    """The guide's submit file runs through BOINC's C GAHP (HTCondor 9.12, the emulator with
    its volunteer paused, so the jobs wait on the project); the guide's knob and commands
    switch to boinc-gahp, the volunteer starts, and boinc-gahp polls the C GAHP's batch,
    fetches every job's output and retires the batch."""
    base = need_htcondor("9.12.0")
    c_gahp = c_boinc_gahp()
    site = scratch_site()
    guide = None
    try:
        with running_emulator(tmp_path / "project", "--paused") as emulator:
            moves = {
                **site_moves(site),
                "https://boinc.example.org/myproject/": emulator.url,
                "/home/alice/.boinc/myproject.auth": f"{site}/job/myproject.auth",
            }
            install_wrapper(BOINC_GUIDE, "boinc-gahp-wrapper", moves)
            _user_log_dir(Path(moves["/var/log/gahp"]), base.owner)
            guide = GuideCondor(base, site, f"BOINC_GAHP = {c_gahp}\n", collector_port=19635)
            condor = guide.condor
            jobdir = site / "job"
            jobdir.mkdir()
            os.chown(jobdir, condor.uid, condor.gid)
            owned(condor, jobdir / "myproject.auth", emulator.authenticator + "\n")
            owned(condor, jobdir / "in", "on the project before the switch\n")
            submit = relocate(
                next(b for b in blocks(BOINC_GUIDE, "text") if "grid_resource" in b), moves
            )
            n = int(re.search(r"^queue (\d+)$", submit, re.M)[1])
            cluster = condor.submit(jobdir, submit)
            wait_for(
                lambda: condor.gahp_lines("<- 'BOINC_QUERY_BATCHES"),
                120,
                "the C GAHP to submit the batch and poll it",
            )
            assert emulator.workunits() == n
            # the switch: the guide's knob, then its commands
            switch = relocate(ini_block(MOVE_BOINC, "BOINC_GAHP"), moves)
            guide.config.write_text(guide.config.read_text() + switch)
            follow_commands(guide, MOVE_BOINC)
            emulator.proc.send_signal(12)  # SIGUSR2: the volunteer starts
            ads = wait_for(
                lambda: (
                    lambda a: (
                        a
                        if len(a) == n
                        and all(x.get("JobStatus") in (DONE, HELD) for x in a.values())
                        else None
                    )
                )(condor.ads([cluster])),
                180,
                "the C GAHP's jobs to finish through boinc-gahp",
            )
            for (_, proc), ad in sorted(ads.items()):
                assert ad.get("JobStatus") == DONE, (proc, ad.get("HoldReason"))
                text = (jobdir / f"out.{proc}").read_text()
                assert text == "ON THE PROJECT BEFORE THE SWITCH\n", (proc, text)
            assert emulator.workunits() == n  # nothing submitted again
            submits = served_by(condor, "BOINC_SUBMIT ")
            assert len(submits) == 1 and C_BOINC in submits[0], submits
            fetches = served_by(condor, "BOINC_FETCH_OUTPUT ")
            assert len(fetches) >= n and all(OURS_BOINC in s for s in fetches), fetches
            retired = served_by(condor, "BOINC_RETIRE_BATCH ")
            assert retired and all(OURS_BOINC in s for s in retired), retired
    finally:
        if guide is not None:
            guide.stop()
        if os.environ.get("GAHP_HTCONDOR_KEEP") != "1":
            shutil.rmtree(site, ignore_errors=True)
