"""Claims of the documentation that name code: checked against the code, so that a change
of either shows."""

from __future__ import annotations

import fnmatch
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
    assert "`SyncBoincClient` has the same methods, blocking, with the same arguments" in text
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


def test_the_readme_layout_names_every_module() -> None:
    """Each module of each package (but ``__init__``/``__main__``) is named on its
    package's lines of the README's layout section (``_boinc_*.py`` names a family), and
    each subpackage as ``name/``."""
    root = DOCS.parent
    text = (root / "README.md").read_text()
    start = text.index("## Layout")
    block = text[text.index("```", start) + 3 : text.index("```", text.index("```", start) + 3)]
    lines: dict[str, str] = {}
    package = None
    for line in block.splitlines():
        first = line.split("/", 1)[0]
        if first.startswith("gahp_"):
            package = first
        if package is not None:
            lines[package] = lines.get(package, "") + " " + line
    unnamed = []
    for package, described in sorted(lines.items()):
        patterns = re.findall(r"[\w*]+\.py", described)
        for path in sorted((root / package).iterdir()):
            if path.suffix == ".py" and not path.name.startswith("__"):
                if not any(fnmatch.fnmatchcase(path.name, p) for p in patterns):
                    unnamed.append(f"{package}/{path.name}")
            elif (path / "__init__.py").is_file() and f"{path.name}/" not in described:
                unnamed.append(f"{package}/{path.name}/")
    assert len(lines) == 5, sorted(lines)
    assert not unnamed, f"the README's layout does not name {unnamed}"
