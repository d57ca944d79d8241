"""boinc-gahp, spawned over pipes as HTCondor does, through whole job lives on the REAL BOINC
8.3 server (`.ci/boinc-server-up.sh`): its replies, its volunteer and its own database.

Everything is submitted once, up front (module fixture ``world``), so the volunteer runs the
jobs while the cheap checks run; every wait has a deadline.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gahp_core.testing import GahpClient

GAHP = [sys.executable, "-m", "gahp_boinc"]
FINAL = {"DONE", "ERROR"}
SHORT = "hello real boinc\n"  # <= 30 characters: --early_exit would not fail on it
LONG = "this input is longer than thirty characters\n"  # --early_exit fails on it
PARAMS = ("3e9", "1e14", "1.5e8", "2.5e8", "172800", "100")  # the six optional fields


@dataclass
class World:
    """What the module submitted, and where."""

    gahp: GahpClient
    log: Path
    tmp: Path
    stamp: str
    inputs: dict[str, Path]
    batches: dict[str, str] = field(default_factory=dict)  # role -> batch name
    jobs: dict[str, list[str]] = field(default_factory=dict)  # role -> job names
    results: dict[str, list[str]] = field(default_factory=dict)  # role -> SUBMIT result
    sent: dict[str, list[tuple[str, bytes, int]]] = field(default_factory=dict)
    """role -> the HTTP requests of its BOINC_SUBMIT (path, body, status), as the proxy saw."""
    lease: int = 0
    final: dict[str, str] = field(default_factory=dict)  # job -> final status


def submit_args(
    batch: str, app: str, jobs: list[tuple[str, list[str], list[Path]]], params=("NULL",) * 6
) -> list[str]:
    args = [batch, app, str(len(jobs))]
    for name, jargs, files in jobs:
        args += [name, str(len(jargs)), *jargs, str(len(files))]
        for f in files:
            args += [str(f), "in"]
    return args + list(params)


def command(body: bytes) -> str:
    """The RPC a request body carries (its first element), '' for a GET."""
    m = re.search(rb"<(\w+)>", body)
    return m.group(1).decode() if m else ""


def batch_row(real_boinc, name: str) -> dict[str, str]:
    return real_boinc.one(f"SELECT id, state, expire_time FROM batch WHERE name='{name}'")


@pytest.fixture(scope="module")
def world(real_boinc, tmp_path_factory, recording_proxy):
    tmp = tmp_path_factory.mktemp("real gahp")  # a space in every local path
    indir = tmp / "input files"
    (indir / "copy dir").mkdir(parents=True)
    stamp = f"{int(time.time())}{time.monotonic_ns() % 1000:03d}"
    inputs = {"a": indir / "a file.txt", "b": indir / "b file.txt", "long": indir / "long in.txt"}
    inputs["a"].write_text(f"alpha {stamp}\n")
    inputs["b"].write_text(f"bravo {stamp}\n")
    inputs["long"].write_text(f"{LONG}{stamp}\n")
    inputs["a copy"] = indir / "copy dir" / "a copy.txt"  # same content and extension as a
    inputs["a copy"].write_text(f"alpha {stamp}\n")
    log = tmp / "gahp.log"
    # through a loopback proxy that keeps every request: exact counts whoever else uses the
    # server (its access log mixes in other clients)
    proxy = recording_proxy(real_boinc.url).__enter__()
    gahp = GahpClient([*GAHP, "--log", str(log), "--log-level", "DEBUG"])
    w = World(gahp=gahp, log=log, tmp=tmp, stamp=stamp, inputs=inputs)
    assert gahp.command("BOINC_SELECT_PROJECT", proxy.url, real_boinc.auth) == ["S"]
    app, cpu = real_boinc.app, ["--cpu_time", "1"]

    def submit(role: str, jobs: list[tuple[str, list[str], list[Path]]], params=("NULL",) * 6):
        batch = f"condor#gahptest#{app}#{stamp}{role}"
        named = [(f"{batch}#{i}.0", a, f) for i, (_, a, f) in enumerate(jobs)]
        w.batches[role] = batch
        w.jobs[role] = [n for n, _, _ in named]
        first = len(proxy.answers)
        w.results[role] = gahp.call(
            "BOINC_SUBMIT", *submit_args(batch, app, named, params), timeout=300
        )
        w.sent[role] = proxy.answers[first:]

    # A: jobs sharing inputs, including two local files with the same content (bug B3 bait)
    submit(
        "A",
        [
            ("", cpu, [inputs["a"]]),
            ("", cpu, [inputs["b"]]),
            ("", cpu, [inputs["a"]]),
            ("", cpu, [inputs["a copy"]]),
        ],
    )
    w.lease = int(time.time()) + 6 * 3600
    w.results["lease"] = gahp.call("BOINC_SET_LEASE", w.batches["A"], str(w.lease))
    # F: fails on the volunteer (exit status 246)
    submit("F", [("", ["--early_exit", *cpu], [inputs["long"]])])
    # X: aborted at once
    submit("X", [("", cpu, [inputs["b"]]), ("", cpu, [inputs["a"]])])
    w.results["abort"] = gahp.call("BOINC_ABORT_JOBS", *w.jobs["X"])
    # P: the six optional job parameters
    submit("P", [("", cpu, [inputs["b"]])], PARAMS)
    # R: a second batch on files already staged by A (no parameter block: HTCondor < 8.7.10)
    submit("R", [("", cpu, [inputs["b"]]), ("", cpu, [inputs["a copy"]])], ())
    yield w
    unfinished = [j for jobs in w.jobs.values() for j in jobs if w.final.get(j) not in FINAL]
    if unfinished:  # a failed run leaves no work behind for the shared volunteer
        gahp.call("BOINC_ABORT_JOBS", *unfinished)
    gahp.close()
    proxy.__exit__(None, None, None)


def states_of(res: list[str], nbatches: int) -> list[dict[str, str]]:
    """The per-batch {job: status} groups of a QUERY_BATCHES success result."""
    assert res[0] == "NULL", res
    groups, i = [], 2
    for _ in range(nbatches):
        n = int(res[i])
        groups.append(
            dict(zip(res[i + 1 : i + 1 + 2 * n : 2], res[i + 2 : i + 2 + 2 * n : 2], strict=True))
        )
        i += 1 + 2 * n
    assert i == len(res), res
    return groups


@pytest.fixture(scope="module")
def final(world, real_boinc):
    """Poll QUERY_BATCHES with min_mod_time (the last server_time) until every job is final."""
    roles = ["A", "F", "X", "P", "R"]
    names = [world.batches[r] for r in roles]
    want = {j for r in roles for j in world.jobs[r]}
    since, states = "0", world.final  # filled as it goes: the teardown reads it
    deadline = time.monotonic() + real_boinc.job_deadline
    while not (states.keys() >= want and {states[j] for j in want} <= FINAL):
        assert time.monotonic() < deadline, (
            f"jobs not final in {real_boinc.job_deadline:g} s: {states};"
            f" {real_boinc.volunteer_backlog(want)}"
        )
        res = world.gahp.call("BOINC_QUERY_BATCHES", since, str(len(names)), *names)
        for group in states_of(res, len(names)):
            states.update(group)
        if since != "0":
            assert float(res[1]) >= float(since), (since, res[1])
        since = res[1]
        time.sleep(3)
    return states


# ---------------------------------------------------------------------------------- tests


def test_select_and_ping(world, real_boinc):
    assert world.gahp.call("BOINC_PING") == ["NULL"]


def test_every_submission_is_accepted(world):
    assert {role: res for role, res in world.results.items()} == {
        r: ["NULL"] for r in world.results
    }


def test_shared_inputs_are_staged_once(world, real_boinc):
    """Four jobs, three local paths, two distinct contents: two files on the server."""
    batch = batch_row(real_boinc, world.batches["A"])
    files = real_boinc.sql(
        "SELECT f.name FROM job_file f JOIN batch_file_assoc a ON a.job_file_id=f.id"
        f" WHERE a.batch_id={batch['id']} ORDER BY f.name"
    )
    assert len(files) == 2, files
    assert all(f["name"].endswith(".txt") for f in files)
    kinds = [command(body) for _, body, _ in world.sent["A"]]
    assert kinds.count("query_files") == 1 and kinds.count("upload_files") == 1, kinds
    assert all(status == 200 for _, _, status in world.sent["A"]), world.sent["A"]
    wus = real_boinc.sql(
        f"SELECT name, xml_doc FROM workunit WHERE batch={batch['id']} ORDER BY name"
    )
    assert [w["name"] for w in wus] == world.jobs["A"]
    phys = [next(f["name"] for f in files if f["name"] in w["xml_doc"]) for w in wus]
    assert phys[0] == phys[2] == phys[3] != phys[1]  # same content, same physical file


def test_second_batch_uploads_nothing(world, real_boinc):
    """R's inputs are on the server already: linked to the batch, not uploaded again."""
    before = real_boinc.sql("SELECT COUNT(*) AS n FROM job_file")
    batch = batch_row(real_boinc, world.batches["R"])
    linked = real_boinc.sql(
        f"SELECT job_file_id FROM batch_file_assoc WHERE batch_id={batch['id']}"
    )
    a = batch_row(real_boinc, world.batches["A"])
    of_a = real_boinc.sql(f"SELECT job_file_id FROM batch_file_assoc WHERE batch_id={a['id']}")
    assert {r["job_file_id"] for r in linked} == {r["job_file_id"] for r in of_a}
    kinds = [command(body) for _, body, _ in world.sent["R"]]
    assert "query_files" in kinds and "upload_files" not in kinds, kinds
    assert before == real_boinc.sql("SELECT COUNT(*) AS n FROM job_file")


def test_optional_job_parameters_reach_the_workunit(world, real_boinc):
    """All six go out in submit_batch; app_version_num lands in the workunit row, and each of
    the five others holds the value sent or, where the app's input template sets one, the
    template's (BOINC's create_work lets the template win)."""
    names = (
        "rsc_fpops_est",
        "rsc_fpops_bound",
        "rsc_memory_bound",
        "rsc_disk_bound",
        "delay_bound",
        "app_version_num",
    )
    submit_body = next(b for _, b, _ in world.sent["P"] if b"<submit_batch>" in b).decode()
    for name, value in zip(names, PARAMS, strict=True):
        m = re.search(f"<{name}>([^<]*)</{name}>", submit_body)
        assert m and float(m.group(1)) == float(value), (name, submit_body)
    wu = real_boinc.one(
        f"SELECT {', '.join(names)} FROM workunit WHERE name='{world.jobs['P'][0]}'"
    )
    assert wu["app_version_num"] == "100"
    template = (real_boinc.project_dir / "templates" / f"{real_boinc.app}_in").read_text()
    for name, value in zip(names[:5], PARAMS[:5], strict=True):
        m = re.search(f"<{name}>([^<]*)</{name}>", template)
        allowed = {float(value)} | ({float(m.group(1))} if m else set())
        assert float(wu[name]) in allowed, (name, wu, allowed)


def test_set_lease_sets_the_batch_expire_time(world, real_boinc):
    assert world.results["lease"] == ["NULL"]
    assert float(batch_row(real_boinc, world.batches["A"])["expire_time"]) == world.lease


def test_abort_jobs_cancels_the_workunits(world, real_boinc, final):
    assert world.results["abort"] == ["NULL"]
    assert {j: final[j] for j in world.jobs["X"]} == {j: "ERROR" for j in world.jobs["X"]}
    for job in world.jobs["X"]:
        wu = real_boinc.one(f"SELECT error_mask FROM workunit WHERE name='{job}'")
        assert int(wu["error_mask"]) & 16, wu  # WU_ERROR_CANCELLED
    res = world.gahp.call("BOINC_ABORT_JOBS", f"no_such_job_{world.stamp}")
    assert len(res) == 1 and f"no_such_job_{world.stamp}" in res[0], res


def test_jobs_reach_their_final_states(world, final):
    ok = world.jobs["A"] + world.jobs["P"] + world.jobs["R"]
    assert {j: final[j] for j in ok} == {j: "DONE" for j in ok}
    assert final[world.jobs["F"][0]] == "ERROR"


def test_incremental_query_goes_quiet(world, final):
    """Once nothing changes, a query from the last server_time reports no job of the batch."""
    batch = world.batches["A"]
    since = world.gahp.call("BOINC_QUERY_BATCHES", "0", "1", batch)[1]
    deadline = time.monotonic() + 60
    while True:
        time.sleep(2.5)
        res = world.gahp.call("BOINC_QUERY_BATCHES", since, "1", batch)
        if res[2:] == ["0"]:
            break
        assert time.monotonic() < deadline, res
        since = res[1]


def test_fetch_all_with_a_rename(world, final):
    job = world.jobs["A"][0]
    out = world.tmp / "output dir all"
    out.mkdir()
    res = world.gahp.call(
        "BOINC_FETCH_OUTPUT", job, str(out), "std err.txt", "ALL", "1", "out", "job 0.out"
    )
    assert res[0] == "NULL" and res[1] == "0" and len(res) == 4, res
    assert float(res[2]) > 0 and float(res[3]) > 0
    assert (out / "job 0.out").read_text() == world.inputs["a"].read_text().upper()
    assert not (out / "out").exists()
    assert "<stderr_txt>" in (out / "std err.txt").read_text()


def test_fetch_some_with_htcondor9_out_and_err_pairs(world, final):
    """HTCondor 9.x appends (basename(Out), Out) and (basename(Err), Err) to the SOME list."""
    job = world.jobs["A"][1]
    iwd = world.tmp / "iwd some"
    iwd.mkdir()
    err = iwd / "job 1.err"
    pairs = ["out", "renamed out.txt", "job 1.out", str(iwd / "job 1.out"), "job 1.err", str(err)]
    res = world.gahp.call("BOINC_FETCH_OUTPUT", job, str(iwd), str(err), "SOME", "3", *pairs)
    assert res[0] == "NULL" and len(res) == 4, res
    assert (iwd / "renamed out.txt").read_text() == world.inputs["b"].read_text().upper()
    assert "<stderr_txt>" in err.read_text()


def test_fetch_some_plain_rename(world, final):
    job = world.jobs["R"][1]
    iwd = world.tmp / "iwd plain"
    iwd.mkdir()
    res = world.gahp.call(
        "BOINC_FETCH_OUTPUT", job, str(iwd), "/dev/null", "SOME", "1", "out", "r.txt"
    )
    assert res[0] == "NULL" and len(res) == 4, res
    assert (iwd / "r.txt").read_text() == world.inputs["a copy"].read_text().upper()


def test_fetch_of_a_job_failed_on_the_volunteer(world, final, real_boinc):
    """A clear error result (one argument naming the job), or the failed instance's details;
    never a hang, never an ERROR: body written into an output file."""
    job = world.jobs["F"][0]
    res_row = real_boinc.one(
        "SELECT r.outcome, r.exit_status FROM result r JOIN workunit w ON r.workunitid=w.id"
        f" WHERE w.name='{job}'"
    )
    assert (res_row["outcome"], res_row["exit_status"]) == ("3", "246")  # CLIENT_ERROR
    iwd = world.tmp / "iwd failed"
    iwd.mkdir()
    start = time.monotonic()
    res = world.gahp.call("BOINC_FETCH_OUTPUT", job, str(iwd), "err.txt", "ALL", "0", timeout=120)
    assert time.monotonic() - start < 60
    if res[0] == "NULL":
        assert len(res) == 4 and res[1] == "246", res
    else:
        assert len(res) == 1 and job in res[0], res
    for f in iwd.iterdir():
        assert not f.read_bytes().startswith(b"ERROR:"), f


def test_bad_and_non_submitter_authenticators(world, real_boinc):
    bad = f"0123456789abcdef{world.stamp}"
    log = world.tmp / "auth.log"
    c = GahpClient([*GAHP, "--log", str(log), "--log-level", "DEBUG"])
    try:
        assert c.command("BOINC_SELECT_PROJECT", real_boinc.url, bad) == ["S"]
        res = c.call("BOINC_QUERY_BATCHES", "0", "1", world.batches["A"])
        assert len(res) == 1 and "authenticator" in res[0], res
        name0 = f"bad#{world.stamp}"
        bad_submit = c.call(
            "BOINC_SUBMIT",
            *submit_args(name0, real_boinc.app, [(f"{name0}#0", [], [world.inputs["a"]])]),
        )
        assert len(bad_submit) == 1, bad_submit
        assert c.command("BOINC_SELECT_PROJECT", real_boinc.url, real_boinc.nosubmit_auth) == ["S"]
        name = f"nosub#{world.stamp}"
        res2 = c.call(
            "BOINC_SUBMIT",
            *submit_args(name, real_boinc.app, [(f"{name}#0", [], [world.inputs["a"]])]),
        )
        assert len(res2) == 1 and "submit access" in res2[0], res2
        res3 = c.call("BOINC_QUERY_BATCHES", "0", "1", world.batches["A"])
        assert len(res3) == 1, res3  # not this account's batch
        for text in (*res, *bad_submit, *res2, *res3, log.read_text(), c.stderr_text):
            assert bad not in text and real_boinc.nosubmit_auth not in text
        assert not real_boinc.sql(
            f"SELECT id FROM batch WHERE name IN ('{name}', 'bad#{world.stamp}')"
        )
    finally:
        c.close()


def test_retire_batch(world, real_boinc, final):
    batch = world.batches["A"]
    assert world.gahp.call("BOINC_RETIRE_BATCH", batch) == ["NULL"]
    assert batch_row(real_boinc, batch)["state"] == "4"  # BATCH_STATE_RETIRED
    res = world.gahp.call("BOINC_RETIRE_BATCH", f"no_such_batch_{world.stamp}")
    assert len(res) == 1 and "batch" in res[0], res  # the server says "no such batch"


def test_the_authenticator_is_never_logged(world, real_boinc, final):
    assert world.log.read_text().strip()
    assert real_boinc.auth not in world.log.read_text()
    assert real_boinc.auth not in world.gahp.stderr_text
