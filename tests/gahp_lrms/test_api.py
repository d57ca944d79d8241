"""JobSpec validation and the driver registry."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

import gahp_lrms
from gahp_lrms import (
    BlockingDriver,
    Driver,
    DriverError,
    JobInfo,
    JobSpec,
    JobStatus,
    available_drivers,
    get_driver,
    register_driver,
)
from gahp_lrms.base import ThreadedDriver


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
    class Dummy(BlockingDriver):
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
    assert asyncio.run(get_driver("dummy", {}, tmp_path).submit(JobSpec("/bin/x"))) == "1"


def test_a_blocking_driver_is_adapted_once_and_a_native_one_is_used_as_it_is(
    tmp_path, driver_registry
):
    threads: list[str] = []
    workers: list[str] = []

    class Blocking(BlockingDriver):
        name = "blocking"

        def submit(self, spec):
            threads.append(threading.current_thread().name)
            return "7"

        def status(self, native_id):
            threads.append(threading.current_thread().name)
            return JobInfo(JobStatus.IDLE)

        cancel = hold = resume = lambda self, native_id: None  # noqa: E731
        ping = lambda self: None  # noqa: E731

    class Native(Driver):
        name = "native"

        async def submit(self, spec):
            threads.append(threading.current_thread().name)
            return "8"

        status = cancel = hold = resume = submit
        ping = lambda self: asyncio.sleep(0)  # noqa: E731

    async def run_in_worker(fn, *args):
        workers.append(fn.__name__)
        return await asyncio.to_thread(fn, *args)

    register_driver("blocking", Blocking)
    register_driver("native", Native)
    blocking = get_driver("blocking", {}, tmp_path / "b", run_in_worker=run_in_worker)
    native = get_driver("native", {}, tmp_path / "n", run_in_worker=run_in_worker)
    assert isinstance(blocking, ThreadedDriver) and isinstance(blocking.blocking, Blocking)
    assert isinstance(native, Native)

    async def main():
        main_thread = threading.current_thread().name
        assert await blocking.submit(JobSpec("/bin/x")) == "7"
        assert (await blocking.status("7")).status is JobStatus.IDLE
        assert await native.submit(JobSpec("/bin/x")) == "8"
        await blocking.aclose()  # the base class's shutdown hooks exist and do nothing
        await native.aclose()
        return main_thread

    main_thread = asyncio.run(main())
    assert workers == ["submit", "status"]  # the blocking calls, in the given worker pool
    assert threads[:2] != [main_thread] * 2 and threads[2] == main_thread


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
            asyncio.run(call())
