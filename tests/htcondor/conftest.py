"""The real HTCondor gridmanager driving our GAHPs: fixtures.  Without an HTCondor (start one
with `bash .ci/htcondor-up.sh VERSION`) the tests skip with the reason; with
GAHP_REQUIRE_HTCONDOR=1 (CI) they fail instead."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from htcondor_kit import (
    JOBS_ROOT,
    VERSIONS,
    Emulator,
    HTCondor,
    env_file,
    read_env,
    running_emulator,
)
from live_services import unavailable


# ---------------------------------------------------------------------- fixtures
def _find(version: str) -> tuple[HTCondor | None, str]:
    path = env_file(version)
    start = f"start it with `bash .ci/htcondor-up.sh {version}`"
    if not path.exists():
        return None, f"no HTCondor {version} ({path} missing; {start})"
    try:
        condor = HTCondor(read_env(path))
    except (KeyError, OSError) as exc:
        return None, f"HTCondor {version}: bad env file {path}: {exc}"
    if shutil.which("runuser") is None or os.geteuid() != 0:
        return None, "the HTCondor tests submit as the job owner: they must run as root"
    if not condor.answers():
        return None, f"HTCondor {version} does not answer condor_q ({start})"
    return condor, ""


@pytest.fixture(scope="session")
def htcondors() -> dict[str, tuple[HTCondor | None, str]]:
    """Each version: the HTCondor, or None and why not."""
    return {v: _find(v) for v in VERSIONS}


@pytest.fixture(scope="session")
def need_htcondor(htcondors) -> Callable[[str], HTCondor]:
    """``need(version)``: that HTCondor, else skip (or fail with GAHP_REQUIRE_HTCONDOR=1)."""

    def need(version: str) -> HTCondor:
        condor, reason = htcondors[version]
        if condor is None:
            unavailable("GAHP_REQUIRE_HTCONDOR", reason)
        return condor

    return need


@pytest.fixture(scope="session")
def jobdirs() -> Iterator[Callable[[HTCondor, str], Path]]:
    """``make(condor, name)``: a fresh job directory the job owner can write (under one
    directory per session, made on first use and removed at the end)."""
    session: list[Path] = []

    def make(condor: HTCondor, name: str) -> Path:
        if not session:
            JOBS_ROOT.mkdir(parents=True, exist_ok=True)
            JOBS_ROOT.chmod(0o755)
            session.append(Path(tempfile.mkdtemp(prefix="run-", dir=JOBS_ROOT)))
            session[0].chmod(0o755)
        d = session[0] / f"{condor.version}-{name}"
        d.mkdir(parents=True)
        os.chown(d, condor.uid, condor.gid)
        return d

    yield make
    if session and os.environ.get("GAHP_HTCONDOR_KEEP") != "1":
        shutil.rmtree(session[0], ignore_errors=True)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Iterator[Emulator]:
    """A boinc-emulator on a free loopback port, for one module."""
    with running_emulator(tmp_path_factory.mktemp("boinc-project")) as emu:
        yield emu
