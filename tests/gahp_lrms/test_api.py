"""JobSpec validation and the driver registry."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import gahp_lrms
from gahp_lrms import (
    Driver,
    DriverError,
    JobInfo,
    JobSpec,
    JobStatus,
    available_drivers,
    get_driver,
    register_driver,
)


@pytest.fixture
def driver_registry(monkeypatch) -> Iterator[None]:
    """The drivers a test registers are gone after it: the registry is process-wide."""
    before = set(available_drivers())
    with monkeypatch.context() as m:
        m.setattr(gahp_lrms, "_registered", dict(gahp_lrms._registered))
        yield
    assert set(available_drivers()) == before, "the test's drivers are still registered"


def test_status_codes_are_blahs():
    assert [s.value for s in JobStatus] == [1, 2, 3, 4, 5]
    assert [s.name for s in JobStatus] == ["IDLE", "RUNNING", "REMOVED", "COMPLETED", "HELD"]
    assert JobInfo(JobStatus.REMOVED).finished and not JobInfo(JobStatus.HELD).finished


def test_jobspec_is_frozen_and_normalised(tmp_path):
    spec = JobSpec("/bin/x", ["a"], {"A": "1"}, stdout=tmp_path / "o")
    assert spec.arguments == ("a",) and spec.stdout == str(tmp_path / "o")
    with pytest.raises(AttributeError):
        spec.count = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.environment["B"] = "2"  # type: ignore[index]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"executable": ""},
        {"executable": "/bin/x", "arguments": "a b"},
        {"executable": "/bin/x", "arguments": ("a\0b",)},
        {"executable": "/bin/x", "environment": {"1BAD": "x"}},
        {"executable": "/bin/x", "environment": {"A=B": "x"}},
        {"executable": "/bin/x", "environment": {"A": "x\0"}},
        {"executable": "/bin/x", "count": 0},
        {"executable": "/bin/x", "memory_mb": 0},
        {"executable": "/bin/x", "workdir": "/a\0b"},
    ],
)
def test_jobspec_rejects(kwargs):
    with pytest.raises((ValueError, TypeError)):
        JobSpec(**kwargs)


def test_registry(tmp_path):
    assert {"fork", "slurm", "pbs"} <= set(available_drivers())
    driver = get_driver("fork", {}, tmp_path / "new" / "state")
    assert isinstance(driver, Driver) and driver.name == "fork"
    assert (tmp_path / "new" / "state").is_dir()
    with pytest.raises(DriverError, match="no job driver named 'nope'"):
        get_driver("nope", {}, tmp_path)
    with pytest.raises(DriverError, match="unknown configuration key"):
        get_driver("slurm", {"slurm_cnof": "x"}, tmp_path)


def test_register_custom_driver(tmp_path, driver_registry):
    class Dummy(Driver):
        name = "dummy"

        def submit(self, spec):
            return "1"

        def status(self, native_id):
            return JobInfo(JobStatus.COMPLETED, exit_code=0)

        cancel = hold = resume = lambda self, native_id: None  # noqa: E731

        def ping(self):
            return None

    register_driver("dummy", Dummy)
    assert "dummy" in available_drivers()
    assert get_driver("dummy", {}, tmp_path).submit(JobSpec("/bin/x")) == "1"


def test_a_driver_that_takes_a_loop_gets_the_servers_and_others_keep_their_signature(
    tmp_path, driver_registry
):
    made: list[tuple[str, object]] = []

    class Plain(Driver):
        name = "plain"
        submit = status = cancel = hold = resume = lambda self, *a: None  # noqa: E731
        ping = lambda self: None  # noqa: E731

    class Looped(Plain):
        name = "looped"

        def __init__(self, config, state_dir, *, loop=None):
            super().__init__(config, state_dir)
            made.append(("looped", loop))

    def factory(config, state_dir):  # a callable with the documented signature only
        made.append(("factory", None))
        return Plain(config, state_dir)

    register_driver("plain", Plain)
    register_driver("looped", Looped)
    register_driver("factory", factory)
    loop = asyncio.new_event_loop()
    try:
        assert isinstance(get_driver("plain", {}, tmp_path / "p", loop=loop), Plain)
        get_driver("looped", {}, tmp_path / "l", loop=loop)
        get_driver("looped", {}, tmp_path / "l")
        get_driver("factory", {}, tmp_path / "f", loop=loop)
    finally:
        loop.close()
    assert made == [("looped", loop), ("looped", None), ("factory", None)]
    # the base class's shutdown hook exists and does nothing
    asyncio.run(Plain({}, tmp_path / "p").aclose())


def test_commands_fail_with_clear_errors(tmp_path):
    from gahp_lrms.base import run_command

    with pytest.raises(DriverError, match="command not found"):
        run_command(["/nonexistent/sbatch"])
    with pytest.raises(DriverError, match=r"exit status 3\): boom"):
        run_command(["/bin/sh", "-c", "echo boom >&2; exit 3"])
    with pytest.raises(DriverError, match="did not answer within 0.2 s"):
        run_command(["/bin/sleep", "5"], timeout=0.2)


def test_slurm_down_is_an_error(tmp_path):
    """A batch system that does not answer raises DriverError (never a guessed status)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "sbatch", "scancel", "sacct"):
        tool = bin_dir / name
        error = "slurm_load_jobs error: Unable to contact slurm controller"
        tool.write_text(f"#!/bin/sh\necho '{error}' >&2\nexit 1\n")
        tool.chmod(0o755)
    driver = get_driver("slurm", {"bin_dir": str(bin_dir)}, tmp_path)
    for call in (driver.ping, lambda: driver.status("12"), lambda: driver.submit(JobSpec("/x"))):
        with pytest.raises(DriverError, match="Unable to contact"):
            call()
