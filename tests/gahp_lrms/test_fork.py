"""The fork driver, for real: processes on this host under the detached supervisor."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lrms_helpers import TRICKY_ARGS, TRICKY_ENV, sync_driver, wait_job, wait_status

from gahp_core.testing import wait_for
from gahp_lrms import DriverError, JobSpec, JobStatus
from gahp_lrms.fork import ForkDriver

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)


def _processes() -> Iterator[tuple[int, bytes, int, int]]:
    """(pid, state, parent pid, process group) of every process in /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            data = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        yield int(entry), fields[0], int(fields[1]), int(fields[2])


def _pids_of_group(pgid: int) -> list[int]:
    return [pid for pid, st, _, grp in _processes() if grp == pgid and st not in (b"Z", b"X")]


def _state(driver: ForkDriver, native_id: str) -> dict:
    return json.loads((driver.jobs_dir / native_id / "state.json").read_text())


def test_arguments_environment_streams_workdir(fork_driver, echo_program, tmp_path):
    work = tmp_path / "work dir"
    work.mkdir()
    (work / "in put.txt").write_text("some input\nlines\n")
    spec = JobSpec(
        str(echo_program),
        TRICKY_ARGS,
        environment={**TRICKY_ENV, "GAHP_T_EXIT": "0"},
        stdin="in put.txt",
        stdout="out.json",
        stderr=str(tmp_path / "err.txt"),
        workdir=str(work),
    )
    jid = fork_driver.submit(spec)
    assert jid and " " not in jid
    info = wait_status(fork_driver, jid, *DONE)
    assert info.status is JobStatus.COMPLETED
    assert info.exit_code == 0 and info.exit_signal is None
    assert info.wallclock_s is not None and info.user_cpu_s is not None
    assert info.worker_node
    got = json.loads((work / "out.json").read_text())
    assert got["argv"] == list(TRICKY_ARGS)
    assert got["env"] == {**TRICKY_ENV, "GAHP_T_EXIT": "0"}
    assert got["cwd"] == str(work)
    assert got["stdin"] == "some input\nlines\n"
    assert (tmp_path / "err.txt").read_text() == "to stderr\n"


def test_exit_code_and_same_file_for_both_streams(fork_driver, tmp_path):
    spec = JobSpec(
        "/bin/sh",
        ("-c", "echo out; echo err >&2; exit 7"),
        stdout=str(tmp_path / "both"),
        stderr=str(tmp_path / "both"),
    )
    info = wait_status(fork_driver, fork_driver.submit(spec), *DONE)
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, 7, None)
    assert (tmp_path / "both").read_text() == "out\nerr\n"


def test_killed_by_signal(fork_driver):
    info = wait_status(
        fork_driver, fork_driver.submit(JobSpec("/bin/sh", ("-c", "kill -9 $$"))), *DONE
    )
    assert info.status is JobStatus.COMPLETED
    assert info.exit_code is None and info.exit_signal == signal.SIGKILL
    assert "signal 9" in info.exit_reason


def test_missing_executable_is_a_failed_job(fork_driver, tmp_path):
    info = wait_status(fork_driver, fork_driver.submit(JobSpec(str(tmp_path / "nope"))), *DONE)
    assert info.status is JobStatus.COMPLETED and info.exit_code == 127
    assert "nope" in info.exit_reason


def test_missing_workdir_is_refused(fork_driver, tmp_path):
    with pytest.raises(DriverError, match="does not exist"):
        fork_driver.submit(JobSpec("/bin/true", workdir=str(tmp_path / "absent")))


def test_cancel_leaves_no_process(fork_driver, tmp_path):
    # A shell with a background grandchild that ignores SIGTERM: all must go.
    script = "trap '' TERM; sleep 60 & sleep 60; wait"
    jid = fork_driver.submit(JobSpec("/bin/sh", ("-c", script), count=2))
    wait_status(fork_driver, jid, JobStatus.RUNNING)
    pgid = _state(fork_driver, jid)["pgid"]
    deadline = time.monotonic() + 5
    while len(_pids_of_group(pgid)) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_pids_of_group(pgid)) == 6  # per instance: the shell and two sleeps
    fork_driver.kill_grace_s = 0.3  # the shells ignore SIGTERM: SIGKILL follows
    fork_driver.cancel(jid)
    assert _pids_of_group(pgid) == []
    info = fork_driver.status(jid)
    assert info.status is JobStatus.REMOVED
    fork_driver.cancel(jid)  # idempotent
    assert fork_driver.status(jid).status is JobStatus.REMOVED


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "T"  # gone since listed: nothing left running


def test_hold_and_resume_running_job(fork_driver, tmp_path):
    ticks = tmp_path / "ticks"
    script = f"for i in $(seq 40); do echo $i >> '{ticks}'; sleep 0.05; done"
    jid = fork_driver.submit(JobSpec("/bin/sh", ("-c", script)))
    wait_status(fork_driver, jid, JobStatus.RUNNING)
    fork_driver.hold(jid)
    info = fork_driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason
    pgid = _state(fork_driver, jid)["pgid"]
    # SIGSTOP lands when a process leaves an uninterruptible wait ('D'): poll, deadline-bounded
    deadline = time.monotonic() + 10
    while (states := {_proc_state(pid) for pid in _pids_of_group(pgid)}) - {"T"}:
        assert time.monotonic() < deadline, f"not stopped: {states}"
        time.sleep(0.05)
    # Every process of the job is stopped ('T'): nothing of it can tick until resumed.
    fork_driver.resume(jid)
    assert fork_driver.status(jid).status is JobStatus.RUNNING
    info = wait_status(fork_driver, jid, *DONE)
    assert info.exit_code == 0 and len(ticks.read_text().split()) == 40
    with pytest.raises(DriverError):
        fork_driver.hold(jid)
    with pytest.raises(DriverError):
        fork_driver.resume(jid)


def _run_a_later_job(driver, tmp_path) -> None:
    """A witness: a job submitted later runs to the end, so the driver has started what it
    would start."""
    witness = tmp_path / "witness"
    info = wait_status(driver, driver.submit(JobSpec("/bin/touch", (str(witness),))), *DONE)
    assert info.exit_code == 0 and witness.exists()


def test_start_held_then_release(fork_driver, tmp_path):
    marker = tmp_path / "ran"
    jid = fork_driver.submit(JobSpec("/bin/touch", (str(marker),), start_held=True))
    assert fork_driver.status(jid).status is JobStatus.HELD
    _run_a_later_job(fork_driver, tmp_path)
    assert not marker.exists()
    assert fork_driver.status(jid).status is JobStatus.HELD
    fork_driver.resume(jid)
    info = wait_status(fork_driver, jid, *DONE)
    assert info.status is JobStatus.COMPLETED and info.exit_code == 0 and marker.exists()


def test_cancel_a_held_job_that_never_started(fork_driver, tmp_path):
    marker = tmp_path / "ran"
    jid = fork_driver.submit(JobSpec("/bin/touch", (str(marker),), start_held=True))
    fork_driver.cancel(jid)
    assert wait_status(fork_driver, jid, *DONE).status is JobStatus.REMOVED
    _run_a_later_job(fork_driver, tmp_path)
    assert not marker.exists()


def test_count_runs_several_instances(fork_driver, tmp_path):
    out = tmp_path / "out"
    spec = JobSpec(
        "/bin/sh",
        ("-c", 'read line; echo "$$ $line"; [ "$GAHP_T_X" = y ] && exit 0'),
        environment={"GAHP_T_X": "y"},
        stdin=str(tmp_path / "in"),
        stdout=str(out),
        count=3,
    )
    (tmp_path / "in").write_text("hello\n")
    info = wait_status(fork_driver, fork_driver.submit(spec), *DONE)
    assert info.exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and len({line.split()[0] for line in lines}) == 3
    assert all(line.endswith(" hello") for line in lines)


def test_count_exit_status_is_first_failure(fork_driver):
    spec = JobSpec("/bin/sh", ("-c", "exit 5"), count=2)
    assert wait_status(fork_driver, fork_driver.submit(spec), *DONE).exit_code == 5


def test_new_driver_object_answers_for_old_jobs(fork_driver, tmp_path):
    """The job outlives the driver: a 'restarted server' on the same state_dir sees it."""
    gate = tmp_path / "gate"  # the job runs until the test opens the gate, however slow
    wait_gate = f"while [ ! -e '{gate}' ]; do sleep 0.05; done"
    running = fork_driver.submit(JobSpec("/bin/sh", ("-c", wait_gate)))
    wait_status(fork_driver, running, JobStatus.RUNNING)
    done = fork_driver.submit(JobSpec("/bin/sh", ("-c", "exit 4")))
    wait_status(fork_driver, done, *DONE)
    restarted = sync_driver("fork", {}, fork_driver.state_dir)
    assert restarted.status(running).status is JobStatus.RUNNING
    assert restarted.status(done).exit_code == 4
    gate.touch()
    info = wait_status(restarted, running, *DONE)
    assert info.status is JobStatus.COMPLETED and info.exit_code == 0


def test_job_survives_its_server(tmp_path):
    """Submit from a separate Python process that then exits; the job runs to the end."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys; from pathlib import Path; from gahp_lrms import get_driver, JobSpec;"
        f"d = get_driver('fork', {{}}, Path({str(tmp_path / 'state')!r}));"
        "print(asyncio.run(d.submit(JobSpec('/bin/sh', ('-c', 'sleep 0.5; exit 9')))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    jid = proc.stdout.strip()
    driver = sync_driver("fork", {}, tmp_path / "state")
    assert wait_status(driver, jid, JobStatus.RUNNING, *DONE).status is JobStatus.RUNNING
    assert wait_status(driver, jid, *DONE).exit_code == 9


def test_unknown_and_malformed_ids(fork_driver):
    info = fork_driver.status("20000101T000000-000000000000")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "unknown" in info.exit_reason
    fork_driver.cancel("20000101T000000-000000000000")  # no-op
    with pytest.raises(DriverError, match="malformed"):
        fork_driver.status("../etc")


def test_supervisor_killed_gives_definite_answer(fork_driver):
    jid = fork_driver.submit(JobSpec("/bin/sleep", ("0.3",)))
    wait_status(fork_driver, jid, JobStatus.RUNNING)
    state = _state(fork_driver, jid)
    os.kill(state["supervisor_pid"], signal.SIGKILL)
    info = wait_job(fork_driver, jid, lambda i: i.finished, timeout=10)
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "supervisor" in info.exit_reason


def test_ping(fork_driver):
    fork_driver.ping()


def _gated_python(tmp_path: Path) -> tuple[Path, Path]:
    """An interpreter for the supervisor that starts only once the returned gate exists."""
    import sys

    gate = tmp_path / "python-gate"
    wrapper = tmp_path / "gated-python"
    wrapper.write_text(
        f"#!/bin/sh\nwhile [ ! -e '{gate}' ]; do sleep 0.02; done\nexec '{sys.executable}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return wrapper, gate


def test_submit_returns_before_the_supervisor_starts(tmp_path):
    """submit does not wait for the supervisor: the job is IDLE until it has started."""
    python, gate = _gated_python(tmp_path)
    driver = sync_driver("fork", {"python": str(python)}, tmp_path / "state")
    marker = tmp_path / "ran"
    jid = driver.submit(JobSpec("/bin/touch", (str(marker),)))
    assert driver.status(jid).status is JobStatus.IDLE
    assert not marker.exists()
    gate.touch()
    info = wait_status(driver, jid, *DONE)
    assert info.status is JobStatus.COMPLETED and info.exit_code == 0 and marker.exists()


def test_held_before_the_supervisor_starts(tmp_path):
    python, gate = _gated_python(tmp_path)
    driver = sync_driver("fork", {"python": str(python)}, tmp_path / "state")
    marker = tmp_path / "ran"
    jid = driver.submit(JobSpec("/bin/touch", (str(marker),), start_held=True))
    assert driver.status(jid).status is JobStatus.HELD
    gate.touch()
    _run_a_later_job(driver, tmp_path)
    assert driver.status(jid).status is JobStatus.HELD and not marker.exists()
    driver.resume(jid)
    assert wait_status(driver, jid, *DONE).exit_code == 0 and marker.exists()


def test_cancel_before_the_supervisor_starts_never_runs_the_job(tmp_path):
    """cancel of a job whose supervisor has not started returns once the supervisor has
    seen the removal: the job never runs, however late the supervisor comes."""
    import threading

    python, gate = _gated_python(tmp_path)
    driver = sync_driver("fork", {"python": str(python)}, tmp_path / "state")
    marker = tmp_path / "ran"
    jid = driver.submit(JobSpec("/bin/touch", (str(marker),)))
    cancelled = threading.Event()
    canceller = threading.Thread(target=lambda: (driver.cancel(jid), cancelled.set()))
    canceller.start()
    gate.touch()
    canceller.join(60)
    assert cancelled.is_set()
    assert driver.status(jid).status is JobStatus.REMOVED
    assert _state(driver, jid)["phase"] == "removed"  # the supervisor saw it, then ended
    _run_a_later_job(driver, tmp_path)
    assert not marker.exists()


def test_a_supervisor_that_cannot_start_gives_a_definite_answer(tmp_path):
    """An interpreter that fails: the job ends with the reason, never stays IDLE."""
    failing = tmp_path / "failing-python"
    failing.write_text("#!/bin/sh\necho 'no interpreter here' >&2\nexit 3\n")
    failing.chmod(0o755)
    driver = sync_driver("fork", {"python": str(failing)}, tmp_path / "state")
    jid = driver.submit(JobSpec("/bin/true", ()))
    info = wait_status(driver, jid, *DONE)
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "never started" in info.exit_reason and "exit status 3" in info.exit_reason
    assert "no interpreter here" in info.exit_reason
    driver.cancel(jid)  # nothing to cancel: returns at once
    assert driver.status(jid).status is JobStatus.COMPLETED


def test_a_missing_interpreter_is_refused_at_submit(tmp_path):
    driver = sync_driver("fork", {"python": str(tmp_path / "no-python")}, tmp_path / "state")
    with pytest.raises(DriverError, match="cannot start the fork supervisor"):
        driver.submit(JobSpec("/bin/true", ()))


def _zombie_children() -> int:
    """How many children of this process are zombies (exited, never waited for)."""
    me = os.getpid()
    return sum(1 for _, st, parent, _ in _processes() if st == b"Z" and parent == me)


def test_launchers_are_reaped(fork_driver):
    """Each job's launcher is a child of the driver's process: it is waited for, so a server
    that runs thousands of jobs keeps no zombie of theirs."""
    before = _zombie_children()
    ids = [fork_driver.submit(JobSpec("/bin/true", ())) for _ in range(5)]
    for jid in ids:
        assert wait_status(fork_driver, jid, *DONE).exit_code == 0
    assert _zombie_children() <= before


def test_a_finished_job_never_asked_for_goes_after_keep_finished_s(tmp_path):
    drv = ForkDriver({"keep_finished_s": 0.5}, tmp_path)
    old = drv.submit(JobSpec(executable="/bin/true"))
    wait_for(lambda: drv.status(old).finished, 30, "the first job's end")
    assert (drv.jobs_dir / old).exists()  # status alone removes nothing
    time.sleep(1.2)  # past keep_finished_s and the sweep's interval (at least 1 s)
    new = drv.submit(JobSpec(executable="/bin/true"))
    assert sorted(p.name for p in drv.jobs_dir.iterdir()) == [new]


def test_reported_keeps_only_the_final_status(tmp_path):
    drv = ForkDriver({}, tmp_path)
    job = drv.submit(
        JobSpec(
            executable="/bin/sh", arguments=("-c", "exit 4"), environment={"TOKEN": "secret-value"}
        )
    )
    wait_for(lambda: drv.status(job).finished, 30, "the job's end")
    drv.reported(job)
    assert not (drv.jobs_dir / job).exists()
    info = ForkDriver({}, tmp_path).status(job)  # a new driver (a restarted server) too
    assert info.status is JobStatus.COMPLETED and info.exit_code == 4
    assert b"secret-value" not in (drv.final_dir / job).read_bytes()


@pytest.mark.parametrize(
    "text",
    ['{"phase": "running", "pgid": "12; kill"}', '{"phase": "gone"}', "[1, 2]", '{"pgid": 5}'],
)
def test_a_state_file_not_the_supervisors_is_an_error(fork_driver, tmp_path, text):
    """A state.json the supervisor did not write (wrong types, unknown phase) is a clear
    DriverError on every call that reads it, never a crash or a guess."""
    jid = fork_driver.submit(JobSpec("/bin/true"))
    wait_status(fork_driver, jid, JobStatus.COMPLETED)
    (fork_driver.jobs_dir / jid / "state.json").write_text(text)
    with pytest.raises(DriverError, match="state.json"):
        fork_driver.status(jid)
    with pytest.raises(DriverError, match="state.json"):
        fork_driver.cancel(jid)
