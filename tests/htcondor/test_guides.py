"""The operator guides, followed to the letter on a real HTCondor.

Each guide's wrapper script and HTCondor knobs are installed in a personal HTCondor of
their own (the release of the running one), with site paths moved under a scratch
directory, and the guide's submit file runs there.

The BLAH guide's wrapper script, directory set-up, blahpd configuration and HTCondor knob are
taken from docs/operators/htcondor-blah.md and installed in a personal HTCondor 25.0 of
their own (site paths such as /opt/gahp and /etc/gahp moved under a scratch directory, the
Slurm configuration pointed at the test cluster's); then the guide's own submit file runs on
Slurm and its "checking by hand" session is replayed through the wrapper as the job owner.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from htcondor_kit import DONE, HELD, JOBS_ROOT, HTCondor, owned, wait_for

from gahp_core.testing import GahpClient

ROOT = Path(__file__).resolve().parents[2]
BLAH_GUIDE = ROOT / "docs" / "operators" / "htcondor-blah.md"
BOINC_GUIDE = ROOT / "docs" / "operators" / "htcondor-boinc.md"
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
            ["runuser", "-u", base.owner, "--", "env", f"CONDOR_CONFIG={self.config}",
             str(master), "-pidfile", str(self.pidfile)],
            check=True, timeout=60,
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
    # the directories, made as the guide says
    setup = next(b for b in blocks(BLAH_GUIDE, "sh") if b.lstrip().startswith("install"))
    for line in relocate(setup, moves).splitlines():
        command = line.partition("#")[0].strip()
        if command:
            subprocess.run(["sh", "-c", f"mkdir -p {site}/var/log {site}/var/lib && {command}"],
                           check=True)
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
        lambda: {k: a for k, a in condor.ads([cluster]).items()
                 if a.get("JobStatus") in (DONE, HELD)},
        180, "the guide's job to complete",
    )
    ad = ads[(cluster, 0)]
    assert ad.get("JobStatus") == DONE and ad.get("ExitCode") == 0, ad.get("HoldReason", ad)
    assert (jobdir / "job.out").read_text() == "analyzed input.dat: 12 bytes\n"
    assert condor.gahp_lines("BLAH_JOB_SUBMIT", "gridtype\\ =\\ \"slurm\"")
    # the wrapper's paths: per-user log and state directory, as the guide promises
    owner = condor.owner
    log = Path(moves["/var/log/gahp"]) / f"BlahpdLog.{owner}"
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
    logs.mkdir(parents=True)
    logs.chmod(0o1777)  # as the guide says: install -d -m 1777 /var/log/gahp
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
    submit = relocate(
        next(b for b in blocks(BOINC_GUIDE, "text") if "grid_resource" in b), moves
    )
    n = int(re.search(r"^queue (\d+)$", submit, re.M)[1])
    cluster = condor.submit(jobdir, submit)
    ads = wait_for(
        lambda: (lambda a: a if len(a) == n and all(
            x.get("JobStatus") in (DONE, HELD) for x in a.values()) else None)(
            condor.ads([cluster])),
        240, "the guide's BOINC jobs to finish",
    )
    for (_, proc), ad in sorted(ads.items()):
        assert ad.get("JobStatus") == DONE, (proc, ad.get("HoldReason"))
        assert (jobdir / f"out.{proc}").read_text() == "SHARED BY EVERY JOB\n"
        assert "<stderr_txt>" in (jobdir / f"job.{proc}.err").read_text()
    submits = condor.gahp_lines("<- 'BOINC_SUBMIT ")
    assert len(submits) == 1 and f" uppercase {n} " in submits[0], submits
    log = Path(moves["/var/log/gahp"]) / f"BoincGahpLog.{condor.owner}"
    assert log.is_file() and emulator.authenticator not in log.read_text()
