"""The one rule for tests of a real service (Slurm, Grid Engine, OpenPBS, LSF, HTCondor, the BOINC
server): without it they skip with the reason; under its ``GAHP_REQUIRE_*=1`` (CI) they fail.
And how the settings files of the ``.ci/*-up.sh`` scripts are read."""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest


def unavailable(require: str, reason: str) -> NoReturn:
    """The service is not there: skip with ``reason``, or fail when ``$require`` is 1."""
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def env_file(path: Path) -> dict[str, str]:
    """``export NAME=value`` lines of a file the `.ci/*-up.sh` scripts write ({} if none)."""
    settings: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return settings
    for line in lines:
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep and name.strip():
            settings[name.strip()] = value.strip().strip("'\"")
    return settings


def lsf_bin_dir(envdir: str) -> str | None:
    """LSF_BINDIR from ``envdir/lsf.conf``, or None."""
    settings = env_file(Path(envdir) / "lsf.conf")
    return settings.get("LSF_BINDIR")


LSF_USER = os.environ.get("GAHP_LSF_USER", "gahplsf")
"""The account the live LSF tests submit as when they run as root (LSF refuses root's
jobs): created when missing; the LSF commands run as it through ``runuser``."""


def local_user(name: str, what: str = "test") -> pwd.struct_passwd:
    """The ordinary local account ``name``, created when missing (as root)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    proc = subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/sh", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot create the {what} user {name}: {proc.stderr.strip()}")
    return pwd.getpwnam(name)


def lsf_job_user() -> pwd.struct_passwd:
    """:data:`LSF_USER`, created when missing (as root)."""
    return local_user(LSF_USER, "LSF test")


POOL_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
"""An interpreter the HTCondor pool's jobs can run (they run as the pool's owner, who cannot
reach root's pyenv)."""


def pool_job_dir(env: dict[str, str]) -> Path:
    """A fresh directory the HTCondor pool's jobs may write (they run as the pool's owner,
    ``GAHP_HTCONDOR_POOL_USER`` of ``env``, and a test's ``tmp_path`` is root's only); the
    caller removes it."""
    base = Path(env["GAHP_HTCONDOR_POOL_DIR"]) / "jobs"
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o1777)
    path = Path(tempfile.mkdtemp(prefix="t-", dir=base))
    os.chmod(path, 0o755)
    if os.geteuid() == 0:
        user = pwd.getpwnam(env["GAHP_HTCONDOR_POOL_USER"])
        os.chown(path, user.pw_uid, user.pw_gid)
    return path


class BatchLock:
    """The live batch systems, shared between the tests that use them (``fcntl.LOCK_SH``) and
    taken whole by those that stop their servers (``fcntl.LOCK_EX``): an flock on a file of
    this user's ($GAHP_BATCH_LOCK, default ``<tmp>/gahp-batch-systems-<uid>.lock``), so it holds
    across pytest-xdist's workers and across concurrent runs. One holder per process."""

    def __init__(self, path: str | None = None) -> None:
        self.path = (
            path
            or os.environ.get("GAHP_BATCH_LOCK")
            or os.path.join(tempfile.gettempdir(), f"gahp-batch-systems-{os.getuid()}.lock")
        )
        self._fd: int | None = None
        self._mode: int | None = None

    def _open(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            os.close(fd)
            raise RuntimeError(f"{self.path}: not a regular file of ours, writable by us only")
        return fd

    def hold(self, mode: int) -> None:
        """Hold the lock in ``mode`` (waits for it; a held lock of the other mode is dropped
        first, never converted in place, so two holders wanting LOCK_EX cannot deadlock)."""
        if self._mode == mode:
            return
        self.release()
        fd = self._open()
        fcntl.flock(fd, mode)
        self._fd, self._mode = fd, mode

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
        self._fd = self._mode = None
