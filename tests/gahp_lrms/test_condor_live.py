"""The condor driver against a real one-machine HTCondor 25.0.13 pool (``bash
.ci/htcondor-pool-up.sh``; see ``condor_config`` in lrms_helpers.py for when these skip).
The pool runs its jobs as its owner (an ordinary user): job files live in a directory of
theirs (``condor_job_dir``) and the programs run with /usr/bin/python3.

The pool's own view of a job is read here with HTCondor's bindings in this process,
independently of the driver."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_services import POOL_PYTHON
from lrms_helpers import ECHO_PROGRAM, TRICKY_ARGS, TRICKY_ENV, sync_driver, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)
POOL_WAIT = 180
"""Seconds a job may wait for the pool's 4 CPUs (shared with the other tests of the pool)."""
# TRICKY_ARGS but its line break (HTCondor's submit language cannot carry one: refused,
# see test_condor_submit.py), plus strings HTCondor's own languages would read
CONDOR_ARGS = (
    *(a for a in TRICKY_ARGS if "\n" not in a),
    "$(Cluster) $(DOLLAR $ENV(HOME) $$ $RANDOM_INTEGER(1,9)",
    "'single' \"double\" ''",
    "trailing backslash\\",
    "a=b c=d",
)
CONDOR_ENV = {k: v for k, v in TRICKY_ENV.items() if "\n" not in v} | {
    "GAHP_T_MACRO": "$(HOME) $$ x'y",
    "GAHP_T_SPACES": "  two  spaces  ",
}


@pytest.fixture(scope="module")
def schedd(condor_config: dict[str, Any]) -> Iterator[Any]:
    """The pool's schedd, through the bindings in this process (the pool's own view)."""
    htcondor2 = pytest.importorskip("htcondor2")
    before = os.environ.get("CONDOR_CONFIG")
    os.environ["CONDOR_CONFIG"] = str(condor_config["condor_config"])
    htcondor2.reload_config()
    yield htcondor2.Schedd()
    if before is None:
        os.environ.pop("CONDOR_CONFIG", None)
    else:
        os.environ["CONDOR_CONFIG"] = before
    htcondor2.reload_config()


def pool_ad(schedd: Any, jid: str, *attrs: str) -> dict[str, Any]:
    """The job's ad as the schedd (or, once it left the queue, its history) has it."""
    cluster, _, proc = jid.partition(".")
    constraint = f"ClusterId == {cluster} && ProcId == {proc or 0}"
    ads = schedd.query(constraint, list(attrs)) or list(
        schedd.history(constraint, list(attrs), match=1)
    )
    assert ads, f"the pool does not know job {jid}"
    return {k: ads[0].get(k) for k in attrs}


@pytest.fixture
def program(condor_job_dir: Path) -> Path:
    path = condor_job_dir / "echo prog $(x).py"
    path.write_text(f"#!{POOL_PYTHON}\n{ECHO_PROGRAM}")
    path.chmod(0o755)
    return path


def _mkdir(path: Path, owner_of: Path) -> Path:
    path.mkdir()
    st = owner_of.stat()
    os.chown(path, st.st_uid, st.st_gid)
    return path


def test_ping(condor_driver):
    condor_driver.ping()


def test_tricky_job_runs_with_everything_intact(condor_driver, program, condor_job_dir, schedd):
    work = _mkdir(condor_job_dir / "work dir %j $(Cluster)", condor_job_dir)
    (work / "in put $(x).txt").write_text("line 1\nline 2\n")
    env = {**CONDOR_ENV, "GAHP_T_EXIT": "3"}
    spec = JobSpec(
        str(program),
        CONDOR_ARGS,
        environment=env,
        stdin="in put $(x).txt",
        stdout="out %j $(Process).json",
        stderr=str(condor_job_dir / "err's $(y).txt"),
        workdir=str(work),
        name="tricky name; $(x)",
        queue="short $(q)",
        project="gahp.test",
        runtime_s=300,
        memory_mb=100,
        cpus_per_node=2,
    )
    jid = condor_driver.submit(spec)
    assert jid.replace(".", "").isdigit() and jid.count(".") == 1
    ad = pool_ad(
        schedd, jid, "RequestMemory", "RequestCpus", "BatchQueue", "ProjectName", "JobBatchName"
    )
    assert ad == {
        "RequestMemory": 100,
        "RequestCpus": 2,
        "BatchQueue": "short $(q)",
        "ProjectName": "gahp.test",
        "JobBatchName": "tricky_name____x_",
    }
    info = wait_status(condor_driver, jid, *DONE, timeout=POOL_WAIT)
    assert info.status is JobStatus.COMPLETED
    assert (info.exit_code, info.exit_signal) == (3, None)
    assert info.worker_node
    got = json.loads((work / "out %j $(Process).json").read_text())
    assert got["argv"] == list(CONDOR_ARGS)
    assert got["env"] == env
    assert got["cwd"] == str(work)
    assert got["stdin"] == "line 1\nline 2\n"
    assert (condor_job_dir / "err's $(y).txt").read_text() == "to stderr\n"
    assert pool_ad(schedd, jid, "ExitCode", "JobStatus") == {"ExitCode": 3, "JobStatus": 4}


def test_idle_running_completed_and_restart(condor_driver, condor_job_dir):
    spec = JobSpec("/bin/sh", ("-c", "sleep 3; exit 0"), workdir=str(condor_job_dir))
    jid = condor_driver.submit(spec)
    assert condor_driver.status(jid).status in (JobStatus.IDLE, JobStatus.RUNNING)
    info = wait_status(condor_driver, jid, JobStatus.RUNNING, timeout=POOL_WAIT)
    assert info.worker_node
    # A new driver object (a restarted server) still answers, from the history at the end.
    again = sync_driver("condor", dict(condor_driver.config), condor_driver.state_dir)
    info = wait_status(again, jid, *DONE, timeout=POOL_WAIT)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    assert info.wallclock_s is not None and info.wallclock_s >= 2
    again.close()


def test_killed_by_signal(condor_driver, condor_job_dir):
    spec = JobSpec("/bin/sh", ("-c", "kill -KILL $$"), workdir=str(condor_job_dir))
    info = wait_status(condor_driver, condor_driver.submit(spec), *DONE, timeout=POOL_WAIT)
    assert info.status is JobStatus.COMPLETED
    assert (info.exit_code, info.exit_signal) == (None, 9)


def _started(driver: Driver, job_dir: Path, seconds: int = 60) -> tuple[str, Path]:
    """Submit a job that notes its pid and sleeps; return its id once it really runs."""
    marker = job_dir / f"pid-{time.monotonic_ns()}"
    script = f"echo $$ >'{marker}.tmp'; mv '{marker}.tmp' '{marker}'; exec sleep {seconds}"
    jid = driver.submit(JobSpec("/bin/sh", ("-c", script), workdir=str(job_dir)))
    wait_status(driver, jid, JobStatus.RUNNING, timeout=POOL_WAIT)
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    return jid, marker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"


def test_cancel_running_job(condor_driver, condor_job_dir, schedd):
    jid, marker = _started(condor_driver, condor_job_dir)
    pid = int(marker.read_text())
    assert _alive(pid)
    condor_driver.cancel(jid)
    assert condor_driver.status(jid).status is JobStatus.REMOVED
    assert not _alive(pid), "the job's process survived its removal"
    assert pool_ad(schedd, jid, "JobStatus")["JobStatus"] == 3
    condor_driver.cancel(jid)  # cancelling a removed job is a no-op


def test_hold_and_release(condor_driver, condor_job_dir, schedd):
    """A job submitted held waits; a running one is held natively (HTCondor vacates it);
    released, it runs (again) to its end."""
    marker = condor_job_dir / "ran"
    spec = JobSpec("/bin/touch", (str(marker),), start_held=True, workdir=str(condor_job_dir))
    jid = condor_driver.submit(spec)
    info = condor_driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason
    condor_driver.hold(jid)  # already held: fine
    condor_driver.resume(jid)
    info = wait_status(condor_driver, jid, *DONE, timeout=POOL_WAIT)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    assert marker.exists()
    with pytest.raises(DriverError, match="not held"):
        condor_driver.resume(jid)
    with pytest.raises(DriverError, match="cannot be held"):
        condor_driver.hold(jid)

    running, pid_file = _started(condor_driver, condor_job_dir)
    pid = int(pid_file.read_text())
    condor_driver.hold(running)
    info = condor_driver.status(running)
    assert info.status is JobStatus.HELD and "GAHP" in (info.hold_reason or "")
    assert pool_ad(schedd, running, "JobStatus")["JobStatus"] == 5
    deadline = time.monotonic() + 20
    while _alive(pid):
        assert time.monotonic() < deadline, "the held job's process still runs"
        time.sleep(0.1)
    pid_file.unlink()
    condor_driver.resume(running)
    wait_status(condor_driver, running, JobStatus.IDLE, JobStatus.RUNNING)
    deadline = time.monotonic() + POOL_WAIT
    while not pid_file.exists():  # started again
        assert time.monotonic() < deadline, "the released job did not run again"
        time.sleep(0.1)
    condor_driver.cancel(running)


def test_count_is_one_cluster(condor_driver, condor_job_dir, schedd):
    """``count`` N: one cluster of N procs (Ninf-G's Condor invoke server), answered as one
    job: its least advanced proc's state, then its first failing proc's exit code."""
    script = 'p=$(sed -n "s/^ProcId = //p" "$_CONDOR_JOB_AD"); echo "$p" >"out.$p"; exit "$p"'
    spec = JobSpec("/bin/sh", ("-c", script), workdir=str(condor_job_dir), count=3)
    jid = condor_driver.submit(spec)
    assert jid.isdigit()
    assert sorted(a["ProcId"] for a in schedd.query(f"ClusterId == {jid}", ["ProcId"])) == [
        0,
        1,
        2,
    ]
    info = wait_status(condor_driver, jid, *DONE, timeout=POOL_WAIT)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 1)
    assert sorted(p.name for p in condor_job_dir.glob("out.*")) == ["out.0", "out.1", "out.2"]


def attrs_evolve(spec: JobSpec, **changes: Any) -> JobSpec:
    import attrs

    return attrs.evolve(spec, **changes)


def test_runtime_limit_ends_the_job(condor_driver, condor_job_dir):
    spec = JobSpec("/bin/sleep", ("120",), runtime_s=2, workdir=str(condor_job_dir))
    jid = condor_driver.submit(spec)
    info = wait_status(condor_driver, jid, *DONE, timeout=POOL_WAIT)
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "time limit" in (info.exit_reason or "")


def test_two_gpus_of_the_pool(condor_driver, condor_job_dir, schedd):
    out = condor_job_dir / "gpus"
    spec = JobSpec(
        "/bin/sh",
        ("-c", 'echo "$CUDA_VISIBLE_DEVICES"'),
        gpus=2,
        stdout=str(out),
        workdir=str(condor_job_dir),
    )
    jid = condor_driver.submit(spec)
    assert pool_ad(schedd, jid, "RequestGPUs")["RequestGPUs"] == 2
    info = wait_status(condor_driver, jid, *DONE, timeout=POOL_WAIT)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    # the pool's two GPUs are a plain count (MACHINE_RESOURCE_GPUs = 2): HTCondor names them
    # with its own placeholder id, but the job is told it has GPUs
    assert out.read_text().strip(), "the job was given no GPU"


def test_site_submit_commands_reach_the_job(condor_driver, condor_job_dir, schedd):
    spec = JobSpec(
        "/bin/true",
        workdir=str(condor_job_dir),
        start_held=True,
        directives=("# site", '+SiteTag = "route-7"', "priority = 5"),
    )
    jid = condor_driver.submit(spec)
    assert pool_ad(schedd, jid, "SiteTag", "JobPrio") == {"SiteTag": "route-7", "JobPrio": 5}
    condor_driver.cancel(jid)


@pytest.mark.parametrize(
    "changes",
    [
        {"whole_nodes": True},
        {"nodes": 2},
        {"gpu_mode": "exclusive"},
        {"mics": 1},
        {"extra_args": ("-a", "x=1")},
        {"arguments": ("line one\nline two",)},
        {"arguments": ("$$(Name)",)},
        {"arguments": ("a $(DOLLAR) b",)},
    ],
)
def test_what_the_pool_cannot_honour_is_refused(condor_driver, condor_job_dir, schedd, changes):
    before = schedd.query("true", ["ClusterId"])
    spec = attrs_evolve(JobSpec("/bin/true", workdir=str(condor_job_dir)), **changes)
    with pytest.raises(DriverError, match="HTCondor|line break|\\$\\$"):
        condor_driver.submit(spec)
    assert len(schedd.query("true", ["ClusterId"])) <= len(before)


def test_unknown_job_gets_definite_answer(condor_driver):
    info = condor_driver.status("987654321.0")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "no longer known" in (info.exit_reason or "")
    condor_driver.cancel("987654321.0")


def test_malformed_id(condor_driver):
    with pytest.raises(DriverError, match="malformed"):
        condor_driver.status("1; rm -rf /")


def test_remote_pool_by_collector_and_schedd_name(condor_config, htcondor_pool_env, tmp_path):
    """``collector`` and ``schedd_name``, no configuration of the pool: found through the
    collector, as a remote pool is."""
    import htcondor2

    coll = htcondor_pool_env["GAHP_HTCONDOR_POOL_COLLECTOR"]
    name = htcondor2.Collector(coll).locate(htcondor2.DaemonType.Schedd)["Name"]
    config = {"collector": coll, "schedd_name": name, "status_interval": 0.5}
    driver = sync_driver("condor", config, tmp_path / "state")
    try:
        driver.ping()
        jid = driver.submit(JobSpec("/bin/true", start_held=True, workdir="/tmp"))
        assert driver.status(jid).status is JobStatus.HELD
        driver.cancel(jid)
        # a name the collector does not list is an error, even where a local schedd would
        # answer (the bindings fall back to it): here the pool's own configuration
        bad_config = {
            **config,
            "schedd_name": "nosuch",
            "condor_config": condor_config["condor_config"],
        }
        bad = sync_driver("condor", bad_config, tmp_path / "bad")
        with pytest.raises(DriverError, match="no schedd nosuch"):
            bad.ping()
        bad.close()  # type: ignore[attr-defined]
    finally:
        driver.close()  # type: ignore[attr-defined]


@pytest.fixture
def silent_collector() -> Iterator[str]:
    """A TCP port that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()


def test_a_silent_pool_is_an_error_within_the_timeout(silent_collector, tmp_path):
    """A collector or schedd that does not answer costs ``schedd_timeout``, not the bindings'
    own (20 s and more, during which they hold Python's interpreter lock)."""
    config = {"collector": silent_collector, "schedd_timeout": 2}
    driver = sync_driver("condor", config, tmp_path / "state")
    ticks, stop = [0], threading.Event()

    def tick() -> None:  # another thread of the server, e.g. its event loop
        while not stop.wait(0.01):
            ticks[0] += 1

    other = threading.Thread(target=tick)
    other.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(DriverError, match="did not answer within 2 s"):
            driver.ping()
        assert time.monotonic() - t0 < 10
        # the bindings in this process would hold the interpreter lock all along (1-2 ticks)
        assert ticks[0] > 20, ticks
    finally:
        stop.set()
        other.join()
        driver.close()  # type: ignore[attr-defined]


N_ROUND = 300


def test_status_round_over_300_jobs_is_one_schedd_query(
    condor_config, condor_job_dir, schedd, tmp_path
):
    """A status round over 300 tracked jobs is one schedd query, plus one history query
    for those that left the queue since the last round; never one per job."""
    driver = sync_driver("condor", {**condor_config, "status_interval": 3600}, tmp_path / "s")
    held: list[str] = []
    try:
        t0 = time.monotonic()
        quick = [driver.submit(JobSpec("/bin/true", workdir=str(condor_job_dir))) for _ in range(5)]
        held = [
            driver.submit(JobSpec("/bin/true", start_held=True, workdir=str(condor_job_dir)))
            for _ in range(N_ROUND - len(quick))
        ]
        print(f"{N_ROUND} submits in {time.monotonic() - t0:.1f} s")
        clusters = ",".join(j.partition(".")[0] for j in quick)
        deadline = time.monotonic() + POOL_WAIT
        while schedd.query(f"member(ClusterId, {{{clusters}}})", ["ClusterId"]):
            assert time.monotonic() < deadline, "the quick jobs did not finish"
            time.sleep(0.5)
        registry = driver.statuses.registry  # type: ignore[attr-defined]
        before = driver.schedd_calls  # type: ignore[attr-defined]
        counted = _schedd_commands(condor_config)
        t0 = time.monotonic()
        driver.run(registry.refresh())
        first = time.monotonic() - t0
        at_schedd = _delta(_schedd_commands(condor_config), counted)
        calls = _delta(driver.schedd_calls, before)  # type: ignore[attr-defined]
        assert calls == {"query": 1, "history": 1}, calls
        # the schedd's own counters (which other users of the pool add to): it got them
        assert at_schedd.get("QUERY_JOB_ADS", 0) >= 1, at_schedd
        assert at_schedd.get("QUERY_SCHEDD_HISTORY", 0) >= 1, at_schedd
        states = [driver.status(i) for i in quick + held]
        assert _delta(driver.schedd_calls, before) == calls  # type: ignore[attr-defined]
        assert [s.status for s in states] == [JobStatus.COMPLETED] * 5 + [JobStatus.HELD] * (
            N_ROUND - 5
        )
        assert all(s.exit_code == 0 for s in states[:5])
        before = driver.schedd_calls  # type: ignore[attr-defined]
        driver.run(registry.refresh())  # final states are not asked again
        assert _delta(driver.schedd_calls, before) == {"query": 1}  # type: ignore[attr-defined]
        print(
            f"status round over {N_ROUND} jobs: {first:.3f} s, schedd calls {calls}, "
            f"the schedd counted {at_schedd}"
        )
    finally:
        if held:
            clusters = ",".join(j.partition(".")[0] for j in held)
            import htcondor2

            schedd.act(htcondor2.JobAction.Remove, f"member(ClusterId, {{{clusters}}})")
        driver.close()  # type: ignore[attr-defined]


def _schedd_commands(condor_config: dict[str, Any]) -> dict[str, int]:
    """The schedd's own counts of the job and history queries it answered (its
    ``DCCommand_*`` statistics, asked of the schedd directly)."""
    import htcondor2

    coll = htcondor2.Collector()
    name = coll.locate(htcondor2.DaemonType.Schedd)["Name"]
    ad = coll.directQuery(htcondor2.DaemonType.Schedd, name, statistics="All:2")
    keys = ("QUERY_JOB_ADS", "QUERY_SCHEDD_HISTORY")
    return {k: int(ad.get(f"DCCommand_{k}", 0)) for k in keys}


def _delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
