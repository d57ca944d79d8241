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


# ---------------------------------------------------------------------- Grid Engine
SGE_VARS = ("SGE_ROOT", "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT", "SGE_ARCH")


def sge_settings() -> dict[str, str]:
    """SGE_ROOT & co.: the environment's when $SGE_ROOT is set, else those in the file
    `.ci/sge-up.sh` writes ($GAHP_SGE_DIR/env, default /tmp/gahp-sge/env).  PATH is never
    changed: SGE's qsub must not hide Slurm's PBS qsub from the pbs tests."""
    if os.environ.get("SGE_ROOT"):
        return {k: os.environ[k] for k in SGE_VARS if os.environ.get(k)}
    path = Path(os.environ.get("GAHP_SGE_DIR", "/tmp/gahp-sge")) / "env"
    settings: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return settings
    for line in lines:
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep and name in SGE_VARS:
            settings[name] = value.strip().strip("'\"")
    return settings


@pytest.fixture(scope="session")
def sge_env() -> dict[str, str] | None:
    """Environment for processes that talk to the live Grid Engine (os.environ plus SGE_ROOT,
    SGE_CELL, SGE_QMASTER_PORT), or None when it is not up."""
    settings = sge_settings()
    if not settings.get("SGE_ROOT"):
        return None
    qstat = sorted(Path(settings["SGE_ROOT"], "bin").glob("*/qstat"))
    if not qstat:
        return None
    env = {**os.environ, **settings}
    try:
        proc = subprocess.run(
            [str(qstat[0]), "-g", "c"], env=env, capture_output=True, text=True, timeout=10
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    if proc.returncode != 0:
        return None
    return env


# ---------------------------------------------------------------------- either
_BATCH = {
    "slurm": ("Slurm", "bash .ci/slurm-up.sh", "GAHP_REQUIRE_SLURM"),
    "sge": ("Grid Engine", "bash .ci/sge-up.sh", "GAHP_REQUIRE_SGE"),
}


@pytest.fixture(scope="session")
def batch_env(slurm_env, sge_env):
    """``need(system)``: the environment for a live batch system ("slurm", "sge"; any case),
    None for one that needs no daemon (fork). Skips when it is down, or fails when its
    GAHP_REQUIRE_* variable is 1 (CI)."""
    envs = {"slurm": slurm_env, "sge": sge_env}

    def need(system: str) -> dict[str, str] | None:
        key = system.lower()
        if key not in _BATCH:
            return None
        env = envs[key]
        if env is None:
            name, start, require = _BATCH[key]
            reason = f"{name} is not reachable (start it with `{start}`)"
            if os.environ.get(require) == "1":
                pytest.fail(f"{require}=1 but {reason}", pytrace=False)
            pytest.skip(reason)
        return env

    return need
