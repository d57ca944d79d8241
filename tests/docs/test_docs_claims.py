"""Claims of the documentation that name code: checked against the code, so that a change
of either shows."""

from __future__ import annotations

import inspect
import re
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


def test_the_readme_layout_names_only_modules_that_exist() -> None:
    """Each ``*.py`` the README's layout section names is in the package on its line."""
    root = DOCS.parent
    text = (root / "README.md").read_text()
    start = text.index("## Layout")
    block = text[text.index("```", start) + 3 : text.index("```", text.index("```", start) + 3)]
    package, missing, named = None, [], 0
    for line in block.splitlines():
        first = line.split("/", 1)[0]
        if first.startswith("gahp_"):
            package = first
        for name in re.findall(r"\b(\w+\.py)\b", line):
            named += 1
            if package is None or not (root / package / name).is_file():
                missing.append(f"{package}/{name}")
    assert named > 30, block
    assert not missing, missing
