"""Fixtures shared across packages: the live Slurm, when one is reachable."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def slurm_conf_path() -> str | None:
    """$SLURM_CONF, else the file `.ci/slurm-up.sh` writes, else Slurm's default."""
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    candidate = Path(os.environ.get("GAHP_SLURM_DIR", "/tmp/gahp-slurm")) / "slurm.conf"
    return str(candidate) if candidate.exists() else None


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str] | None:
    """Environment for processes that talk to the live Slurm, or None when it is down."""
    if shutil.which("sinfo") is None:
        return None
    env = dict(os.environ)
    conf = slurm_conf_path()
    if conf:
        env["SLURM_CONF"] = conf
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return env
