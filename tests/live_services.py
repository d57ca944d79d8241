"""The one rule for tests of a real service (Slurm, Grid Engine, OpenPBS, LSF, HTCondor, the BOINC
server): without it they skip with the reason; under its ``GAHP_REQUIRE_*=1`` (CI) they fail.
And how the settings files of the ``.ci/*-up.sh`` scripts are read."""

from __future__ import annotations

import os
import pwd
import subprocess
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
