"""Helpers shared by the reliability tests (BOINC GAHP requests, waiting)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient

BOINC_GAHP = [sys.executable, "-m", "gahp_boinc"]
BLAHPD = [sys.executable, "-m", "gahp_blah"]


def select(c: GahpClient, srv: EmulatorServer) -> None:
    assert c.command("BOINC_SELECT_PROJECT", srv.url, srv.authenticator) == ["S"]


def submit_args(batch: str, app: str, jobs: list[tuple[str, Path]], extra: int = 0) -> list[str]:
    """BOINC_SUBMIT arguments: one input file per job, no job arguments, six NULL params."""
    args = [batch, app, str(len(jobs))]
    for name, path in jobs:
        args += [name, "0", "1", str(path), "in"]
    return args + ["NULL"] * 6


def wait_done(c: GahpClient, batch: str, n: int, timeout: float = 30) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        res = c.call("BOINC_QUERY_BATCHES", "0", "1", batch, timeout=60)
        assert res[0] == "NULL", res
        states = dict(zip(res[3::2], res[4::2], strict=True))
        if len(states) == n and set(states.values()) <= {"DONE", "ERROR"}:
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.1)
