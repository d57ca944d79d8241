"""The lsf driver against a live LSF: volclava, started by ``bash .ci/lsf-up.sh`` (see
``lsf_config`` in lrms_helpers.py for how it is found and when these tests skip).  As root,
the jobs are submitted as the test user ``gahplsf``: LSF refuses root's jobs."""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from lrms_helpers import sync_driver, wait_status

from gahp_lrms import Driver, DriverError, JobSpec, JobStatus
from gahp_lrms.lsf import parse_lsf_conf

DONE = (JobStatus.COMPLETED, JobStatus.REMOVED)
# Lines that would be bsub options if bsub read them as "#BSUB" directives (it reads them
# anywhere in a script, even inside a quoted string, and with leading blanks).
# (-q and -J are on bsub's command line, which wins: -m and -H are not.)
LSF_ARGS = ("x\n#BSUB -m nosuchhost\ny", "y\n  #BSUB -J pwned\n", "%J %I $LSB_JOBID")
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


@pytest.fixture
def echo_program(lsf_job_dir: Path) -> Path:
    """The echo program (see lrms_helpers) where the job's owner can run it."""
    from lrms_helpers import ECHO_PROGRAM

    path = lsf_job_dir / "echo prog.py"
    path.write_text(f"#!{PYTHON}\n{ECHO_PROGRAM}")
    path.chmod(0o755)
    return path


def _started_sleeper(driver: Driver, job_dir: Path, seconds: int = 60) -> tuple[str, int]:
    """Submit a sleeping job and return its id and pid once its process really runs."""
    marker = job_dir / f"started-{time.monotonic_ns()}"
    jid = driver.submit(
        JobSpec(
            "/bin/sh", ("-c", f"echo $$ >'{marker}'; exec sleep {seconds}"), workdir=str(job_dir)
        )
    )
    wait_status(driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    return jid, int(marker.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"


def test_commands_from_lsf_conf(lsf_config):
    """Without bin_dir the commands are LSF_BINDIR's of $LSF_ENVDIR/lsf.conf, not PATH's."""
    config = {k: v for k, v in lsf_config.items() if k != "bin_dir"}
    driver = sync_driver("lsf", config, Path("/nonexistent-state"))
    conf = parse_lsf_conf((Path(lsf_config["lsf_envdir"]) / "lsf.conf").read_text())
    assert driver.command_path("bjobs") == str(Path(conf["LSF_BINDIR"]) / "bjobs")
    driver.ping()  # root may query (not submit)


def test_start_held_then_release(lsf_driver, lsf_job_dir):
    marker = lsf_job_dir / "ran"
    jid = lsf_driver.submit(
        JobSpec("/bin/touch", (str(marker),), start_held=True, workdir=str(lsf_job_dir))
    )
    info = lsf_driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason == "held"
    lsf_driver.hold(jid)  # already held: fine
    time.sleep(2.5)  # more than one scheduling interval (2 s)
    assert not marker.exists()
    lsf_driver.resume(jid)
    info = wait_status(lsf_driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    assert marker.exists()
    with pytest.raises(DriverError, match="not held"):
        lsf_driver.resume(jid)
    with pytest.raises(DriverError, match="cannot be held"):
        lsf_driver.hold(jid)


def test_hold_release_and_cancel_an_idle_job(lsf_driver):
    # Begin time (bsub -b) an hour ahead: pending (IDLE), so the hold is a real bstop.
    later = (datetime.now() + timedelta(hours=1)).strftime("%H:%M")
    proc = lsf_driver._run("bsub", "-b", later, "-o", "/dev/null", "-e", "/dev/null", "true")
    jid = proc.stdout.split("<")[1].split(">")[0]
    assert lsf_driver.status(jid).status is JobStatus.IDLE
    lsf_driver.hold(jid)
    info = lsf_driver.status(jid)
    assert (info.status, info.hold_reason) == (JobStatus.HELD, "held")
    lsf_driver.resume(jid)
    assert lsf_driver.status(jid).status is JobStatus.IDLE
    start = time.monotonic()
    lsf_driver.cancel(jid)
    assert time.monotonic() - start < 8  # a pending job ends at once: no cancel_wait_s wait
    info = lsf_driver.status(jid)
    assert (info.status, info.exit_reason) == (JobStatus.REMOVED, "cancelled")
    assert lsf_driver._bjobs([jid])[0][jid]["STAT"] == "EXIT"


def test_suspend_and_resume_running_job(lsf_driver, lsf_job_dir):
    marker = lsf_job_dir / "started"
    script = f"touch '{marker}'; sleep 1.5; exit 6"
    jid = lsf_driver.submit(JobSpec("/bin/sh", ("-c", script), workdir=str(lsf_job_dir)))
    wait_status(lsf_driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    lsf_driver.hold(jid)
    info = lsf_driver.status(jid)
    assert info.status is JobStatus.HELD and info.hold_reason == "suspended"
    assert info.worker_node
    time.sleep(2.5)  # longer than the job's own sleep: it must not have ended
    assert lsf_driver.status(jid).status is JobStatus.HELD
    lsf_driver.hold(jid)  # already held: fine
    lsf_driver.resume(jid)
    info = wait_status(lsf_driver, jid, *DONE, timeout=60)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 6)


def test_cancel_running_job(lsf_driver, lsf_job_dir):
    jid, pid = _started_sleeper(lsf_driver, lsf_job_dir)
    lsf_driver.cancel(jid)
    assert not _alive(pid)  # cancel waited for the end
    info = lsf_driver.status(jid)
    assert (info.status, info.exit_reason) == (JobStatus.REMOVED, "cancelled")
    assert lsf_driver._bjobs([jid])[0][jid]["STAT"] == "EXIT"
    lsf_driver.cancel(jid)  # cancelling a removed job is a no-op
    again = sync_driver("lsf", dict(lsf_driver.config), lsf_driver.state_dir)
    assert again.status(jid).status is JobStatus.REMOVED


def test_cancel_waits_for_a_job_that_takes_a_moment_to_end(lsf_driver, lsf_job_dir):
    marker = lsf_job_dir / "pid"
    script = f"trap 'sleep 1.5; exit 0' INT; echo $$ >'{marker}'; while :; do sleep 0.2; done"
    jid = lsf_driver.submit(JobSpec("/bin/sh", ("-c", script), workdir=str(lsf_job_dir)))
    wait_status(lsf_driver, jid, JobStatus.RUNNING)
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, "job reported RUNNING but never started"
        time.sleep(0.05)
    pid = int(marker.read_text())
    start = time.monotonic()
    lsf_driver.cancel(jid)
    assert not _alive(pid)
    assert 1 <= time.monotonic() - start < 9  # until the job ended, not cancel_wait_s
    assert lsf_driver.status(jid).status is JobStatus.REMOVED


def test_bkill_behind_the_drivers_back(lsf_driver, lsf_job_dir):
    """Only the driver's own cancels are REMOVED; LSF's bkill shows as a kill (SIGINT)."""
    jid, _pid = _started_sleeper(lsf_driver, lsf_job_dir)
    lsf_driver._run("bkill", jid)
    info = wait_status(lsf_driver, jid, *DONE)
    assert (info.status, info.exit_code, info.exit_signal) == (JobStatus.COMPLETED, None, 2)


def test_unknown_job_gets_definite_answer(lsf_driver):
    info = lsf_driver.status("987654")
    assert info.status is JobStatus.COMPLETED and info.exit_code is None
    assert "no longer known" in info.exit_reason
    lsf_driver.cancel("987654")
    with pytest.raises(DriverError, match="not held"):
        lsf_driver.resume("987654")
    with pytest.raises(DriverError, match="cannot be held"):
        lsf_driver.hold("987654")


def test_malformed_id(lsf_driver):
    for bad in ("1; rm -rf /", "-u", "0", "12[3]", ""):
        with pytest.raises(DriverError, match="malformed"):
            lsf_driver.status(bad)
    with pytest.raises(DriverError, match="malformed"):
        lsf_driver.cancel("-u")


def test_lsf_down_is_an_error(lsf_config, tmp_path):
    """A client that cannot reach LSF (here: no lsf.conf in its LSF_ENVDIR) gets errors,
    never a guessed status; so does a command that hangs."""
    (tmp_path / "envdir").mkdir()
    config = {**lsf_config, "lsf_envdir": str(tmp_path / "envdir")}
    driver = sync_driver("lsf", config, tmp_path / "state")
    with pytest.raises(DriverError, match="lsf.conf"):
        driver.ping()
    with pytest.raises(DriverError, match="lsf.conf"):
        driver.status("1")
    with pytest.raises(DriverError):
        driver.submit(JobSpec("/bin/true"))
    hanging = tmp_path / "bin"
    hanging.mkdir()
    for name in ("bjobs", "bqueues"):
        (hanging / name).write_text("#!/bin/sh\nexec sleep 30\n")
        (hanging / name).chmod(0o755)
    config = {**lsf_config, "bin_dir": str(hanging), "command_timeout": 1}
    driver = sync_driver("lsf", config, tmp_path / "state2")
    with pytest.raises(DriverError, match="did not answer"):
        driver.ping()
    with pytest.raises(DriverError, match="did not answer"):
        driver.status("1")


def test_bulk_status_uses_a_constant_number_of_commands(lsf_driver, lsf_job_dir):
    specs = [
        JobSpec("/bin/sh", ("-c", f"exit {n % 3}"), workdir=str(lsf_job_dir)) for n in range(6)
    ]
    jids = [lsf_driver.submit(spec) for spec in specs]
    for jid in jids:
        wait_status(lsf_driver, jid, *DONE)
    calls: list[tuple[str, ...]] = []
    real = lsf_driver._run

    def counting(name, *args, **kwargs):
        calls.append((name, *args))
        return real(name, *args, **kwargs)

    fresh = sync_driver("lsf", dict(lsf_driver.config), lsf_driver.state_dir)
    fresh._run = counting
    found = fresh.bulk_status([*jids, "987654", "987655"])
    assert [found[jid].exit_code for jid in jids] == [0, 1, 2, 0, 1, 2]
    assert found["987654"].exit_code is None and "no longer known" in found["987654"].exit_reason
    # bjobs -json for all, bjobs -l for the ones that exited, bhist -l for the unknown ones.
    assert [c[0] for c in calls] == ["bjobs", "bjobs", "bhist"], calls
    assert set(calls[1][2:]) == {jids[n] for n in (1, 2, 4, 5)}
    calls.clear()
    assert fresh.bulk_status(jids) == {jid: found[jid] for jid in jids}
    assert calls == []  # finished jobs are final: asked no more


def test_job_aged_out_of_bjobs_is_answered_from_bhist(lsf_driver, lsf_job_dir, monkeypatch):
    ok = lsf_driver.submit(JobSpec("/bin/true", workdir=str(lsf_job_dir)))
    failed = lsf_driver.submit(JobSpec("/bin/sh", ("-c", "exit 4"), workdir=str(lsf_job_dir)))
    killed, _pid = _started_sleeper(lsf_driver, lsf_job_dir)
    lsf_driver._run("bkill", killed)
    for jid in (ok, failed, killed):
        wait_status(lsf_driver, jid, *DONE)
    # A new driver whose bjobs no longer knows the jobs (as after LSF's CLEAN_PERIOD).
    fresh = sync_driver("lsf", dict(lsf_driver.config), lsf_driver.state_dir)
    monkeypatch.setattr(fresh, "_bjobs", lambda ids: ({}, set(ids)))
    info = fresh.query_status(ok)  # not the status registry's journal: LSF itself
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 0)
    info = fresh.query_status(failed)
    assert (info.exit_code, info.exit_signal, info.worker_node) == (4, None, os.uname()[1])
    assert fresh.query_status(killed).exit_signal == 2


def test_count_runs_instances_in_several_slots(lsf_driver, lsf_job_dir):
    out = lsf_job_dir / "out"
    spec = JobSpec(
        "/bin/sh",
        ("-c", "echo $LSB_MCPU_HOSTS"),
        stdout=str(out),
        count=2,
        workdir=str(lsf_job_dir),
    )
    jid = lsf_driver.submit(spec)
    assert "2 Processors Requested" in lsf_driver._run("bjobs", "-l", jid).stdout
    info = wait_status(lsf_driver, jid, *DONE)
    assert info.exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and all(line.split()[-1] == "2" for line in lines)


def test_bad_queue_is_refused_with_lsfs_message(lsf_driver, lsf_job_dir):
    with pytest.raises(DriverError, match="nosuch: No such queue"):
        lsf_driver.submit(JobSpec("/bin/true", queue="nosuch", workdir=str(lsf_job_dir)))


def test_missing_workdir_is_an_exit(lsf_driver, lsf_job_dir):
    jid = lsf_driver.submit(JobSpec("/bin/true", workdir=str(lsf_job_dir / "no such dir")))
    info = wait_status(lsf_driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 1)


def test_bjobs_without_json(lsf_config, lsf_job_dir, tmp_path):
    """Where bjobs has no -json (LSF 9), status comes from bjobs -a -w."""
    conf = parse_lsf_conf((Path(lsf_config["lsf_envdir"]) / "lsf.conf").read_text())
    real = Path(lsf_config.get("bin_dir") or conf["LSF_BINDIR"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bsub", "bhist", "bkill", "bstop", "bresume", "bqueues"):
        (bin_dir / name).symlink_to(real / name)
    calls = tmp_path / "bjobs.calls"
    (bin_dir / "bjobs").write_text(
        f"#!/bin/sh\necho \"$*\" >> '{calls}'\n"
        'for a; do [ "$a" = -json ] && { echo "bjobs: illegal option -- json" >&2; exit 255; }'
        f'; done\nexec {real / "bjobs"} "$@"\n'
    )
    (bin_dir / "bjobs").chmod(0o755)
    driver = sync_driver("lsf", {**lsf_config, "bin_dir": str(bin_dir)}, tmp_path / "state")
    jid = driver.submit(JobSpec("/bin/sh", ("-c", "sleep 1; exit 5"), workdir=str(lsf_job_dir)))
    info = wait_status(driver, jid, JobStatus.RUNNING)
    assert info.worker_node == os.uname()[1]
    info = wait_status(driver, jid, *DONE)
    assert (info.status, info.exit_code) == (JobStatus.COMPLETED, 5)
    asked = calls.read_text().splitlines()  # -json refused once, then bjobs -a -w
    assert [i for i, a in enumerate(asked) if "-json" in a] == [0], asked  # asked once
    assert any(a.startswith("-a -w") for a in asked[1:]), asked
    unknown = driver.bulk_status([jid, "987654"])["987654"]
    assert unknown.exit_code is None and "no longer known" in unknown.exit_reason
