"""The remote BLAH path (``grid_resource = batch <lrms> user@127.0.0.1:<port>``): a personal
HTCondor 25.0.13 whose gridmanager runs ``remote_gahp`` over SSH to a cluster account where
``condor_remote_cluster`` and ``blahpd install-remote`` put the pieces, as
``.ci/remote-up.sh`` sets it up.  Without it the tests skip with the reason; with
GAHP_REQUIRE_REMOTE=1 (CI) they fail instead."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from live_services import unavailable
from remote_kit import JOBS_ROOT, REQUIRE, Remote, find_remote


@pytest.fixture(scope="session")
def remote() -> Remote:
    found, reason = find_remote()
    if found is None:
        unavailable(REQUIRE, reason)
    return found


@pytest.fixture(scope="session")
def remote_jobdirs() -> Iterator[Callable[[Remote, str], Path]]:
    """``make(remote, name)``: a fresh job directory the submitter owns."""
    session: list[Path] = []

    def make(remote: Remote, name: str) -> Path:
        if not session:
            JOBS_ROOT.mkdir(parents=True, exist_ok=True)
            JOBS_ROOT.chmod(0o755)
            session.append(Path(tempfile.mkdtemp(prefix="run-", dir=JOBS_ROOT)))
            session[0].chmod(0o755)
        d = session[0] / name
        d.mkdir(parents=True)
        os.chown(d, remote.condor.uid, remote.condor.gid)
        return d

    yield make
    if session and os.environ.get("GAHP_REMOTE_KEEP") != "1":
        shutil.rmtree(session[0], ignore_errors=True)
