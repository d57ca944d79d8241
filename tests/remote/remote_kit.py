"""The remote BLAH path as `.ci/remote-up.sh` sets it up: the access point's HTCondor (as its
submitter) and the cluster account it reaches over SSH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "htcondor"))

from htcondor_kit import HTCondor, read_env  # noqa: E402

REQUIRE = "GAHP_REQUIRE_REMOTE"
START = "start it with `bash .ci/remote-up.sh` (after the batch systems)"
JOBS_ROOT = Path(os.environ.get("GAHP_REMOTE_JOBS", "/tmp/gahp-remote-jobs"))


@dataclass
class Remote:
    """The access point (``condor``, as its submitter) and the cluster account it reaches."""

    condor: HTCondor
    user: str
    home: Path
    resource: str  # user@127.0.0.1:port
    port: int
    sshd_pidfile: Path

    def grid_resource(self, lrms: str) -> str:
        return f"batch {lrms} {self.resource}"

    def ssh(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``command`` run by the cluster account's login shell, over SSH as the submitter."""
        return subprocess.run(
            [
                "runuser",
                "-u",
                self.condor.owner,
                "--",
                "ssh",
                "-p",
                str(self.port),
                "-o",
                "BatchMode=yes",
                f"{self.user}@127.0.0.1",
                "/bin/bash",
                "-l",
                "-c",
                f"'{command}'",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def find_remote() -> tuple[Remote | None, str]:
    path = Path(os.environ.get("GAHP_REMOTE_DIR", "/tmp/gahp-remote")) / "env"
    if not path.exists():
        return None, f"no remote path ({path} missing; {START})"
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None, "the remote tests submit as the submitter: they must run as root"
    try:
        env = read_env(path)
        condor = HTCondor(env)
        remote = Remote(
            condor,
            env["GAHP_REMOTE_USER"],
            Path(env["GAHP_REMOTE_HOME"]),
            env["GAHP_REMOTE_RESOURCE"],
            int(env["GAHP_REMOTE_PORT"]),
            Path(env["GAHP_REMOTE_SSHD_PID"]),
        )
    except (KeyError, OSError, ValueError) as exc:
        return None, f"bad env file {path}: {exc}"
    if not condor.answers():
        return None, f"the access point's HTCondor does not answer condor_q ({START})"
    try:
        probe = remote.ssh("bosco/glite/bin/blahpd install-remote --help >/dev/null && echo ok")
    except subprocess.TimeoutExpired:
        return None, f"ssh to {remote.resource} does not answer ({START})"
    if probe.stdout.strip() != "ok":
        return None, f"ssh to {remote.resource} fails: {probe.stderr.strip()[-300:]} ({START})"
    return remote, ""
