"""Two blahpd processes on one state directory at once, as on two login nodes of a shared
home (or two gridmanagers reaching one cluster account), on the live Slurm: each answers
its own jobs and the other's, and a blahpd started afterwards on that state knows all of
them with their exit codes.  (The journal's lock itself: tests/gahp_lrms/
test_registry_shared.py.)"""

from __future__ import annotations

from pathlib import Path

from blah_helpers import COMPLETED, RUNNING, Blah, config_file


def test_two_blahpd_on_one_state_dir(tmp_path: Path, batch_env) -> None:
    env = batch_env("slurm")
    conf = config_file(tmp_path, "[driver.slurm]\nstatus_interval = 1\n")
    work = tmp_path / "work"
    work.mkdir()
    blahs = [Blah("--config", conf, env=env) for _ in range(2)]
    jobs: dict[str, tuple[int, str]] = {}
    try:
        for n, b in enumerate(blahs):
            for code in (3 + n, 5 + n):
                jid = b.submit_ok(
                    gridtype="slurm", Cmd="/bin/sh", Arguments=f"-c 'exit {code}'", Iwd=str(work)
                )
                jobs[jid] = (n, code)
        sleeper = blahs[0].submit_ok(
            gridtype="slurm", Cmd="/bin/sleep", Arguments="300", Iwd=str(work)
        )
        for jid in jobs:  # each blahpd asks for every job, its own and the other's
            for b in blahs:
                assert b.wait(jid, COMPLETED)["ExitCode"] == jobs[jid][1]
        blahs[1].wait(sleeper, RUNNING)
    finally:
        for b in blahs:
            b.close()
    with Blah("--config", conf, env=env) as later:
        try:
            for jid, (_n, code) in jobs.items():
                state, ad = later.status(jid)
                assert (state, ad["ExitCode"]) == (COMPLETED, code)
            assert later.status(sleeper)[0] == RUNNING
        finally:
            later.c.call("BLAH_JOB_CANCEL", sleeper, timeout=60)
    journal = tmp_path / "state" / "slurm" / "status-registry.jsonl"
    ids = {line.split('"id":"')[1].split('"')[0] for line in journal.read_text().splitlines()}
    assert len(ids) == 5
