"""gahp_core's public API: the names in ``gahp_core.__all__`` (and the ``gahp_core.testing``
kit); every other module of gahp_core is private, and nothing outside gahp_core imports one.

The framework's own white-box tests (``tests/gahp_core``) may import from its private
modules what is not public; every other package, test, benchmark and documentation
example goes through the root.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import gahp_core

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "gahp_core"

PUBLIC_MODULES = {"gahp_core", "gahp_core.testing", "gahp_core.__main__"}
"""The modules of gahp_core that are not private (``__main__`` is ``python -m gahp_core``)."""

# Where code that must go through the public API lives.
CLIENT_DIRS = ("gahp_boinc", "gahp_lrms", "gahp_blah", "gahp_ninfg", "benchmarks", "tests")
WHITE_BOX = ROOT / "tests" / "gahp_core"

_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def is_private(module: str) -> bool:
    """Whether ``module`` names a private part of gahp_core (``gahp_core._x``...)."""
    parts = module.split(".")
    return parts[0] == "gahp_core" and any(p.startswith("_") and p != "__main__" for p in parts)


def private_imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for each import of a private gahp_core module or name in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_private(alias.name):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if is_private(node.module):
                yield node.lineno, f"from {node.module} import ..."
            elif node.module.split(".")[0] == "gahp_core":
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name != "__version__":
                        yield node.lineno, f"from {node.module} import {alias.name}"


def client_sources() -> Iterator[tuple[str, ast.AST]]:
    """Every Python source outside gahp_core (but its white-box tests) and every Python
    example in the docs, parsed."""
    for top in CLIENT_DIRS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.is_relative_to(WHITE_BOX):
                continue
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))
    docs = ROOT / "docs"
    for path in sorted(docs.rglob("*.py")):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))
    for path in sorted(docs.rglob("*.md")):
        for i, block in enumerate(_FENCE.findall(path.read_text())):
            try:
                tree = ast.parse(block)
            except SyntaxError:  # a fragment, not a program
                continue
            yield f"{path.relative_to(ROOT)} (python block {i + 1})", tree


def test_nothing_outside_the_core_imports_a_private_module():
    found = [
        f"{where}:{line}: {what}"
        for where, tree in client_sources()
        for line, what in private_imports(tree)
    ]
    assert found == [], "import these from gahp_core (or gahp_core.testing):\n" + "\n".join(found)


def test_white_box_tests_take_public_names_from_the_root():
    public = set(gahp_core.__all__)
    found = []
    for path in sorted(WHITE_BOX.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and is_private(node.module or "")
            ):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}"
                    for alias in node.names
                    if alias.name in public
                ]
    assert found == [], "import these from gahp_core:\n" + "\n".join(found)


def test_the_scan_finds_a_private_import():
    tree = ast.parse(
        "import gahp_core._app\n"
        "from gahp_core._config import ConfigError\n"
        "from gahp_core import _hooks, Command\n"
        "from gahp_core.testing import GahpClient\n"
        "def f():\n    from gahp_core._escaping import join\n"
    )
    assert sorted(private_imports(tree)) == [
        (1, "import gahp_core._app"),
        (2, "from gahp_core._config import ..."),
        (3, "from gahp_core import _hooks"),
        (6, "from gahp_core._escaping import ..."),
    ]


def test_every_module_but_the_root_and_the_test_kit_is_private():
    names = {info.name for info in pkgutil.walk_packages(gahp_core.__path__, "gahp_core.")} | {
        "gahp_core"
    }
    public = {n for n in names if not is_private(n)}
    assert public == PUBLIC_MODULES


def test_all_is_importable():
    assert len(gahp_core.__all__) == len(set(gahp_core.__all__))
    namespace: dict[str, object] = {}
    exec("from gahp_core import *", namespace)
    missing = [name for name in gahp_core.__all__ if name not in namespace]
    assert missing == []
    for name in gahp_core.__all__:
        assert getattr(gahp_core, name) is namespace[name]


def attribute_docstrings() -> dict[str, str]:
    """Module-level names of gahp_core's modules documented by a string right after their
    assignment (the convention mkdocstrings reads)."""
    found: dict[str, str] = {}
    for path in sorted(CORE.glob("*.py")):
        body = ast.parse(path.read_text()).body
        for node, after in zip(body, body[1:], strict=False):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            elif isinstance(node, ast.AnnAssign):
                target = node.target
            else:
                continue
            if (
                isinstance(target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
                and after.value.value.strip()
            ):
                found[target.id] = after.value.value
    return found


def own_docstring(obj: object) -> str | None:
    """The docstring ``obj`` has itself (a class does not inherit its base's here)."""
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__")
    if inspect.isroutine(obj):
        return inspect.getdoc(obj)
    return None


@pytest.mark.parametrize("name", [n for n in gahp_core.__all__ if n != "__version__"])
def test_every_public_name_is_documented(name):
    obj = getattr(gahp_core, name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        doc = own_docstring(obj)
        assert doc and doc.strip(), f"gahp_core.{name} has no docstring"
        assert obj.__module__.startswith("gahp_core")
    else:
        assert name in attribute_docstrings(), f"gahp_core.{name} has no attribute docstring"


def test_the_version_is_documented():
    assert isinstance(gahp_core.__version__, str)
    assert "__version__" in (gahp_core.__doc__ or "")


def test_the_api_reference_lists_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text()
    listed = set(re.findall(r"^ {8}- (\w+)$", text.split("## gahp_core.testing")[0], re.M))
    assert listed == set(gahp_core.__all__) - {"__version__"}


def test_the_test_kit_is_importable_and_documented():
    testing = importlib.import_module("gahp_core.testing")
    for name in testing.__all__:
        assert own_docstring(getattr(testing, name)), name
    text = (ROOT / "docs" / "api.md").read_text().split("## gahp_core.testing")[1]
    assert set(re.findall(r"^ {8}- (\w+)$", text, re.M)) == set(testing.__all__)


def test_the_console_scripts_and_backends_resolve():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    targets = [*project["scripts"].values()]
    targets += [f"{module}:" for module in project["entry-points"]["gahp.backends"].values()]
    for target in targets:
        module, _, attr = target.partition(":")
        loaded = importlib.import_module(module)
        assert not attr or callable(getattr(loaded, attr)), target


# ---- every package's private modules, not gahp_core's alone -----------------------------------

PACKAGES = ("gahp_core", "gahp_boinc", "gahp_lrms", "gahp_blah", "gahp_ninfg")
"""The packages of the distribution: each one's ``_x`` modules and names are its own."""

TESTED_BY: dict[str, tuple[str, ...]] = {f"tests/{p}": (p,) for p in PACKAGES} | {
    "tests/boinc_real": ("gahp_boinc",),
    "tests/ninfg_real": ("gahp_ninfg",),
    "tests/reliability": ("gahp_boinc",),  # white-box security checks of the BOINC client
    "tests/docs": ("gahp_boinc", "gahp_lrms"),  # documented settings, read by their loaders
}
"""Test directories and the packages whose private parts their white-box tests may import
(gahp_core's only from tests/gahp_core, as the tests above check)."""

SHIPPED = ("gahp_boinc", "gahp_lrms", "gahp_blah", "gahp_ninfg")
"""Packages that must not need the test kit (gahp-shell, in gahp_core, is built on it)."""


def _private_part(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def foreign_private_imports(tree: ast.AST, own: tuple[str, ...] = ()) -> Iterator[tuple[int, str]]:
    """(line, what) for each import in ``tree`` of a private module or name of one of
    :data:`PACKAGES` not in ``own`` (relative imports stay inside their package)."""

    def private(module: str) -> bool:
        parts = module.split(".")
        return parts[0] in PACKAGES and parts[0] not in own and any(map(_private_part, parts))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if private(alias.name):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if private(node.module):
                yield node.lineno, f"from {node.module} import ..."
            else:
                for alias in node.names:
                    if private(f"{node.module}.{alias.name}"):
                        yield node.lineno, f"from {node.module} import {alias.name}"


def owner(where: str) -> tuple[str, ...]:
    """The packages whose private parts the source at ``where`` may import."""
    parts = Path(where.split(" ")[0]).parts
    if parts[0] in PACKAGES:
        return (parts[0],)
    if parts[0] == "tests" and len(parts) > 1:
        return TESTED_BY.get(f"tests/{parts[1]}", ())
    return ()


def all_sources() -> Iterator[tuple[str, ast.AST]]:
    """Every package's sources (gahp_core's included) and whatever :func:`client_sources`
    reads (tests, benchmarks, documentation examples)."""
    yield from client_sources()
    for path in sorted(CORE.rglob("*.py")):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))
    for path in sorted(WHITE_BOX.rglob("*.py")):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def test_no_package_imports_another_package_private_module():
    found = [
        f"{where}:{line}: {what}"
        for where, tree in all_sources()
        for line, what in foreign_private_imports(tree, owner(where))
    ]
    assert found == [], "import these from the package's root:\n" + "\n".join(found)


def test_the_scan_finds_another_package_private_import():
    tree = ast.parse(
        "import gahp_boinc._rpc\n"
        "from gahp_boinc._submit import SubmitRequest\n"
        "from gahp_lrms import _load, DriverError\n"
        "from gahp_boinc import SyncBoincClient, __version__\n"
        "from gahp_boinc.emulator import EmulatorServer\n"
        "from gahp_ninfg._x import y\n"
        "def f():\n    from gahp_core._escaping import join\n"
    )
    assert sorted(foreign_private_imports(tree, ("gahp_ninfg",))) == [
        (1, "import gahp_boinc._rpc"),
        (2, "from gahp_boinc._submit import ..."),
        (3, "from gahp_lrms import _load"),
        (8, "from gahp_core._escaping import ..."),
    ]
    assert owner("gahp_lrms/boinc.py") == ("gahp_lrms",)
    assert owner("tests/boinc_real/test_gahp_real.py") == ("gahp_boinc",)
    assert owner("tests/htcondor/test_htcondor_boinc.py") == ()
    assert owner("benchmarks/boinc_submit.py") == ()
    assert owner("gahp_boinc/demo.py") == ("gahp_boinc",)
    assert owner("docs/boinc-client.md (python block 3)") == ()


def test_shipped_packages_do_not_need_the_test_kit():
    found = []
    for top in SHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                else:
                    continue
                if any(n == "gahp_core.testing" or n.split(".")[0] == "tests" for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], "shipped code importing the test kit:\n" + "\n".join(found)


def test_help_shows_every_attribute_of_the_public_value_classes():
    """``help()`` shows a class's docstring, not its attributes' own: each public field of
    a public attrs class is named in its class's docstring (``warn``, ``spawn``...)."""
    import attrs

    missing = {}
    for name in gahp_core.__all__:
        obj = getattr(gahp_core, name)
        if isinstance(obj, type) and attrs.has(obj):
            doc = obj.__doc__ or ""
            absent = [f.name for f in attrs.fields(obj) if not re.search(rf"\b{f.name}\b", doc)]
            if absent:
                missing[name] = absent
    assert not missing, missing
