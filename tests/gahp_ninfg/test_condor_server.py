"""``ng_invoke_server.Condor``'s mapping, on a batch system in memory: job id = cluster id,
``count`` N = one cluster of N procs, ``condor_option`` lines checked and passed on, removed
procs DONE, the least advanced proc's status; and ``Driver.submit_many``'s default."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_invoke_server import PROGRAM, base_attrs
from test_server_defects import FakeBatch

from gahp_lrms import DriverError, JobSpec, JobStatus
from gahp_lrms.base import ThreadedDriver
from gahp_ninfg import condor
from gahp_ninfg.attributes import AttributeProblem, parse_attributes
from gahp_ninfg.jobs import JobManager


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "ng_exe.py"
    path.write_text(f"#!{sys.executable}\n{PROGRAM}")
    path.chmod(0o755)
    return path


# ---------------------------------------------------------------------- condor_option
@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([], ()),
        (["request_memory 512"], (("request_memory", "512"),)),
        (['+ProjectName "ng test"'], (("+ProjectName", '"ng test"'),)),
        (['MY.Group   "a b"  '], (("MY.Group", '"a b"'),)),
        (
            ['requirements (Memory > 100) && (Arch == "X86_64")'],
            (("requirements", '(Memory > 100) && (Arch == "X86_64")'),),
        ),
        (["universe vanilla", "priority 5"], (("universe", "vanilla"), ("priority", "5"))),
    ],
)
def test_condor_options_accepted(lines, expected):
    assert condor.parse_condor_options(lines) == expected


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        (["request_memory"], "is not '<name> <value>'"),
        (["  "], "is not '<name> <value>'"),
        (["request-memory 5"], "is not a submit command name"),
        (["a=b c"], "is not a submit command name"),
        (["x" * 65 + " 1"], "is not a submit command name"),
        (["$(x) 1"], "is not a submit command name"),
        (["priority 1\x0bqueue"], "control character"),
        (["priority 1\x00"], "control character"),
        (["priority " + "9" * 1025], "longer than 1024"),
        (["Executable /bin/sh"], "set by the invoke server"),
        (["arguments -c id"], "set by the invoke server"),
        (["Environment X=1"], "set by the invoke server"),
        (["output /etc/passwd"], "set by the invoke server"),
        (["queue 1000"], "set by the invoke server"),
        (["universe grid"], "only vanilla"),
        (["priority 1", "PRIORITY 2"], "given twice"),
        ([f"+A{i} 1" for i in range(33)], "more than 32"),
    ],
)
def test_condor_options_refused_with_a_reason(lines, reason):
    with pytest.raises(AttributeProblem, match=reason):
        condor.parse_condor_options(lines)


def test_condor_option_lines_repeat_and_come_in_order():
    req = parse_attributes(
        [
            ("condor_option", "priority 3"),
            ("executable_path", "/bin/true"),
            ("condor_option", '+Tag "x"'),
        ]
    )
    assert req.condor_options == ("priority 3", '+Tag "x"')
    assert condor.spec_extras(req) == {"options": {"submit:priority": "3", "submit:+Tag": '"x"'}}
    assert condor.spec_extras(parse_attributes([("executable_path", "/bin/true")])) == {}


@pytest.mark.parametrize(
    ("natives", "expected"),
    [
        (["17.0"], "17"),
        (["17.0", "17.1", "17.2"], "17"),
        (["sched@host#17.0", "sched@host#17.1"], "sched@host#17"),
        (["17.0", "18.0"], None),
        (["17"], None),
        ([], None),
    ],
)
def test_cluster_id(natives, expected):
    assert condor.cluster_id(natives) == expected


# ---------------------------------------------------------------------- the job manager
class FakeCluster(FakeBatch):
    """Clusters in memory: ``submit_many`` makes one cluster ``<c>.0`` ... ``<c>.<n-1>``."""

    name = "fakecluster"

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        self.clusters: list[list[JobSpec]] = []

    def cancel(self, native_id: str) -> None:
        """A cluster id removes every proc of the cluster."""
        if "." in native_id:
            super().cancel(native_id)
            return
        self.cancelled.append(native_id)
        for native, state in self.states.items():
            if native.startswith(native_id + ".") and state is not JobStatus.COMPLETED:
                self.states[native] = JobStatus.REMOVED

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str]:
        self.clusters.append(list(specs))
        cluster = 40 + len(self.clusters)
        natives = [f"{cluster}.{i}" for i in range(len(specs))]
        for native in natives:
            self.states[native] = self.initial
        return natives


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.batch = FakeCluster({"status_interval": 0.1}, tmp_path / "lrms")
        self.driver = ThreadedDriver(self.batch, self._worker)
        self.notes: list[tuple[str, ...]] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.manager = JobManager(
            self.driver,
            self._worker,
            self._spawn,
            self.notes.append,
            3.0,
            tmp_path / "jobs",
            **condor.MANAGER_OPTIONS,
        )

    async def _worker(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.append(task)
        return task

    def create(self, reqid: str, program: Path, **extra: str) -> None:
        attrs = [(k, v) for k, v in base_attrs(program, **extra) if k != "status_polling"]
        self.manager.create(reqid, [*attrs, ("status_polling", "0.1")])

    async def note(self, *prefix: str, timeout: float = 10.0) -> tuple[str, ...]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in self.notes:
                if tuple(n[: len(prefix)]) == prefix:
                    return tuple(n)
            await asyncio.sleep(0.01)
        raise AssertionError(f"no notification {prefix}: {self.notes}")

    def statuses(self, jid: str) -> list[str]:
        return [n[2] for n in self.notes if n[0] == "STATUS_NOTIFY" and n[1] == jid]


def test_count_is_one_cluster_named_by_its_id(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        h.batch.initial = JobStatus.IDLE
        h.create(
            "1",
            program,
            count="3",
            condor_option="priority 7",
            redirect_enable="true",
            stdout_file=str(tmp_path / "out"),
        )
        jid = (await h.note("CREATE_NOTIFY", "1", "S"))[3]
        assert jid == "41"
        (cluster,) = h.batch.clusters
        assert len(cluster) == 3
        assert all(s.options == {"submit:priority": "7"} for s in cluster)
        assert len({s.stdout for s in cluster}) == 3  # each proc its own output file
        assert h.manager.status("41") == "PENDING"
        # the least advanced proc decides: one still idle -> PENDING
        h.batch.states.update({"41.0": JobStatus.RUNNING, "41.1": JobStatus.RUNNING})
        await asyncio.sleep(0.5)
        assert h.statuses("41") == []
        h.batch.states["41.2"] = JobStatus.RUNNING
        await h.note("STATUS_NOTIFY", "41", "ACTIVE")
        # one removed behind our back, one completed: still ACTIVE until the last ends
        h.batch.states.update({"41.0": JobStatus.REMOVED, "41.1": JobStatus.COMPLETED})
        h.batch.exit_codes["41.1"] = 0
        await asyncio.sleep(0.5)
        assert h.statuses("41") == ["ACTIVE"]
        h.batch.states["41.2"] = JobStatus.COMPLETED
        h.batch.exit_codes["41.2"] = 3
        done = await h.note("STATUS_NOTIFY", "41", "DONE")
        assert done[3] == "cancelled, exit 0, exit 3"
        assert h.statuses("41") == ["ACTIVE", "DONE"]
        await h.manager.shutdown()

    asyncio.run(scenario())


def test_destroy_removes_every_proc(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        h.create("1", program, count="2")
        jid = (await h.note("CREATE_NOTIFY", "1", "S"))[3]
        await h.note("STATUS_NOTIFY", jid, "ACTIVE")
        h.manager.destroy(jid)
        await h.note("STATUS_NOTIFY", jid, "DONE")
        assert h.batch.cancelled == ["41"]  # one removal of the cluster
        await asyncio.gather(*h.tasks)
        assert h.manager.jobs == {}
        await h.manager.shutdown()

    asyncio.run(scenario())


def test_a_bad_condor_option_fails_the_create_with_its_reason(tmp_path, program):
    async def scenario() -> None:
        h = Harness(tmp_path)
        h.create("1", program, condor_option="output /tmp/elsewhere")
        note = await h.note("CREATE_NOTIFY", "1", "F")
        assert "set by the invoke server" in " ".join(note[3:])
        assert h.batch.clusters == []
        await h.manager.shutdown()

    asyncio.run(scenario())


def test_other_servers_ignore_condor_options(tmp_path, program):
    async def scenario() -> None:
        notes: list[tuple[str, ...]] = []

        async def worker(fn: Any, *args: Any) -> Any:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

        driver = ThreadedDriver(FakeBatch({}, tmp_path / "lrms"), worker)

        manager = JobManager(
            driver, worker, asyncio.ensure_future, notes.append, 3.0, tmp_path / "jobs"
        )
        attrs = base_attrs(program, condor_option="output /tmp/elsewhere")
        manager.create("1", attrs)
        for _ in range(500):
            if notes:
                break
            await asyncio.sleep(0.01)
        assert notes[0][:3] == ("CREATE_NOTIFY", "1", "S"), notes
        await manager.shutdown()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- submit_many
class Flaky(FakeBatch):
    """The third submission fails."""

    def submit(self, spec: JobSpec) -> str:
        if len(self.states) == 2:
            raise DriverError("no more")
        return super().submit(spec)


def test_submit_many_default_is_all_or_none(tmp_path):
    spec = JobSpec(executable="/bin/true")
    driver = FakeBatch({}, tmp_path / "a")
    assert driver.submit_many([spec] * 3) == ["1", "2", "3"]
    assert driver.cancelled == []
    flaky = Flaky({}, tmp_path / "b")
    with pytest.raises(DriverError, match="no more"):
        flaky.submit_many([spec] * 3)
    assert flaky.cancelled == ["1", "2"]


# ---------------------------------------------------------------------- the command
def test_condor_main_names_the_schedd_from_the_environment(monkeypatch):
    from gahp_ninfg import cli

    seen: list[list[str]] = []
    monkeypatch.setattr(cli, "main_for_backend", lambda _b, inner, **_k: seen.append(inner))
    monkeypatch.setenv("NG_INVOKE_CONDOR_SCHEDD", "schedd@example.org")
    monkeypatch.setenv("NG_INVOKE_CONDOR_COLLECTOR", "cm.example.org:9618")
    monkeypatch.setenv("NG_INVOKE_BIN_DIR", "/opt/pbs/bin")  # another system's: not condor's
    cli.condor_main(["-l", "/tmp/is.log"])
    (inner,) = seen
    assert inner[:2] == ["--driver", "condor"]
    assert "schedd_name=schedd@example.org" in inner
    assert "collector=cm.example.org:9618" in inner
    assert not any(a.startswith("bin_dir=") for a in inner)
