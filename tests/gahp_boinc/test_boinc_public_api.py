"""gahp_boinc's public surface, like httpx's: the names in ``gahp_boinc.__all__``; every
library module is private (``_x``), and the blocking client mirrors the asynchronous one."""

from __future__ import annotations

import asyncio
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gahp_boinc
from gahp_boinc import BatchStates, BoincClient, Project, SyncBoincClient

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
        assert obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__, name
    assert getattr(obj, "__module__", "gahp_boinc").startswith("gahp_boinc")


def test_the_reference_lists_every_public_name():
    text = (ROOT / "docs" / "boinc-client.md").read_text().split("## Reference")[1]
    listed = set(re.findall(r"^ {8}- (\w+)$", text, re.M))
    assert listed == set(gahp_boinc.__all__) - {"__version__"}


def _async_methods(cls: type = BoincClient) -> list[str]:
    return sorted(
        name
        for name, fn in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    )


def twin_problems(async_cls: type = BoincClient, sync_cls: type = SyncBoincClient) -> list[str]:
    """What keeps ``sync_cls`` from being ``async_cls`` with blocking methods: each public
    coroutine method without a blocking twin of the same signature and with a docstring."""
    problems = []
    for name in _async_methods(async_cls):
        twin_name = "close" if name == "aclose" else name
        twin = getattr(sync_cls, twin_name, None)
        if twin is None:
            problems.append(f"no {twin_name}")
        elif inspect.iscoroutinefunction(twin):
            problems.append(f"{twin_name} is async")
        elif inspect.signature(twin) != inspect.signature(getattr(async_cls, name)):
            problems.append(f"{twin_name}: another signature")
        elif not twin.__doc__:
            problems.append(f"{twin_name}: no docstring")
    return problems


def test_the_mirror_test_sees_every_async_method():
    names = _async_methods()
    assert {"ping", "submit", "submit_request", "fetch_request", "wait", "aclose"} <= set(names)
    assert len(names) >= 29


def test_sync_client_has_a_blocking_twin_with_the_same_signature():
    assert twin_problems() == []


def test_the_mirror_test_finds_a_missing_or_different_twin():
    class Grown(BoincClient):
        async def query_quorum(self, batch_name: str, *, project: Project | None = None) -> int:
            """A method added to the asynchronous client only."""
            return 0

        async def ping(self, *, project: Project | None = None, twice: bool = False) -> None:
            """ping, with another signature."""

    assert twin_problems(Grown, SyncBoincClient) == ["ping: another signature", "no query_quorum"]


def test_a_blocking_twin_runs_the_client_s_own_method(tmp_path):
    """A twin calls the method of the client it wraps (a subclass's override too), on the
    client's loop, and gives back its result."""
    seen = []

    class Counting(BoincClient):
        async def query_batch2(self, batch_names, min_mod_time="0", *, project=None):
            seen.append((list(batch_names), min_mod_time, project, asyncio.get_running_loop()))
            return BatchStates("7", [[("j", "DONE")]])

    with SyncBoincClient("http://127.0.0.1:9/p/", "auth") as sync:
        sync.client = Counting("http://127.0.0.1:9/p/", "auth")
        assert sync.query_batch2(["b"], min_mod_time=5).jobs() == {"j": "DONE"}
    assert seen == [(["b"], 5, None, sync.loop)]


def test_the_driver_and_the_demo_take_gahp_boinc_from_its_root():
    """What the boinc job driver and the demo use is public (the general scan of every
    package's imports is in tests/gahp_core/test_public_api.py)."""
    for path in (ROOT / "gahp_lrms" / "boinc.py", ROOT / "gahp_boinc" / "demo.py"):
        text = path.read_text()
        assert not re.search(r"gahp_boinc\._|gahp_core\.testing", text), path
