"""A loopback HTCondor-CE in front of blahpd, as `.ci/htcondor-ce-up.sh` starts it.

The CE runs in root mode: its daemons belong to a service user, the jobs to another user (the
job owner, ``ceuser1``), and the gridmanager runs blahpd as that owner.  Everything a test does
at the CE it does as the job owner, with the CE's own commands (``condor_ce_submit``,
``condor_ce_q``, ``condor_ce_hold`` ...) or, for a remote (spooled) submission, the HTCondor
Python bindings of the CE's venv, as ``condor_ce_trace`` does.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from live_services import env_file, unavailable

REQUIRE = "GAHP_REQUIRE_HTCONDOR_CE"
START = "bash .ci/htcondor-ce-up.sh"


def ce_dir() -> Path:
    return Path(os.environ.get("GAHP_HTCONDOR_CE_DIR", "/tmp/gahp-htcondor-ce"))


def wait_until(
    check: Callable[[], Any], deadline_s: float, what: str, interval: float = 1.0
) -> Any:
    """Call ``check`` until it returns something truthy; fail after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline_s:.0f} s waiting for {what}", pytrace=False)
        time.sleep(interval)


class CE:
    """The running CE, seen by its job owner."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings
        self.bin = Path(settings["GAHP_CE_BIN"])
        self.user = settings["GAHP_CE_JOB_USER"]
        self.daemon_user = settings["GAHP_CE_DAEMON_USER"]
        self.log_dir = Path(settings["GAHP_CE_LOG"])
        self.blah_log_dir = Path(settings["GAHP_CE_BLAHLOG"])
        self.site_scripts = Path(settings["GAHP_CE_SITE_SCRIPTS"])
        self.blah_config = Path(settings["GAHP_CE_BLAH_CONFIG"])
        """The site's blah.config (``$BLAHPD_LOCATION/etc/blah.config``): no blahpd.toml."""
        self.wrapper = Path(settings["GAHP_CE_DIR"]) / "bin" / "blahpd-wrapper"
        self.venv = Path(settings["GAHP_CE_VENV"])
        self.bootstrap = settings["GAHP_CE_BOOTSTRAP"]
        self.routes = settings.get("GAHP_CE_ROUTES", "").split()
        pw = subprocess.run(["getent", "passwd", self.user], capture_output=True, text=True)
        self.home = Path(pw.stdout.split(":")[5])

    @classmethod
    def find(cls) -> CE:
        """The CE of `.ci/htcondor-ce-up.sh`, answering; else skip (fail under CI)."""
        settings = env_file(ce_dir() / "env")
        if not settings.get("GAHP_CE_BIN"):
            unavailable(REQUIRE, f"no HTCondor-CE is running (start it with `{START}`)")
        if os.geteuid() != 0:
            unavailable(
                REQUIRE, "the HTCondor-CE tests run as root (the CE's jobs belong to another user)"
            )
        ce = cls(settings)
        if ce.run(["condor_ce_q", "-totals"], check=False).returncode != 0:
            unavailable(REQUIRE, f"the HTCondor-CE in {ce_dir()} does not answer (`{START}`)")
        return ce

    # ------------------------------------------------------------------ running as the owner
    def run(
        self, argv: list[str], cwd: Path | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` as the job owner (a CE command is looked up in the CE's bin directory)."""
        if argv[0].startswith("condor_ce_"):
            argv = [str(self.bin / argv[0]), *argv[1:]]
        line = " ".join(shlex.quote(a) for a in argv)
        if cwd is not None:
            line = f"cd {shlex.quote(str(cwd))} && {line}"
        proc = subprocess.run(
            ["runuser", "-l", self.user, "-c", line],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            pytest.fail(
                f"{line} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}", pytrace=False
            )
        return proc

    def python(
        self, code: str, cwd: Path, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Python code as the job owner, with the CE's configuration and HTCondor bindings."""
        script = cwd / f"py-{time.monotonic_ns()}.py"
        script.write_text(code)
        shutil.chown(script, self.user)
        line = (
            f". {shlex.quote(self.bootstrap)} && {self.venv}/bin/python3 {shlex.quote(str(script))}"
        )
        return self.run(["sh", "-c", line], cwd=cwd, timeout=timeout)

    def job_dir(self, name: str) -> Path:
        """A fresh directory of the job owner's, under its home."""
        base = self.home / "gahp-ce-tests"
        base.mkdir(exist_ok=True)
        shutil.chown(base, self.user)
        d = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))
        shutil.chown(d, self.user)
        d.chmod(0o755)
        return d

    def write(self, d: Path, name: str, text: str, mode: int = 0o644) -> Path:
        path = d / name
        path.write_text(text)
        path.chmod(mode)
        shutil.chown(path, self.user)
        return path

    def submit(self, d: Path, sub: str, *extra: str) -> int:
        """condor_ce_submit of ``sub`` in ``d``: the cluster id."""
        self.write(d, "job.sub", sub)
        out = self.run(["condor_ce_submit", *extra, "job.sub"], cwd=d).stdout
        m = re.search(r"submitted to cluster (\d+)", out)
        assert m, out
        return int(m[1])

    # ------------------------------------------------------------------ reading the queue
    def ads(self, constraint: str, attrs: list[str], history: bool = False) -> list[list[str]]:
        """One row per job: ``attrs`` as condor_ce_q (or condor_ce_history) prints them."""
        tool = "condor_ce_history" if history else "condor_ce_q"
        out = self.run([tool, "-constraint", constraint, "-af:t", *attrs], check=False).stdout
        return [line.split("\t") for line in out.splitlines() if line.strip()]

    def routed(self, cluster: int) -> list[list[str]]:
        """The routed grid jobs of a source cluster: [GridJobId, JobStatus, GridResource]."""
        return self.ads(
            f'RoutedFromJobId =?= "{cluster}.0" || '
            f'regexp("^{cluster}\\\\.", RoutedFromJobId ?: "")',
            ["GridJobId", "JobStatus", "GridResource"],
        )

    def gridmanager_lines(self, pattern: str) -> list[str]:
        lines: list[str] = []
        for path in sorted(self.log_dir.glob("GridmanagerLog.*")):
            lines += [
                ln for ln in path.read_text(errors="replace").splitlines() if re.search(pattern, ln)
            ]
        return lines


def terminations(log: Path) -> dict[str, int | None]:
    """Terminated jobs in a user log: ``{"12.0": exit code or None (abnormal)}``."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}
    done: dict[str, int | None] = {}
    for m in re.finditer(r"^005 \((\d+)\.(\d+)\.\d+\).*\n\s*\(1\) (.*)$", text, re.M):
        code = re.search(r"return value (-?\d+)", m[3])
        done[f"{int(m[1])}.{int(m[2])}"] = int(code[1]) if code else None
    return done


def events(log: Path, code: int) -> int:
    """How many events of ``code`` (``012`` held, ``013`` released ...) a user log has."""
    try:
        return len(re.findall(rf"^{code:03d} \(", log.read_text(errors="replace"), re.M))
    except OSError:
        return 0
