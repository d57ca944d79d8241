"""gahp_boinc's public surface, like httpx's: the names in ``gahp_boinc.__all__``; every
library module is private (``_x``), and the blocking client mirrors the asynchronous one."""

from __future__ import annotations

import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gahp_boinc
from gahp_boinc import BoincClient, SyncBoincClient

ROOT = Path(__file__).resolve().parents[2]

PUBLIC_MODULES = {
    "gahp_boinc",
    "gahp_boinc.__main__",  # python -m gahp_boinc
    "gahp_boinc.cli",  # the boinc-gahp console script
    "gahp_boinc.backend",  # the gahp.backends entry point
    "gahp_boinc.demo",  # the boinc-gahp-demo console script
}
"""The modules of gahp_boinc that are not private, besides the emulator (a documented tool
with its own surface). Console scripts and entry points name these: installed wrappers
import them by name."""


def _private(name: str) -> bool:
    return any(p.startswith("_") and not p.endswith("__") for p in name.split("."))


def test_every_module_but_the_programs_and_the_emulator_is_private():
    names = {i.name for i in pkgutil.walk_packages(gahp_boinc.__path__, "gahp_boinc.")}
    public = {
        n
        for n in names | {"gahp_boinc"}
        if not _private(n) and not n.startswith("gahp_boinc.emulator")
    }
    assert public == PUBLIC_MODULES


def test_all_is_importable_and_lazy():
    assert len(gahp_boinc.__all__) == len(set(gahp_boinc.__all__))
    namespace: dict[str, object] = {}
    exec("from gahp_boinc import *", namespace)
    assert [n for n in gahp_boinc.__all__ if n not in namespace] == []
    for name in gahp_boinc.__all__:
        assert getattr(gahp_boinc, name) is namespace[name]
    # The emulator (python -m gahp_boinc.emulator.apps, once per job) starts without httpx.
    code = "import sys, gahp_boinc, gahp_boinc.emulator; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", [n for n in gahp_boinc.__all__ if n != "__version__"])
def test_every_public_name_is_documented(name):
    obj = getattr(gahp_boinc, name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        assert (obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__), name
    assert getattr(obj, "__module__", "gahp_boinc").startswith("gahp_boinc")


def test_the_reference_lists_every_public_name():
    text = (ROOT / "docs" / "boinc-client.md").read_text().split("## Reference")[1]
    listed = set(re.findall(r"^ {8}- (\w+)$", text, re.M))
    assert listed == set(gahp_boinc.__all__) - {"__version__"}


def _async_methods() -> list[str]:
    return sorted(
        name
        for name, fn in inspect.getmembers(BoincClient, inspect.iscoroutinefunction)
        if not name.startswith("_")
    )


def test_the_mirror_test_sees_every_async_method():
    names = _async_methods()
    assert {"ping", "submit", "submit_request", "fetch_request", "wait", "aclose"} <= set(names)
    assert len(names) >= 29


@pytest.mark.parametrize("name", _async_methods())
def test_sync_client_has_a_blocking_twin_with_the_same_signature(name):
    twin_name = "close" if name == "aclose" else name
    twin = getattr(SyncBoincClient, twin_name, None)
    assert twin is not None, f"SyncBoincClient has no {twin_name}"
    assert not inspect.iscoroutinefunction(twin), f"SyncBoincClient.{twin_name} is async"
    assert inspect.signature(twin) == inspect.signature(getattr(BoincClient, name))
    assert twin.__doc__, f"SyncBoincClient.{twin_name} has no docstring"


def test_the_driver_and_the_demo_take_gahp_boinc_from_its_root():
    """What the boinc job driver and the demo use is public (the general scan of every
    package's imports is in tests/gahp_core/test_public_api.py)."""
    for path in (ROOT / "gahp_lrms" / "boinc.py", ROOT / "gahp_boinc" / "demo.py"):
        text = path.read_text()
        assert not re.search(r"gahp_boinc\._|gahp_core\.testing", text), path
