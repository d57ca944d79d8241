"""BoincClient and SyncBoincClient against the BOINC project emulator, from the outside:
what the project ends up with, what lands on disk, what the methods return or raise."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gahp_boinc import (
    BatchInfo,
    BoincClient,
    BoincError,
    Job,
    JobParams,
    Project,
    RpcError,
    StagingError,
    SyncBoincClient,
)
from gahp_boinc.emulator import EmulatorServer


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    with EmulatorServer(
        state_dir=tmp_path_factory.mktemp("emu"), job_delay=0.05, inline_apps=True
    ) as srv:
        yield srv


@pytest.fixture
def paused(tmp_path: Path) -> Iterator[SyncBoincClient]:
    """A client of an emulator whose volunteers run nothing."""
    with (
        EmulatorServer(state_dir=tmp_path / "paused", paused=True, inline_apps=True) as srv,
        SyncBoincClient(srv.url, srv.authenticator) as c,
    ):
        yield c


@pytest.fixture
def client(emu: EmulatorServer) -> Iterator[SyncBoincClient]:
    with SyncBoincClient(emu.url, emu.authenticator, retries=2, backoff=0.05) as c:
        yield c


def _inputs(folder: Path, *texts: str) -> list[Path]:
    paths = []
    for i, text in enumerate(texts):
        p = folder / f"input{i}.txt"
        p.write_text(text)
        paths.append(p)
    return paths


def _name(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


def test_submit_stages_each_distinct_file_once(emu, client, tmp_path):
    a, b = _inputs(tmp_path, "alpha\n", "beta\n")
    same_as_a = tmp_path / "copy.txt"
    same_as_a.write_text("alpha\n")
    batch = _name("stage")
    files = [a, b, same_as_a] * 4
    jobs = [Job(f"{batch}-{i}", ["--repeat", "1"], [p]) for i, p in enumerate(files)]
    emu.reset_stats()
    report = client.submit(batch, "uppercase", jobs)
    stats = emu.stats
    assert (report.distinct_files, report.uploaded_files) == (2, 2)
    assert report.uploaded_bytes == len("alpha\n") + len("beta\n")
    # a number of requests that does not grow with the jobs
    assert stats["upload_files"] == 1 and stats["submit_batch"] == 1
    assert stats["requests"] == 5  # get_templates, create_batch, query_files, upload, submit

    again = _name("stage")
    report = client.submit(again, "uppercase", [Job(f"{again}-0", (), [b])])
    assert report.uploaded_files == 0  # the project has it already
    states = client.wait([batch, again], interval=0.1, timeout=60)
    assert len(states) == 13 and set(states.values()) == {"DONE"}


def test_whole_life_of_a_batch(emu, client, tmp_path):
    (src,) = _inputs(tmp_path, "hello volunteers\n")
    batch = _name("life")
    client.submit(batch, "uppercase", [Job(f"{batch}-0", ["--repeat", "2"], [src])])
    assert client.wait(batch, interval=0.1, timeout=60) == {f"{batch}-0": "DONE"}

    out = tmp_path / "out"
    out.mkdir()
    done = client.fetch_output(f"{batch}-0", out, stderr_file="job.err")
    assert done.exit_status == 0 and done.canonical_resultid > 0
    assert (out / "out").read_text() == "HELLO VOLUNTEERS\n" * 2
    assert "--repeat 2" in (out / "job.err").read_text()
    renamed = client.fetch_output(f"{batch}-0", out, files={"out": "renamed.txt"})
    assert renamed.exit_status == 0
    assert (out / "renamed.txt").read_text() == "HELLO VOLUNTEERS\n" * 2

    detail = client.query_batch(batch)
    assert isinstance(detail.batch, BatchInfo)
    assert (detail.batch.name, detail.batch.app_name, detail.batch.njobs) == (
        batch,
        "uppercase",
        1,
    )
    assert detail.batch.state_name == "complete"
    assert [(j.name, j.status) for j in detail.jobs] == [(f"{batch}-0", "done")]

    before = time.time()
    expire = client.lease(batch, 7200)
    (info,) = [b for b in client.query_batches() if b.name == batch]
    assert before + 7200 - 1 <= info.expire_time <= time.time() + 7200 + 1
    assert abs(info.expire_time - expire) < 1

    client.retire(batch)
    assert batch not in [b.name for b in client.query_batches()]  # retired: not listed


def test_fetching_some_outputs_under_other_names(client, tmp_path):
    a, b = _inputs(tmp_path, "one\n", "two\n")
    batch = _name("some")
    client.submit(batch, "concat", [Job(f"{batch}-0", (), [a, b])])
    client.wait(batch, interval=0.1, timeout=60)
    out = tmp_path / "out"
    out.mkdir()
    client.fetch_output(f"{batch}-0", out, files={"out2": "second.txt"})
    assert sorted(p.name for p in out.iterdir()) == ["second.txt"]
    assert (out / "second.txt").read_text() == "two\none\n"
    client.fetch_output(f"{batch}-0", out)
    assert sorted(p.name for p in out.iterdir()) == ["out1", "out2", "second.txt"]


def test_instances_of_a_job(client, tmp_path):
    (src,) = _inputs(tmp_path, "instance\n")
    batch = _name("inst")
    client.submit(batch, "uppercase", [Job(f"{batch}-0", ["--repeat", "3"], [src])])
    client.wait(batch, interval=0.1, timeout=60)
    (job,) = client.query_batch(batch).jobs
    assert job.id > 0
    (inst,) = client.query_job(job.id)
    assert inst.id == job.canonical_instance_id and inst.name.startswith(f"{batch}-0_")
    assert inst.state == "Completed and validated"
    assert inst.outfile_sizes == (len("INSTANCE\n") * 3,)
    dest = tmp_path / "instance.out"
    assert client.get_instance_output(inst.name, 0, dest) == inst.outfile_sizes[0]
    assert dest.read_text() == "INSTANCE\n" * 3
    with pytest.raises(RpcError, match="no job instance"):
        client.get_instance_output(inst.name + "x", 0, dest)
    with pytest.raises(RpcError, match="no such job"):
        client.query_job(999_999_999)


def test_query_batch2_reports_changes_since_a_server_time(client, tmp_path):
    (src,) = _inputs(tmp_path, "x\n")
    batch = _name("since")
    client.submit(batch, "uppercase", [Job(f"{batch}-0", (), [src])])
    client.wait(batch, interval=0.1, timeout=60)
    first = client.query_batch2([batch])
    assert first.batches == [[(f"{batch}-0", "DONE")]]
    time.sleep(1.1)  # job times are whole seconds
    later = client.query_batch2([batch], first.server_time)
    assert later.batches == [[]] and float(later.server_time) >= float(first.server_time)


def test_the_low_level_rpcs_compose_into_a_submission(emu, tmp_path):
    (src,) = _inputs(tmp_path, "by hand\n")
    batch = _name("manual")

    async def run() -> dict[str, str]:
        from gahp_boinc import JobInput, md5_file, physical_name

        async with BoincClient(emu.url, emu.authenticator) as c:
            templates = await c.get_templates("uppercase")
            assert (templates.n_inputs, templates.output_names) == (1, ("out",))
            batch_id = await c.create_batch(batch, "uppercase", time.time() + 600)
            phys = physical_name(md5_file(src), src.name)
            assert await c.query_files([phys], batch_id) == [0]
            await c.upload_files(batch_id, [(phys, src)])
            assert await c.query_files([phys]) == []
            assert (
                await c.submit_batch(
                    batch_id,
                    "uppercase",
                    [JobInput(f"{batch}-0", "--repeat 1", (phys,))],
                    JobParams(delay_bound=3600),
                )
                == batch_id
            )
            states = await c.wait(batch, interval=0.1, timeout=60)
            dest = tmp_path / "fetched"
            assert await c.get_output(f"{batch}-0", 0, dest) == len("BY HAND\n")
            assert dest.read_text() == "BY HAND\n"
            job = await c.query_completed_job(f"{batch}-0")
            assert job.exit_status == 0 and "uppercase" in job.stderr
            assert c.calls["create_batch"] == 1
            return states

    assert asyncio.run(run()) == {f"{batch}-0": "DONE"}


def test_a_failed_job_has_no_output(client, tmp_path):
    (src,) = _inputs(tmp_path, "doomed\n")
    batch = _name("fail")
    client.submit(batch, "fail", [Job(f"{batch}-0", ["--exit-code", "3"], [src])])
    assert client.wait(batch, interval=0.1, timeout=60) == {f"{batch}-0": "ERROR"}
    with pytest.raises(RpcError, match="no completed instance"):
        client.fetch_output(f"{batch}-0", tmp_path)
    (job,) = client.query_batch(batch).jobs
    assert (job.status, job.exit_status) == ("error", 3)


def test_abort(paused, tmp_path):
    (src,) = _inputs(tmp_path, "never runs\n")
    paused.submit("ab", "uppercase", [Job("ab-0", (), [src]), Job("ab-1", (), [src])])
    paused.abort("ab-0")
    assert paused.query_batch2(["ab"]).jobs() == {"ab-0": "ERROR", "ab-1": "UNSENT"}
    assert "cancelled" in paused.query_batch("ab").jobs[0].error


def test_abort_batch(paused, tmp_path):
    (src,) = _inputs(tmp_path, "never runs\n")
    paused.submit("whole", "uppercase", [Job("whole-0", (), [src]), Job("whole-1", (), [src])])
    paused.submit("other", "uppercase", [Job("other-0", (), [src])])
    paused.abort_batch("whole")
    assert paused.query_batch2(["whole", "other"]).batches == [
        [("whole-0", "ERROR"), ("whole-1", "ERROR")],
        [("other-0", "UNSENT")],
    ]
    assert paused.query_batch("whole").batch.state_name == "aborted"


def test_outputs_of_a_whole_batch_and_cpu_times(client, tmp_path):
    a, b = _inputs(tmp_path, "first\n", "second\n")
    batch = _name("zip")
    client.submit(batch, "uppercase", [Job(f"{batch}-0", (), [a]), Job(f"{batch}-1", (), [b])])
    client.wait(batch, interval=0.1, timeout=60)
    size = client.get_batch_outputs(batch, tmp_path / "all.zip")
    with zipfile.ZipFile(tmp_path / "all.zip") as z:
        assert size == (tmp_path / "all.zip").stat().st_size
        assert sorted(z.read(n) for n in z.namelist()) == [b"FIRST\n", b"SECOND\n"]
    assert client.query_batch(batch).batch.total_cpu_time is None
    cpu = client.query_batch(batch, get_cpu_time=True).batch.total_cpu_time
    assert cpu is not None and cpu > 0
    (info,) = [i for i in client.query_batches(get_cpu_time=True) if i.name == batch]
    assert info.total_cpu_time == cpu


def test_estimate_and_job_counts(paused, tmp_path):
    jobs = [Job(f"e-{i}", ["--repeat", "1"]) for i in range(3)]
    assert paused.estimate_batch("uppercase", jobs) == 3 * 1e10 / 1e9  # the template's FLOPs
    assert paused.estimate_batch("uppercase", jobs, JobParams(rsc_fpops_est=2e9)) == 6.0
    with pytest.raises(RpcError, match="app not found"):
        paused.estimate_batch("no-such-app", jobs)
    assert paused.get_job_counts().results_ready_to_send == 0
    (src,) = _inputs(tmp_path, "waiting\n")
    paused.submit("c", "uppercase", [Job("c-0", (), [src]), Job("c-1", (), [src])])
    counts = paused.get_job_counts()
    assert (counts.results_ready_to_send, counts.results_in_progress) == (2, 0)


def test_local_problems_are_found_before_anything_is_sent(emu, client, tmp_path):
    emu.reset_stats()
    with pytest.raises(StagingError, match="missing"):
        client.submit("nope", "uppercase", [Job("nope-0", (), [tmp_path / "missing"])])
    (src,) = _inputs(tmp_path, "ok\n")
    with pytest.raises(StagingError, match="quotes"):
        client.submit("nope", "uppercase", [Job("nope-0", ["it's"], [src])])
    assert emu.stats.get("requests", 0) == 0
    with pytest.raises(StagingError, match="takes 1"):
        client.submit("nope", "uppercase", [Job("nope-0", (), [src, src])])
    assert "create_batch" not in emu.stats


def test_server_errors_are_boinc_errors(client):
    with pytest.raises(RpcError, match="no such batch") as info:
        client.query_batch("no-such-batch")
    assert isinstance(info.value, BoincError)
    with pytest.raises(BoincError, match="app not found"):
        client.get_templates("no-such-app")


def test_idempotent_rpcs_are_retried_others_sent_once(emu, client):
    emu.inject_fault("http503", count=1, rpc="ping", seconds=0)
    client.ping()  # answered after one retry
    emu.inject_fault("http500", count=1, rpc="create_batch")
    emu.reset_stats()
    with pytest.raises(RpcError, match="HTTP 500"):
        client.create_batch(_name("once"), "uppercase", time.time() + 60)
    assert emu.stats["create_batch"] == 1


def test_submit_survives_a_lost_create_batch_reply(emu, client, tmp_path):
    (src,) = _inputs(tmp_path, "lost reply\n")
    batch = _name("lost")
    emu.inject_fault("reset_after", count=1, rpc="create_batch")
    client.submit(batch, "uppercase", [Job(f"{batch}-0", (), [src])])
    assert [b.name for b in client.query_batches()].count(batch) == 1
    assert client.wait(batch, interval=0.1, timeout=60) == {f"{batch}-0": "DONE"}


def test_many_projects_through_one_pool(emu, tmp_path):
    other = emu.add_user("second", authenticator="0123456789abcdef0123456789abcdef")
    (src,) = _inputs(tmp_path, "two accounts\n")
    with SyncBoincClient() as c, pytest.raises(BoincError, match="no project"):
        c.ping()  # no default project
    with SyncBoincClient(emu.url, emu.authenticator) as c:
        second = Project(emu.url, other)
        batch = _name("acct")
        c.submit(batch, "uppercase", [Job(f"{batch}-0", (), [src])], project=second)
        assert batch in [b.name for b in c.query_batches(project=second)]
        assert batch not in [b.name for b in c.query_batches()]


def test_the_authenticator_is_never_shown(emu, caplog):
    caplog.set_level(logging.DEBUG)
    with SyncBoincClient(emu.url, emu.authenticator) as c:
        c.ping()
        with pytest.raises(RpcError) as info:
            c.get_output("no-such-job", 0, "/nonexistent/x")
        shown = [repr(c), repr(c.client), repr(c.default_project), str(info.value), caplog.text]
    for text in shown:
        assert emu.authenticator not in text


def test_a_call_timeout_cancels_the_call(emu):
    emu.inject_fault("delay", count=1, rpc="ping", seconds=2)
    with SyncBoincClient(emu.url, emu.authenticator, call_timeout=0.3) as c:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            c.ping()
        assert time.monotonic() - t0 < 1.5


def test_wait_gives_up_after_its_timeout(paused, tmp_path):
    (src,) = _inputs(tmp_path, "stuck\n")
    paused.submit("w", "uppercase", [Job("w-0", (), [src])])
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="not finished"):
        paused.wait("w", interval=0.1, timeout=0.5)
    assert time.monotonic() - t0 < 2


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="both"):
        BoincClient("http://localhost/p/")
    with pytest.raises(ValueError, match="http"):
        BoincClient("ftp://localhost/p/", "x")
    assert BoincClient.sync is not None


def test_the_sync_client_refuses_a_call_from_its_own_loop(emu):
    with SyncBoincClient(emu.url, emu.authenticator) as c:

        async def inside() -> None:
            c.ping()  # would wait for its own loop forever

        with pytest.raises(RuntimeError, match="own event loop"):
            c.run(inside(), timeout=5)
        c.ping()  # still usable


@pytest.fixture
def other_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop another thread runs, as a server's."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="server-loop")
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_the_sync_client_can_run_on_a_loop_another_thread_runs(emu, other_loop):
    before = {t.name for t in threading.enumerate()}
    c = SyncBoincClient(emu.url, emu.authenticator, loop=other_loop)
    assert c.loop is other_loop
    assert {t.name for t in threading.enumerate()} == before  # no loop thread of its own

    async def where() -> asyncio.AbstractEventLoop:
        await c.client.ping()
        return asyncio.get_running_loop()

    assert c.run(where(), timeout=30) is other_loop
    c.ping()
    c.close()
    assert other_loop.is_running()  # not the client's to stop
    with pytest.raises(BoincError, match="closed"):
        c.ping()


def test_closing_cancels_the_calls_still_waiting(emu, other_loop):
    emu.inject_fault("delay", count=1, rpc="ping", seconds=30)
    c = SyncBoincClient(emu.url, emu.authenticator, loop=other_loop)
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            c.ping()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 10
    while not c._pending:
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.01)
    asyncio.run_coroutine_threadsafe(c.aclose(), other_loop).result(10)
    caller.join(10)
    assert not caller.is_alive(), "the call still waits for the project"
    (exc,) = outcome
    assert isinstance(exc, BoincError) and "closing" in str(exc), exc


def test_batches_are_addressed_by_id_where_names_repeat(paused, tmp_path):
    """Two batches of one name: the name reaches the oldest, the id the one meant (query,
    lease, abort, retire)."""
    (src,) = _inputs(tmp_path, "twice\n")
    first = paused.submit("same-name", "uppercase", [Job("sn-1", inputs=[src])]).batch_id
    second = paused.submit("same-name", "uppercase", [Job("sn-2", inputs=[src])]).batch_id
    assert first != second
    assert paused.query_batch("same-name").batch.id == first
    assert [j.name for j in paused.query_batch(second).jobs] == ["sn-2"]
    paused.set_expire_time(second, 2e9)
    assert paused.query_batch(second).batch.expire_time == 2e9
    assert paused.query_batch(first).batch.expire_time != 2e9
    paused.abort_batch(second)
    assert paused.query_batch(second).batch.state_name == "aborted"
    assert paused.query_batch(first).batch.state_name == "in_progress"
    paused.retire(second)
    assert second not in [b.id for b in paused.query_batches()]
    assert first in [b.id for b in paused.query_batches()]


def test_a_download_over_the_cap_is_refused_and_nothing_is_kept(emu, tmp_path):
    (src,) = _inputs(tmp_path, "a little more than ten bytes\n")
    batch = _name("cap")
    with SyncBoincClient(emu.url, emu.authenticator, max_download_bytes=10) as c:
        c.submit(batch, "uppercase", [Job(f"{batch}-0", inputs=[src])])
        c.wait(batch, interval=0.1, timeout=60)
        dest = tmp_path / "capped"
        with pytest.raises(RpcError, match="over 10"):
            c.get_output(f"{batch}-0", 0, dest)
        with pytest.raises(RpcError, match="over 10"):
            c.get_batch_outputs(batch, tmp_path / "batch.zip")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input0.txt"]
    with pytest.raises(ValueError):
        BoincClient(emu.url, emu.authenticator, max_download_bytes=0)
