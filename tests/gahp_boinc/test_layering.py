"""gahp_boinc's modules import one another without a cycle, counting the imports made
inside functions (a cycle hidden there is still one), not those for type checkers only;
and the RPC layer reaches HTTP only through the transport seam."""

from __future__ import annotations

import ast
from pathlib import Path

import gahp_boinc

PACKAGE = Path(gahp_boinc.__file__).parent


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.add(child.module)
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            visit(child)

    visit(tree)
    return {m for m in found if m == "gahp_boinc" or m.startswith("gahp_boinc.")}


def graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the gahp_boinc modules it imports at run time."""
    modules: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        modules[name] = _runtime_imports(ast.parse(path.read_text()))
    return modules


def cycles(modules: dict[str, set[str]]) -> list[list[str]]:
    """Each import cycle found (depth-first), as the modules along it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def walk(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(modules.get(name, ())):
            if dep == "gahp_boinc" or dep not in modules:
                continue  # the package's lazy re-exports, or a name outside it
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                walk(dep, [*path, dep])
        state[name] = 2

    for name in sorted(modules):
        if name not in state:
            walk(name, [name])
    return found


def test_no_import_cycle_in_gahp_boinc() -> None:
    assert cycles(graph()) == []


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "gahp_boinc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from gahp_boinc.b import x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gahp_boinc.a import y\n"
        "def f():\n    from gahp_boinc.a import y\n"
    )
    assert cycles(graph(pkg)) == [["gahp_boinc.a", "gahp_boinc.b", "gahp_boinc.a"]]
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gahp_boinc.a\n"
    )
    assert cycles(graph(pkg)) == []


def test_the_rpc_layer_reaches_http_only_through_the_transport() -> None:
    modules = graph()
    for name in ("gahp_boinc._rpc", "gahp_boinc._retry", "gahp_boinc._downloads"):
        assert "gahp_boinc._httpx_transport" not in modules[name], name


def private_imports(root: Path = PACKAGE) -> list[str]:
    """``module: name`` for each private name a gahp_boinc module takes from another."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gahp_boinc"):
                found += [
                    f"{path.name}: {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    return found


def test_no_module_takes_another_s_private_names() -> None:
    assert private_imports() == []


def test_the_check_finds_a_private_name(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from gahp_boinc._replies import _DECL, decode_text\n")
    assert private_imports(tmp_path) == ["a.py: _DECL"]
