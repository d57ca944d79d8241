"""Defects the real Ninf-G client found in the invoke servers, each pinned here.

Protocol-level tests run ``ng_invoke_server.Fork`` as the client does; the rest drive the
job manager with a fake driver whose timing the test controls.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_invoke_server import NinfgClient, alive, base_attrs

from gahp_lrms import JobInfo, JobSpec, JobStatus
from gahp_lrms.base import CommandDriver, Features, ThreadedDriver
from gahp_ninfg.jobs import JobManager


def fork_server(tmp_path: Path, *args: str, **env: str) -> NinfgClient:
    exe = str(Path(sys.executable).parent / "ng_invoke_server.Fork")
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    client = NinfgClient(exe, {"TMPDIR": str(tmp), **env}, tmp_path / "invoke.log")
    if args:  # restart with extra arguments (NinfgClient passes only -l)
        client.proc.kill()
        client.proc.wait()
        full = {**os.environ, "TMPDIR": str(tmp), **env}
        client.proc = subprocess.Popen(
            [exe, *args, "-l", str(tmp_path / "invoke.log")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full,
        )
        client.out = type(client.out)(client.proc.stdout)
        client.err = type(client.err)(client.proc.stderr)
    return client


@pytest.fixture
def program(tmp_path: Path) -> Path:
    from test_invoke_server import PROGRAM

    path = tmp_path / "ng_exe.py"
    path.write_text(f"#!{sys.executable}\n{PROGRAM}")
    path.chmod(0o755)
    return path


def run_job(client: NinfgClient, program: Path, **extra: str) -> str:
    reply, note = client.create(base_attrs(program, **extra))
    assert reply == "S" and note.split()[2] == "S", note
    return note.split()[3]


# ---------------------------------------------------------------------- 1: nothing on disk
@pytest.mark.parametrize("ending", ["EXIT", "EOF"])
def test_nothing_left_on_disk_after_exit_or_eof(tmp_path, program, ending):
    client = fork_server(tmp_path)
    jobid = run_job(client, program, **{"argument": "--secret-arg"})
    client.statuses(jobid)
    assert client.request(f"JOB_DESTROY {jobid}") == "S"
    run_job(client, program, environment="NG_T_SLEEP=30")  # still running at the end
    if ending == "EXIT":
        assert client.request("EXIT") == "S"
    assert client.close() == 0
    left = [str(p) for p in (tmp_path / "tmp").rglob("*")]
    assert not left, left


# ---------------------------------------------------------------------- 2: file modes
def test_redirect_files_keep_their_mode_and_inode(tmp_path, program):
    out, err = tmp_path / "ngtmpfile.out", tmp_path / "ngtmpfile.err"
    for path in (out, err):
        path.touch(mode=0o600)
        path.chmod(0o600)
    inodes = [out.stat().st_ino, err.stat().st_ino]
    client = fork_server(tmp_path)
    jobid = run_job(
        client,
        program,
        count="2",
        redirect_enable="true",
        stdout_file=str(out),
        stderr_file=str(err),
    )
    client.statuses(jobid)
    assert [out.stat().st_ino, err.stat().st_ino] == inodes
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(err.stat().st_mode) == 0o600
    assert len(out.read_text().splitlines()) == 2
    assert err.read_text() == "stderr line\n" * 2
    assert client.request("EXIT") == "S"
    client.close()


def test_private_state_is_private(tmp_path, program):
    client = fork_server(tmp_path)
    run_job(client, program, environment="NG_T_SLEEP=30")
    (state,) = (tmp_path / "tmp").glob("ng-invoke-fork-*")
    loose = [
        f"{p} {stat.S_IMODE(p.stat().st_mode):o}"
        for p in [state, *state.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) & 0o077
        and not p.is_symlink()
        and p.suffix not in (".0",)  # the job's own outputs: created by the job, in 0700
    ]
    assert not loose, loose
    assert client.request("EXIT") == "S"
    client.close()


# ---------------------------------------------------------------------- fake driver
class FakeBatch(CommandDriver):
    """A batch system in memory: jobs run until ``finish``; ``submit`` may be slowed."""

    name = "fakebatch"
    system = "FakeBatch"
    features = Features(bulk_status=True)
    config_keys = CommandDriver.common_keys

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        self.states: dict[str, JobStatus] = {}
        self.exit_codes: dict[str, int] = {}
        self.initial = JobStatus.RUNNING
        self.cancelled: list[str] = []
        self.submit_gate = threading.Event()
        self.submit_gate.set()
        self.submitting = threading.Event()
        self.bulk_calls = 0

    def submit(self, spec: JobSpec) -> str:
        self.submitting.set()
        self.submit_gate.wait(10)
        native = str(len(self.states) + 1)
        self.states[native] = self.initial
        return native

    def bulk_status(self, native_ids: Sequence[str]) -> dict[str, JobInfo]:
        self.bulk_calls += 1
        return {n: self.query_status(n) for n in native_ids if n in self.states}

    def query_status(self, native_id: str) -> JobInfo:
        status = self.states.get(native_id, JobStatus.COMPLETED)
        return JobInfo(status, exit_code=self.exit_codes.get(native_id))

    def cancel(self, native_id: str) -> None:
        self.cancelled.append(native_id)
        if self.states.get(native_id) is JobStatus.RUNNING:
            self.states[native_id] = JobStatus.REMOVED

    def hold(self, native_id: str) -> None:
        raise NotImplementedError

    def resume(self, native_id: str) -> None:
        raise NotImplementedError

    def ping(self) -> None:
        pass

    def _check_id(self, native_id: str) -> str:
        return native_id


class Harness:
    """A job manager on a :class:`FakeBatch`, on the running loop."""

    def __init__(self, tmp_path: Path) -> None:
        self.batch = FakeBatch({}, tmp_path / "lrms")
        self.driver = ThreadedDriver(self.batch, self._worker)
        self.notes: list[tuple[str, ...]] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.manager = JobManager(
            self.driver, self._worker, self._spawn, self.notes.append, 3.0, tmp_path / "jobs"
        )

    async def _worker(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.append(task)
        return task

    def create(self, program: Path, polling: str = "1") -> None:
        attrs = [(k, v) for k, v in base_attrs(program) if k != "status_polling"]
        self.manager.create("1", [*attrs, ("status_polling", polling)])

    async def note(self, *prefix: str, timeout: float = 10.0) -> tuple[str, ...]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in self.notes:
                if tuple(n[: len(prefix)]) == prefix:
                    return tuple(n)
            await asyncio.sleep(0.01)
        raise AssertionError(f"no notification {prefix}: {self.notes}")


# ---------------------------------------------------------------------- 3: status interval
def test_status_interval_follows_status_polling(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        assert h.driver.statuses.interval == 5.0  # the driver's own default
        h.create(program, polling="1")
        await h.note("CREATE_NOTIFY", "1", "S")
        assert h.driver.statuses.interval <= 1.0
        registry = h.driver.statuses.registry
        assert registry is not None and registry.interval <= 1.0
        await h.manager.shutdown()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- 4: forgetting
def test_destroyed_jobs_are_forgotten(tmp_path, program):
    client = fork_server(tmp_path)
    jobid = run_job(client, program)
    client.statuses(jobid)
    assert client.request(f"JOB_DESTROY {jobid}") == "S"
    assert client.request(f"JOB_STATUS {jobid}").startswith("F ")
    assert client.request(f"JOB_DESTROY {jobid}").startswith("F ")
    assert client.request("EXIT") == "S"
    client.close()


def test_destroyed_jobs_leave_the_job_table(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        h.create(program)
        jid = (await h.note("CREATE_NOTIFY", "1", "S"))[3]
        h.manager.destroy(jid)
        await h.note("STATUS_NOTIFY", jid, "DONE")
        await asyncio.gather(*h.tasks)
        assert h.manager.jobs == {}
        await h.manager.shutdown()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- 5: shutdown sweep
def test_shutdown_cancels_a_job_in_mid_submit(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        h.batch.submit_gate.clear()
        h.create(program)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, h.batch.submitting.wait, 10)
        for task in h.tasks:  # as the server does at shutdown
            task.cancel()
        loop.call_later(0.3, h.batch.submit_gate.set)  # the submit completes meanwhile
        await h.manager.shutdown()
        assert h.batch.cancelled == ["1"]

    asyncio.run(scenario())


@pytest.mark.parametrize("delay", [0.0, 0.03, 0.06, 0.1, 0.15])
def test_exit_right_after_create_leaves_no_process(tmp_path, program, delay):
    pids = tmp_path / "pids"
    client = fork_server(tmp_path)
    client.send(
        "JOB_CREATE 1",
        *(f"{k} {v}" for k, v in base_attrs(program)),
        f"environment NG_T_PIDS={pids}",
        "environment NG_T_SLEEP=60",
        "JOB_CREATE_END",
    )
    assert client.out.get() == "S"
    time.sleep(delay)  # EXIT while the job is being submitted
    assert client.request("EXIT") == "S"
    assert client.close() == 0
    time.sleep(1.0)  # a process that escaped has started by now
    running = alive([int(p) for p in pids.read_text().split()]) if pids.exists() else []
    assert not running


# ---------------------------------------------------------------------- 6: log, arguments
def test_protocol_lines_logged_at_debug_with_secrets_masked(tmp_path, program):
    client = fork_server(tmp_path, GAHP_LOG_LEVEL="DEBUG")
    jobid = run_job(client, program, environment="NG_T_TOKEN=s3cr3t-77", auth_number="424242")
    client.statuses(jobid)
    assert client.request(f"JOB_DESTROY {jobid}") == "S"
    assert client.request("EXIT") == "S"
    client.close()
    log = (tmp_path / "invoke.log").read_text()
    for line in (
        "JOB_CREATE 1",
        "executable_path",
        "CREATE_NOTIFY 1 S",
        f"JOB_DESTROY {jobid}",
        f"STATUS_NOTIFY {jobid} DONE",
        "EXIT",
    ):
        assert line in log, line
    assert "s3cr3t-77" not in log and "424242" not in log


def test_unknown_arguments_are_ignored_with_a_warning(tmp_path):
    client = fork_server(tmp_path, "--bogus", "-x", "value", "--other=1")
    client.send("QUERY_FEATURES")
    assert client.out.get() == "SM"
    while client.out.get() != "REPLY_END":
        pass
    assert client.request("EXIT") == "S"
    assert client.close() == 0
    log = (tmp_path / "invoke.log").read_text()
    assert "--bogus" in log and "--other=1" in log and "WARNING" in log


def test_a_job_that_ran_between_two_polls_is_active_before_done(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        h.batch.initial = JobStatus.IDLE
        h.create(program, polling="30")  # one poll at the start, the next far away
        jid = (await h.note("CREATE_NOTIFY", "1", "S"))[3]
        await asyncio.sleep(0.2)
        h.batch.states["1"] = JobStatus.COMPLETED
        h.batch.exit_codes["1"] = 0
        h.manager.destroy(jid)  # wakes the watcher at once
        await h.note("STATUS_NOTIFY", jid, "DONE")
        assert [n[2] for n in h.notes if n[0] == "STATUS_NOTIFY"] == ["ACTIVE", "DONE"]
        await h.manager.shutdown()

    asyncio.run(scenario())
