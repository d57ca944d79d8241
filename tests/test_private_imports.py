"""Tests import only public names, except where a test says why: an import of a private
module or name of our packages carries ``# private: <reason>`` on the statement."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gahp_core", "gahp_boinc", "gahp_lrms", "gahp_blah", "gahp_ninfg")


def _private_part(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] in PACKAGES and any(p.startswith("_") and p[:2] != "__" for p in parts[1:])


def unexplained(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) for each private import in ``source`` without a ``# private:`` reason."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        what = ""
        if isinstance(node, ast.Import):
            what = ", ".join(a.name for a in node.names if _private_part(a.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [a.name for a in node.names]
            if _private_part(node.module):
                what = f"from {node.module} import {', '.join(names)}"
            elif node.module.split(".")[0] in PACKAGES:
                hidden = [n for n in names if n.startswith("_") and n[:2] != "__"]
                what = f"from {node.module} import {', '.join(hidden)}" if hidden else ""
        if what:
            text = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
            if not any("# private: " in line for line in text):
                yield node.lineno, what


def test_every_private_import_in_the_tests_says_why():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line, what in unexplained(path.read_text())
    ]
    assert found == [], (
        "import the public name, or say why a test needs the private one"
        " (# private: <reason> on the import):\n" + "\n".join(found)
    )


def test_the_scan_finds_an_unexplained_private_import():
    source = (
        "import gahp_core._app\n"
        "from gahp_boinc._rpc import BoincRpc\n"
        "from gahp_blah.backend import _errors\n"
        "from gahp_lrms._boinc_store import (  # private: unit test\n    JobStore,\n)\n"
        "from gahp_boinc import Project\n"
        "def f():\n    from gahp_core._shell import main  # private: the program\n"
    )
    assert [line for line, _ in unexplained(source)] == [1, 2, 3]
