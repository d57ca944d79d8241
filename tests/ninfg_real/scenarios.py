"""What the real client does with an invoke server, one function per scenario.

Each reads the outcome as the client reports it (``ng_test_client``'s steps, its exit
status, its log), and what reached the executable from the recorder.  The test modules run
them per batch system.
"""

from __future__ import annotations

import os
import signal
import statistics
from collections.abc import Callable

from ng_backends import Backend
from ngkit import NgClient, Result, alive, attributes

from gahp_core.testing import wait_for

MakeClient = Callable[..., NgClient]

SERVER_ENV = (
    "NG_T_SECRET=s3cr3t-9f2c",
    "NG_T_ODD=a,b;c=d|e$HOME`id`*'q'\\x",
    "NG_T_EQ==x=",
    "NG_T_BARE",
)
"""``<SERVER> environment`` values (no spaces: the client's configuration refuses them)."""
LONG_CALL = 2_000_000_000
"""Trials of a call that runs far longer than any test (about 50 s per 2e9 on this VM)."""


def server_gone(result: Result, timeout: float = 45.0) -> None:
    """Every invoke-server process of the run exits."""
    pids = result.server_pids()
    assert pids, "the tap recorded no invoke server"
    wait_for(lambda: not any(alive(p) for p in pids), timeout, f"invoke server {pids} exits")


def nothing_left(client: NgClient) -> None:
    """The invoke servers left nothing in their TMPDIR (defect 1)."""
    left = sorted(str(p) for p in client.tmpdir.glob("ng-invoke-*"))
    assert not left, f"left behind: {left}"


def jobs_gone(backend: Backend, result: Result, timeout: float = 45.0) -> None:
    records = result.records()
    assert records, "the executable never started"
    for record in records:
        wait_for(
            lambda r=record: backend.job_gone(r),
            timeout,
            f"{backend.kind} job {backend.job_of(record)} removed",
        )


def clean_run(result: Result) -> None:
    assert result.rc == 0, f"client exit {result.rc}:\n{result.stdout}\n{result.stderr}"
    assert all(s.result == "OK" for s in result.steps), result.stdout


# ---------------------------------------------------------------------- scenarios
def sync_call(make_client: MakeClient, backend: Backend) -> Result:
    """One blocking call: correct result; the ``<SERVER>`` environment and the client's
    arguments reach the executable byte for byte; its stdout and stderr come back through
    the redirect files; the server logs the protocol at DEBUG and exits leaving nothing."""
    client = make_client(backend)
    client.server_lines += [f"environment {e}" for e in SERVER_ENV]
    client.invoke_lines.append("status_polling 1")
    client.extra_env["GAHP_LOG_LEVEL"] = "DEBUG"
    result = client.run("sync")
    clean_run(result)
    assert "all 1 results correct" in result.stdout
    (attrs,) = attributes(result.lines("C>"))
    (record,) = result.records()
    arguments_arrive(attrs, record)
    environment_arrives(attrs, record)
    pid = record["pid"]
    assert f"NGT-STDOUT {pid}" in result.stdout, result.stdout
    assert f"NGT-STDERR {pid}" in result.stderr + result.stdout, result.stderr
    server_gone(result)
    nothing_left(client)
    protocol_logged(result)
    return result


def arguments_arrive(attrs: list[tuple[bytes, bytes]], record: dict) -> None:
    sent = [v for k, v in attrs if k == b"argument"]
    argv = [a.encode("latin-1") for a in record["argv"]]
    assert sent and argv[: len(sent)] == sent
    extra = argv[len(sent) :]
    assert len(extra) == 1 and extra[0].startswith(b"--authNumberFile="), extra


def environment_arrives(attrs: list[tuple[bytes, bytes]], record: dict) -> None:
    sent = [v for k, v in attrs if k == b"environment"]
    assert sent == [e.encode() for e in SERVER_ENV]
    env = {k.encode("latin-1"): v.encode("latin-1") for k, v in record["env"].items()}
    for item in sent:
        name, _, value = item.partition(b"=")
        assert env.get(name) == value, (name, env.get(name), value)


def protocol_logged(result: Result) -> None:
    """Defect 6: the ``-l`` log has the protocol lines at DEBUG, environment values masked."""
    log = result.server_logs()
    assert "JOB_CREATE" in log and "CREATE_NOTIFY" in log and "JOB_DESTROY" in log, log[-2000:]
    assert "s3cr3t-9f2c" not in log


def many_handles(make_client: MakeClient, backend: Backend) -> list[float]:
    """``handles`` async calls on as many handles; returns each destruct's duration (s)."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    n = backend.handles
    result = client.run("handles", n)
    clean_run(result)
    assert f"all {n} results correct" in result.stdout
    assert len(list(attributes(result.lines("C>")))) == n
    active_before_done(result)
    server_gone(result)
    nothing_left(client)
    return destruct_times(result, n)


def active_before_done(result: Result) -> None:
    """Defect 3: every job is seen ACTIVE before DONE."""
    seen: dict[bytes, list[bytes]] = {}
    for _t, line in result.lines("E<"):
        parts = line.split()
        if parts[0] == b"STATUS_NOTIFY":
            seen.setdefault(parts[1], []).append(parts[2])
    assert seen and all(s[:1] == [b"ACTIVE"] and s[-1] == b"DONE" for s in seen.values()), seen


def destruct_times(result: Result, n: int) -> list[float]:
    times = []
    for i in range(n):
        step = result.step(f"grpc_function_handle_destruct[{i}]")
        before = result.steps[result.steps.index(step) - 1]
        times.append(step.t - before.t)
    return times


def destructs_follow_polling(times: list[float], polling: float) -> None:
    """Defect 3: a destruct waits for one status poll, not for a 5 s status cache.

    Bound: two polling intervals (the job ends just after a poll, and the status answer
    may be one interval old) plus 1.5 s for the batch-system commands; the median, so one
    slow moment of a loaded machine does not decide."""
    bound = 2 * polling + 1.5
    assert statistics.median(times) <= bound, (times, bound)


def array_handle(make_client: MakeClient, backend: Backend) -> None:
    """One array handle of ``handles``: one JOB_CREATE of that count."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    n = backend.handles
    result = client.run("array", n)
    clean_run(result)
    assert f"all {n} results correct" in result.stdout
    (attrs,) = attributes(result.lines("C>"))
    assert (b"count", str(n).encode()) in attrs
    assert len(result.records()) == n
    server_gone(result)
    nothing_left(client)


def destruct_mid_call(make_client: MakeClient, backend: Backend) -> None:
    """Destructing a handle in mid-call cancels the job: the client sees the destruct
    succeed and the job is gone from the batch system."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    result = client.run("destruct", times=LONG_CALL, sleep_s=3)
    assert result.ok("grpc_function_handle_destruct (mid-call)"), result.stdout
    assert result.ok("grpc_finalize"), result.stdout
    notes = [line for _t, line in result.lines("E<") if line.startswith(b"STATUS_NOTIFY")]
    assert notes and notes[-1].split()[2] == b"DONE", notes
    jobs_gone(backend, result)
    server_gone(result)
    nothing_left(client)


def start_timeout(make_client: MakeClient, backend: Backend) -> None:
    """``job_startTimeout``: the executable does not connect back in time; the call fails
    with a timeout, the destruct cancels the job, nothing is left."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    client.server_lines += [
        f"job_startTimeout {backend.start_timeout}",
        "environment NG_T_DELAY=300",
    ]
    result = client.run("sync")
    assert result.rc != 0, result.stdout
    call = result.step("grpc_call")
    assert call.result != "OK" and "imeout" in call.result, result.stdout
    assert result.ok("grpc_function_handle_destruct[0]"), result.stdout
    assert result.ok("grpc_finalize"), result.stdout
    assert any(line.startswith(b"JOB_DESTROY ") for _t, line in result.lines("C>"))
    jobs_gone(backend, result)
    server_gone(result)
    nothing_left(client)


def missing_executable(make_client: MakeClient, backend: Backend) -> None:
    """An executable that does not exist: CREATE_NOTIFY F, a clean handle-init failure."""
    client = make_client(backend)
    client.executable = client.rundir / "no-such-dir" / "_stub_pi_trial"
    result = client.run("sync")
    assert result.rc == 2, result.stdout
    assert result.step("grpc_function_handle_init[0]").result != "OK", result.stdout
    assert result.ok("grpc_finalize"), result.stdout
    notes = [line for _t, line in result.lines("E<")]
    assert len(notes) == 1 and notes[0].startswith(b"CREATE_NOTIFY 1 F "), notes
    assert not result.records()
    server_gone(result)
    nothing_left(client)


def client_killed(make_client: MakeClient, backend: Backend) -> None:
    """The client dies (SIGKILL) in mid-call: the server sees stdin close, cancels the job
    and exits; the job is gone from the batch system and nothing is left on disk."""
    client = make_client(backend)
    client.invoke_lines.append("status_polling 1")
    client.start("hang", 1, LONG_CALL)
    client.wait_for_output("CALLING")
    records = client.rundir / "rec"
    wait_for(lambda: any(records.glob("*.json")), 60, "the executable starts")
    assert client.proc is not None
    os.kill(client.proc.pid, signal.SIGKILL)
    client.proc.wait(10)
    result = client.result(-9)
    server_gone(result)
    jobs_gone(backend, result)
    nothing_left(client)


class CommonCases:
    """The cases every batch invoke server passes, written once: a test module subclasses it
    as ``TestCommon`` beside its own ``backend`` fixture (one system or several)."""

    def test_sync_call(self, make_client: MakeClient, backend: Backend) -> None:
        sync_call(make_client, backend)

    def test_many_handles_and_destruct_latency(
        self, make_client: MakeClient, backend: Backend
    ) -> None:
        destructs_follow_polling(many_handles(make_client, backend), polling=1.0)

    def test_array_handle(self, make_client: MakeClient, backend: Backend) -> None:
        array_handle(make_client, backend)

    def test_destruct_mid_call(self, make_client: MakeClient, backend: Backend) -> None:
        destruct_mid_call(make_client, backend)

    def test_start_timeout(self, make_client: MakeClient, backend: Backend) -> None:
        start_timeout(make_client, backend)

    def test_missing_executable(self, make_client: MakeClient, backend: Backend) -> None:
        missing_executable(make_client, backend)

    def test_client_killed(self, make_client: MakeClient, backend: Backend) -> None:
        client_killed(make_client, backend)
