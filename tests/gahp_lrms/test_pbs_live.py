"""The pbs driver against the real OpenPBS 23.06 (``bash .ci/pbs-up.sh``: job history on, as
on any production PBS Professional; see lrms_helpers.openpbs_config for when these skip).

The Torque-style path (Slurm's PBS wrappers) is tested in test_slurm_live.py."""

from __future__ import annotations

import json
import time

import pytest
from lrms_helpers import sync_driver, wait_job, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)


def _started_sleeper(driver: Driver, tmp_path, script: str = "exec sleep 60") -> str:
    """Submit a job and return once its process really runs."""
    marker = tmp_path / f"started-{time.monotonic_ns()}"
    jid = driver.submit(JobSpec("/bin/sh", ("-c", f"touch '{marker}'; {script}")))
    wait_status(driver, jid, JobStatus.RUNNING, timeout=60)
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    return jid


def _counting(driver: Driver) -> list[list[str]]:
    """Record every command the driver runs."""
    calls: list[list[str]] = []
    run = driver._run  # type: ignore[attr-defined]

    def counting_run(name, *args, **kw):
        calls.append([name, *args])
        return run(name, *args, **kw)

    driver._run = counting_run  # type: ignore[attr-defined]
    return calls


def test_flavor_is_pbspro_and_ping(openpbs_driver):
    assert openpbs_driver.flavor() == "pbspro"
    assert openpbs_driver.history_enabled()
    openpbs_driver.ping()


@pytest.mark.parametrize("code", [0, 5])
def test_exit_code_exact_and_final(openpbs_driver, code):
    jid = openpbs_driver.submit(JobSpec("/bin/sh", ("-c", f"sleep 1; exit {code}")))
    info = wait_status(openpbs_driver, jid, *DONE, timeout=60)
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, code, None)
    # A new driver object (a restarted server) asks PBS's history and agrees.
    again = sync_driver("pbs", dict(openpbs_driver.config), openpbs_driver.state_dir / "new")
    assert again.status(jid) == info


def test_two_nodes_of_one_cpu_run(openpbs_driver, tmp_path):
    """Defect 4: NodeNumber = 2, SMPGranularity = 1 is PBS Professional's select=2:ncpus=1
    (``-l nodes=2:ppn=1 -l ncpus=1`` is refused by qsub)."""
    out = tmp_path / "nodes"
    spec = JobSpec(
        "/bin/sh", ("-c", 'wc -l < "$PBS_NODEFILE"'), stdout=str(out), nodes=2, cpus_per_node=1
    )
    jid = openpbs_driver.submit(spec)
    info = wait_status(openpbs_driver, jid, *DONE, timeout=60)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    assert out.read_text().strip() == "2"


def test_cancel_running_job_is_removed_at_once(openpbs_driver, tmp_path):
    """Defects 5 and 6: a cancelled job is REMOVED, as soon as qdel has it (a job that
    ignores SIGTERM keeps running up to the queue's kill_delay, 10 s)."""
    jid = _started_sleeper(openpbs_driver, tmp_path, "trap '' TERM; sleep 60; exit 0")
    openpbs_driver.cancel(jid)
    info = openpbs_driver.status(jid)
    assert info.status is JobStatus.REMOVED
    # PBS ends it; it stays REMOVED, also for a restarted server.
    ended = wait_job(
        openpbs_driver,
        jid,
        lambda i: (
            json.loads(
                openpbs_driver._run(  # type: ignore[attr-defined]
                    "qstat", "-x", "-f", "-F", "json", jid
                ).stdout
            )["Jobs"][jid]["job_state"]
            == "F"
        ),
        timeout=60,
    )
    assert ended.status is JobStatus.REMOVED
    again = sync_driver("pbs", dict(openpbs_driver.config), openpbs_driver.state_dir)
    assert again.status(jid).status is JobStatus.REMOVED
    openpbs_driver.cancel(jid)  # again: nothing to do


def test_cancel_queued_job(openpbs_driver):
    jid = openpbs_driver.submit(JobSpec("/bin/true", start_held=True))
    openpbs_driver.cancel(jid)
    assert openpbs_driver.status(jid).status is JobStatus.REMOVED


def test_unknown_job_is_removed(openpbs_driver):
    """Defect 5: an id PBS never had is REMOVED (history is on: it never existed), in a
    bulk query beside a known job too."""
    known = openpbs_driver.submit(JobSpec("/bin/true", start_held=True))
    never = "987654." + known.partition(".")[2]
    for unknown in (never, "987655.nosuchhost"):
        info = openpbs_driver.status(unknown)
        assert info.status is JobStatus.REMOVED and info.exit_code is None
        assert "unknown to PBS" in info.exit_reason
        openpbs_driver.cancel(unknown)
    both = openpbs_driver.bulk_status([known, never, "987655.nosuchhost"])
    assert both[known].status is JobStatus.HELD
    assert both[never].status is both["987655.nosuchhost"].status is JobStatus.REMOVED


def test_running_job_cannot_be_held(openpbs_driver, tmp_path):
    jid = _started_sleeper(openpbs_driver, tmp_path)
    with pytest.raises(DriverError, match="cannot hold a running job"):
        openpbs_driver.hold(jid)
    openpbs_driver.cancel(jid)


def test_one_bulk_query_for_many_jobs(openpbs_config, tmp_path):
    """A status round over many tracked jobs is one qstat for the live ones (never one per
    job: qstat asks the server once per id it is given), plus one for those that finished
    since the last round; then their states are final and never asked again."""
    driver = sync_driver("pbs", {**openpbs_config, "status_interval": 3600}, tmp_path)
    held = [driver.submit(JobSpec("/bin/true", start_held=True)) for _ in range(6)]
    quick = [driver.submit(JobSpec("/bin/true")) for _ in range(6)]
    try:
        deadline = time.monotonic() + 90
        while set(
            json.loads(
                driver._run(  # type: ignore[attr-defined]
                    "qstat", "-x", "-f", "-F", "json", *quick
                ).stdout
            )["Jobs"][i]["job_state"]
            for i in quick
        ) != {"F"}:
            assert time.monotonic() < deadline, "the quick jobs did not finish"
            time.sleep(0.5)
        calls = _counting(driver)
        registry = driver.statuses.registry  # type: ignore[attr-defined]
        driver.run(registry.refresh())
        assert calls == [
            ["qstat", "-f", "-F", "json"],
            ["qstat", "-x", "-f", "-F", "json", *quick],
        ], calls
        states = [driver.status(i) for i in held + quick]
        assert [s.status for s in states] == [JobStatus.HELD] * 6 + [JobStatus.COMPLETED] * 6
        assert all(s.exit_code == 0 for s in states[6:])
        assert len(calls) == 2, calls[2:]  # answered from the round
        driver.run(registry.refresh())
        assert calls[2:] == [["qstat", "-f", "-F", "json"]], "final states are asked again"
    finally:
        for i in held:
            driver.cancel(i)


def test_bare_number_of_a_job_is_followed(openpbs_config, tmp_path):
    """The C blahp hands out PBS job ids with the bare number (``pbs/<date>/1234``, not
    ``1234.server``): after a switch, this driver follows such a job while it runs (through
    the bulk query and alone) and after it finished, with its exit code."""
    driver = sync_driver("pbs", dict(openpbs_config), tmp_path)
    full = _started_sleeper(driver, tmp_path, "sleep 2; exit 3")
    bare = full.partition(".")[0]
    assert bare.isdigit() and bare != full
    for fresh in ("registry", "alone"):
        other = sync_driver(
            "pbs", {**openpbs_config, "status_registry": fresh == "registry"}, tmp_path / fresh
        )
        assert other.status(bare).status is JobStatus.RUNNING, fresh
    other = sync_driver("pbs", dict(openpbs_config), tmp_path / "after")
    info = wait_status(other, bare, *DONE, timeout=60)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 3)


def test_bad_queue_is_a_clear_error(openpbs_driver):
    with pytest.raises(DriverError, match="Unknown queue"):
        openpbs_driver.submit(JobSpec("/bin/true", queue="nosuch"))
    with pytest.raises(DriverError, match="unsupported characters"):
        openpbs_driver.submit(JobSpec("/bin/true", queue="a b"))


def test_pbs_not_answering_is_an_error(openpbs_config, tmp_path):
    """qstat failing (here: a server name PBS cannot reach) is an error, never a guess."""
    bad = tmp_path / "pbs.conf"
    bad.write_text("PBS_EXEC=/opt/pbs\nPBS_SERVER=nosuch.invalid\nPBS_HOME=/var/spool/pbs\n")
    driver = sync_driver("pbs", {**openpbs_config, "command_timeout": 20}, tmp_path / "s")
    driver.env["PBS_CONF_FILE"] = str(bad)
    driver.env.pop("PBS_SERVER", None)
    with pytest.raises(DriverError):
        driver.ping()
    with pytest.raises(DriverError):
        driver.status("1.nosuch")


def test_a_state_path_not_shell_safe_uses_a_private_script_directory(openpbs_config, tmp_path):
    """A state path with '@' (user names like alice@example.org): the scripts go to a
    directory of the driver's own (mkdtemp, mode 700, removed at close), and qsub runs them."""
    drv = sync_driver("pbs", dict(openpbs_config), tmp_path / "alice@example.org")
    jid = drv.submit(JobSpec("/bin/sh", ("-c", "exit 6")))
    info = wait_status(drv, jid, *DONE, timeout=60)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 6)
    scripts = drv._tmp_scripts  # type: ignore[attr-defined]
    assert scripts is not None and "@" not in str(scripts)
    assert oct(scripts.stat().st_mode & 0o777) == "0o700" and list(scripts.iterdir()) == []
    drv.aclose()
    assert not scripts.exists()
