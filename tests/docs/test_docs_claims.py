"""Claims of the documentation that name code: checked against the code, so that a change
of either shows."""

from __future__ import annotations

import inspect
from pathlib import Path

from gahp_boinc import BoincClient, SyncBoincClient
from gahp_core import ServerOptions
from gahp_ninfg.dialect import NinfgDialect

DOCS = Path(__file__).resolve().parents[2] / "docs"


def methods(cls: type) -> set[str]:
    return {n for n, v in inspect.getmembers(cls) if not n.startswith("_") and callable(v)}


def test_sync_client_has_every_method_the_guide_says_it_has():
    text = " ".join((DOCS / "boinc-client.md").read_text().split())
    assert "`SyncBoincClient` has the same methods, blocking, with the same arguments." in text
    lacking = methods(BoincClient) - methods(SyncBoincClient) - {"sync"}  # sync: a factory
    assert lacking == set()


def test_the_shutdown_bounds_of_the_protocol_reference():
    text = " ".join((DOCS / "protocol.md").read_text().split())
    assert f"`quit_grace` ({ServerOptions().quit_grace:g} s" in text
    assert f"{NinfgDialect.shutdown_time:g} s for the Ninf-G dialect" in text
