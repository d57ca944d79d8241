"""boinc-gahp spawned as a subprocess, against the BOINC project emulator over real HTTP."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient, GahpConformance

GAHP = [sys.executable, "-m", "gahp_boinc"]


class TestBoincGahpConformance(GahpConformance):
    server_command = GAHP
    async_probe = "BOINC_PING {reqid}"  # answers at once with 'no project selected'
    probe_result_fields = 1  # the error message


@pytest.fixture
def emulator(tmp_path):
    srv = EmulatorServer(state_dir=tmp_path / "emu", port=0, job_delay=0.05, volunteers=2)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def log_path(tmp_path) -> Path:
    return tmp_path / "gahp.log"


@pytest.fixture
def gahp(log_path):
    c = GahpClient([*GAHP, "--log", str(log_path), "--log-level", "DEBUG", "--timeout", "5"])
    yield c
    c.close()


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    d = tmp_path / "in"
    d.mkdir()
    files = {}
    for name, text in [("a.txt", "alpha\n"), ("b.txt", "bravo\n"), ("c.dat", "charlie\n")]:
        (d / name).write_text(text)
        files[name] = d / name
    return files


def select(c: GahpClient, srv: EmulatorServer) -> None:
    assert c.command("BOINC_SELECT_PROJECT", srv.url, srv.authenticator) == ["S"]


def submit_args(
    batch: str, app: str, jobs: list[tuple[str, list[str], list[Path]]], params: bool = True
) -> list[str]:
    args = [batch, app, str(len(jobs))]
    for name, jargs, files in jobs:
        args += [name, str(len(jargs)), *jargs, str(len(files))]
        for f in files:
            args += [str(f), "in"]
    if params:
        args += ["NULL"] * 6
    return args


def wait_status(c: GahpClient, batch: str, want: set[str], timeout: float = 30) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        res = c.call("BOINC_QUERY_BATCHES", "0", "1", batch)
        assert res[0] == "NULL", res
        n = int(res[2])
        assert len(res) == 3 + 2 * n
        states = dict(zip(res[3::2], res[4::2], strict=True))
        if states and set(states.values()) <= want:
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.1)


def test_whole_job_life(gahp, emulator, inputs, tmp_path, log_path):
    select(gahp, emulator)
    assert gahp.call("BOINC_PING") == ["NULL"]
    jobs = [
        ("b1#1.0", ["--repeat", "2"], [inputs["a.txt"]]),
        ("b1#1.1", [], [inputs["b.txt"]]),
        ("b1#1.2", [], [inputs["a.txt"]]),  # shares its input with job 0
    ]
    assert gahp.call("BOINC_SUBMIT", *submit_args("b1", "uppercase", jobs)) == ["NULL"]
    assert emulator.stats.get("upload_files") == 1
    lease = str(int(time.time()) + 6 * 3600)
    assert gahp.call("BOINC_SET_LEASE", "b1", lease) == ["NULL"]
    states = wait_status(gahp, "b1", {"DONE"})
    assert states == {"b1#1.0": "DONE", "b1#1.1": "DONE", "b1#1.2": "DONE"}

    out = tmp_path / "out"
    out.mkdir()
    res = gahp.call(
        "BOINC_FETCH_OUTPUT", "b1#1.0", str(out), "err.txt", "ALL", "1", "out", "job0.out"
    )
    assert res[0] == "NULL" and res[1] == "0" and len(res) == 4
    assert float(res[2]) >= 0 and float(res[3]) >= 0
    assert (out / "job0.out").read_text() == "ALPHA\nALPHA\n"
    assert not (out / "out").exists()
    assert "<stderr_txt>" in (out / "err.txt").read_text()

    # SOME with an absolute destination and an absolute stderr file
    abs_dst = tmp_path / "elsewhere.txt"
    res = gahp.call(
        "BOINC_FETCH_OUTPUT",
        "b1#1.1",
        str(out),
        str(tmp_path / "e1.txt"),
        "SOME",
        "1",
        "out",
        str(abs_dst),
    )
    assert res[0] == "NULL"
    assert abs_dst.read_text() == "BRAVO\n"
    assert (tmp_path / "e1.txt").exists()

    # ALL without renames: outputs under their logical names; /dev/null discards
    res = gahp.call("BOINC_FETCH_OUTPUT", "b1#1.2", str(out), "/dev/null", "ALL", "0")
    assert res[0] == "NULL"
    assert (out / "out").read_text() == "ALPHA\n"
    assert not list(out.glob(".*part*"))

    assert gahp.call("BOINC_RETIRE_BATCH", "b1") == ["NULL"]
    assert emulator.authenticator not in log_path.read_text()


def test_fetch_with_htcondor9_stdout_and_stderr_pairs(gahp, emulator, inputs, tmp_path):
    """HTCondor 9.x appends (basename(Out), Out) and (basename(Err), Err) to the SOME list:
    the outputs asked for arrive, the stderr goes to Err, and the fetch succeeds."""
    select(gahp, emulator)
    jobs = [("h#1.0", [], [inputs["a.txt"]]), ("h#1.1", [], [inputs["b.txt"]])]
    assert gahp.call("BOINC_SUBMIT", *submit_args("h", "uppercase", jobs)) == ["NULL"]
    wait_status(gahp, "h", {"DONE"})
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    pairs = ["out", "renamed.out", "job.out", "job.out", "job.err", "job.err"]
    res = gahp.call("BOINC_FETCH_OUTPUT", "h#1.0", str(iwd), "job.err", "SOME", "3", *pairs)
    assert res[0] == "NULL" and len(res) == 4, res
    assert (iwd / "renamed.out").read_text() == "ALPHA\n"
    assert "<stderr_txt>" in (iwd / "job.err").read_text()
    assert not (iwd / "job.out").exists()  # a BOINC job has no stdout
    # output and error the same file: only the Out pair is appended
    same = iwd / "same"
    same.mkdir()
    pairs = ["out", "out", "o.txt", "o.txt"]
    res = gahp.call("BOINC_FETCH_OUTPUT", "h#1.1", str(same), "o.txt", "SOME", "2", *pairs)
    assert res[0] == "NULL", res
    assert (same / "out").read_text() == "BRAVO\n"
    # a misspelt transfer_output_files entry still fails, with the name
    pairs = ["outt", "outt", "o", "o", "e", "e"]
    res = gahp.call("BOINC_FETCH_OUTPUT", "h#1.1", str(same), "e", "SOME", "3", *pairs)
    assert len(res) == 1 and "outt" in res[0], res


def test_second_batch_reuses_files_on_the_server(gahp, emulator, inputs):
    select(gahp, emulator)
    first = [("r1#0", [], [inputs["a.txt"]]), ("r1#1", [], [inputs["b.txt"]])]
    assert gahp.call("BOINC_SUBMIT", *submit_args("r1", "uppercase", first)) == ["NULL"]
    uploaded = emulator.stats.get("bytes_uploaded")
    assert uploaded == len("alpha\n") + len("bravo\n")
    second = [("r2#0", [], [inputs["b.txt"]]), ("r2#1", [], [inputs["a.txt"]])]
    assert gahp.call("BOINC_SUBMIT", *submit_args("r2", "uppercase", second, False)) == ["NULL"]
    assert emulator.stats.get("bytes_uploaded") == uploaded
    assert emulator.stats.get("upload_files") == 1  # nothing to upload: no request at all
    wait_status(gahp, "r2", {"DONE"})


def test_error_job_and_fetch_of_a_failed_job(gahp, emulator, inputs, tmp_path):
    select(gahp, emulator)
    jobs = [("f#0", [], [inputs["a.txt"]])]
    assert gahp.call("BOINC_SUBMIT", *submit_args("f", "fail", jobs)) == ["NULL"]
    assert wait_status(gahp, "f", {"ERROR"}) == {"f#0": "ERROR"}
    res = gahp.call("BOINC_FETCH_OUTPUT", "f#0", str(tmp_path), "err.txt", "ALL", "0")
    assert len(res) == 1 and "f#0" in res[0], res  # one clear error argument
    assert not list(tmp_path.glob("out*"))


def test_abort_unsent_jobs(gahp, emulator, inputs):
    select(gahp, emulator)
    emulator.pause_volunteer()
    jobs = [("a#0", [], [inputs["a.txt"]]), ("a#1", [], [inputs["b.txt"]])]
    assert gahp.call("BOINC_SUBMIT", *submit_args("a", "uppercase", jobs)) == ["NULL"]
    assert wait_status(gahp, "a", {"UNSENT"}) == {"a#0": "UNSENT", "a#1": "UNSENT"}
    assert gahp.call("BOINC_ABORT_JOBS", "a#0", "a#1") == ["NULL"]
    emulator.resume_volunteer()
    assert wait_status(gahp, "a", {"ERROR"}) == {"a#0": "ERROR", "a#1": "ERROR"}
    res = gahp.call("BOINC_ABORT_JOBS", "no_such_job")
    assert len(res) == 1 and "no_such_job" in res[0]


def test_query_unknown_batch_ends_with_no_batch_named(gahp, emulator):
    select(gahp, emulator)
    res = gahp.call("BOINC_QUERY_BATCHES", "0", "1", "condor#x#y#1")
    assert len(res) == 1 and res[0].endswith("no batch named condor#x#y#1"), res


def test_min_mod_time_and_multiple_batches(gahp, emulator, inputs):
    select(gahp, emulator)
    for b in ("m1", "m2"):
        jobs = [(f"{b}#0", [], [inputs["c.dat"]])]
        assert gahp.call("BOINC_SUBMIT", *submit_args(b, "uppercase", jobs)) == ["NULL"]
    wait_status(gahp, "m1", {"DONE"})
    wait_status(gahp, "m2", {"DONE"})
    time.sleep(2.1)  # mod_time has whole seconds; the GAHP asks from one second earlier
    res = gahp.call("BOINC_QUERY_BATCHES", "0", "2", "m2", "m1")
    assert res[0] == "NULL" and abs(float(res[1]) - time.time()) < 60, res  # server time
    assert res[2] == "1" and res[3] == "m2#0" and res[6] == "m1#0"
    later = gahp.call("BOINC_QUERY_BATCHES", res[1], "2", "m1", "m2")
    assert later[0] == "NULL" and float(later[1]) >= float(res[1])
    assert later[2:] == ["0", "0"]  # nothing changed since


def test_min_mod_time_never_loses_a_change(gahp, emulator, inputs):
    """Incremental polling from the last server_time sees every job reach its final state."""
    select(gahp, emulator)
    jobs = [(f"n#{i}", [], [inputs["a.txt"]]) for i in range(6)]
    assert gahp.call("BOINC_SUBMIT", *submit_args("n", "uppercase", jobs)) == ["NULL"]
    states: dict[str, str] = {}
    since = "0"
    deadline = time.monotonic() + 30
    while not (len(states) == 6 and set(states.values()) == {"DONE"}):
        assert time.monotonic() < deadline, states
        res = gahp.call("BOINC_QUERY_BATCHES", since, "1", "n")
        since = res[1]
        states.update(zip(res[3::2], res[4::2], strict=True))
        time.sleep(0.05)


def test_two_projects_alternately(gahp, tmp_path, inputs):
    with (
        EmulatorServer(state_dir=tmp_path / "e1", port=0, job_delay=0.05) as p1,
        EmulatorServer(state_dir=tmp_path / "e2", port=0, job_delay=0.05) as p2,
    ):
        select(gahp, p1)
        r1 = gahp.reqid()
        assert gahp.command(
            "BOINC_SUBMIT", r1, *submit_args("p1b", "uppercase", [("p1b#0", [], [inputs["a.txt"]])])
        ) == ["S"]
        select(gahp, p2)  # before the first submit has finished
        r2 = gahp.reqid()
        assert gahp.command(
            "BOINC_SUBMIT", r2, *submit_args("p2b", "uppercase", [("p2b#0", [], [inputs["b.txt"]])])
        ) == ["S"]
        got = gahp.wait_results([r1, r2])
        assert got[r1] == ["NULL"] and got[r2] == ["NULL"]
        assert wait_status(gahp, "p2b", {"DONE"}) == {"p2b#0": "DONE"}
        res = gahp.call("BOINC_QUERY_BATCHES", "0", "1", "p1b")
        assert res[0].endswith("no batch named p1b")
        select(gahp, p1)
        assert wait_status(gahp, "p1b", {"DONE"}) == {"p1b#0": "DONE"}


def test_bad_requests_get_e_or_error_results(gahp, emulator, inputs, tmp_path):
    assert gahp.command("BOINC_SELECT_PROJECT", "ftp://x/", "a")[0] == "E"
    assert gahp.command("BOINC_SELECT_PROJECT", emulator.url)[0] == "E"
    select(gahp, emulator)
    rid = gahp.reqid()
    assert gahp.command("BOINC_QUERY_BATCHES", rid, "0", "5", "only_one")[0] == "E"
    assert gahp.command("BOINC_SUBMIT", rid, "b", "uppercase", "2", "j", "0", "0")[0] == "E"
    assert gahp.command("BOINC_FETCH_OUTPUT", rid, "j", "/tmp", "e", "MANY", "0")[0] == "E"
    assert gahp.command("BOINC_SET_LEASE", rid, "b", "soon")[0] == "E"
    res = gahp.call(
        "BOINC_SUBMIT",
        *submit_args("bad1", "uppercase", [("bad1#0", [], [tmp_path / "missing.txt"])]),
    )
    assert len(res) == 1 and "missing.txt" in res[0]
    res = gahp.call(
        "BOINC_SUBMIT", *submit_args("bad2", "no_such_app", [("bad2#0", [], [inputs["a.txt"]])])
    )
    assert len(res) == 1 and "no_such_app" in res[0]
    res = gahp.call(
        "BOINC_SUBMIT",
        *submit_args("bad3", "uppercase", [("bad3#0", ["it's bad"], [inputs["a.txt"]])]),
    )
    assert len(res) == 1 and "cannot be passed" in res[0]
    res = gahp.call(
        "BOINC_SUBMIT", *submit_args("bad4", "concat", [("bad4#0", [], [inputs["a.txt"]])])
    )
    assert len(res) == 1 and "input files" in res[0]
    # none of the refused submissions left a batch behind
    assert gahp.call("BOINC_QUERY_BATCHES", "0", "1", "bad1")[0].endswith("no batch named bad1")
    assert gahp.command("COMMANDS")[0] == "S"


@pytest.mark.parametrize("kind", ["http500", "malformed_xml", "truncated", "reset"])
def test_server_faults_become_error_results(gahp, emulator, kind):
    select(gahp, emulator)
    emulator.inject_fault(kind, count=10, rpc="query_batch2")
    res = gahp.call("BOINC_QUERY_BATCHES", "0", "1", "whatever", timeout=60)
    assert len(res) == 1 and "query_batch2" in res[0], res
    emulator.clear_faults()
    assert gahp.call("BOINC_PING") == ["NULL"]


def test_timeout_and_refused_connection(emulator):
    gahp = GahpClient([*GAHP, "--timeout", "1", "--retries", "1"])
    select(gahp, emulator)
    emulator.inject_fault("delay", count=10, rpc="abort_jobs", seconds=3)
    res = gahp.call("BOINC_ABORT_JOBS", "x", timeout=120)
    assert len(res) == 1 and "in time" in res[0], res
    emulator.clear_faults()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert gahp.command("BOINC_SELECT_PROJECT", f"http://127.0.0.1:{port}/p/", "abcd") == ["S"]
    res = gahp.call("BOINC_RETIRE_BATCH", "b", timeout=120)
    assert len(res) == 1 and "cannot reach" in res[0], res
    gahp.close()


def test_transient_503_is_retried(gahp, emulator):
    select(gahp, emulator)
    emulator.inject_fault("http503", count=1, rpc="ping")
    assert gahp.call("BOINC_PING") == ["NULL"]


def test_a_command_is_answered_before_htcondors_deadline(emulator):
    """A command that cannot finish in time gets an error result instead of a late one."""
    gahp = GahpClient([*GAHP, "--timeout", "30", "--command-timeout", "2"])
    try:
        select(gahp, emulator)
        emulator.inject_fault("delay", count=5, rpc="ping", seconds=6)
        start = time.monotonic()
        res = gahp.call("BOINC_PING", timeout=30)
        assert len(res) == 1 and "within 2 s" in res[0], res
        assert time.monotonic() - start < 5
    finally:
        gahp.close()


@pytest.mark.parametrize("how", ["options", "config file"])
def test_default_project_without_select(emulator, inputs, tmp_path, how):
    """--project-url/--authenticator-file (or the same keys in --config): commands work with
    no BOINC_SELECT_PROJECT, and the authenticator stays out of the log."""
    auth = tmp_path / "project.auth"
    auth.write_text(emulator.authenticator + "\n")
    log = tmp_path / "default.log"
    if how == "options":
        extra = ["--project-url", emulator.url, "--authenticator-file", str(auth)]
    else:
        conf = tmp_path / "gahp.toml"
        conf.write_text(f'project_url = "{emulator.url}"\nauthenticator_file = "{auth}"\n')
        extra = ["--config", str(conf)]
    with GahpClient([*GAHP, "--log", str(log), "--log-level", "DEBUG", *extra]) as c:
        assert c.call("BOINC_PING") == ["NULL"]
        jobs = [("d#0", [], [inputs["a.txt"]])]
        assert c.call("BOINC_SUBMIT", *submit_args("d", "uppercase", jobs)) == ["NULL"]
        assert wait_status(c, "d", {"DONE"}) == {"d#0": "DONE"}
    assert emulator.store.batch_by_name("d") is not None
    assert emulator.authenticator not in log.read_text()


def test_lease_and_retire_change_the_batch_on_the_project(gahp, emulator, inputs):
    select(gahp, emulator)
    jobs = [("l#0", [], [inputs["a.txt"]])]
    assert gahp.call("BOINC_SUBMIT", *submit_args("l", "uppercase", jobs)) == ["NULL"]
    lease = int(time.time()) + 6 * 3600
    assert gahp.call("BOINC_SET_LEASE", "l", str(lease)) == ["NULL"]
    assert emulator.store.batch_by_name("l")["expire_time"] == lease
    wait_status(gahp, "l", {"DONE"})
    assert gahp.call("BOINC_RETIRE_BATCH", "l") == ["NULL"]
    assert emulator.store.batch_by_name("l")["state"] == 4  # retired
    res = gahp.call("BOINC_SET_LEASE", "nosuch", str(lease))
    assert len(res) == 1 and res[0] != "NULL" and "batch" in res[0], res  # the project's error


def test_submit_options_after_the_six_job_parameters(gahp, emulator, inputs):
    """BOINC_SUBMIT's NAME=VALUE extension: a quorum for every job of the batch reaches the
    jobs' own input templates; unknown, repeated or malformed options are refused."""
    select(gahp, emulator)
    jobs = [("q#1.0", [], [inputs["a.txt"]])]
    args = submit_args("q", "uppercase", jobs)
    res = gahp.call("BOINC_SUBMIT", *args, "priority=4", "min_quorum=2", "target_nresults=2")
    assert res == ["NULL"], res
    assert set(wait_status(gahp, "q", {"DONE", "ERROR"}).values()) == {"DONE"}
    store = emulator.project.store
    row = store.one("SELECT id, min_quorum, target_nresults FROM workunit WHERE name='q#1.0'")
    assert row is not None and (row["min_quorum"], row["target_nresults"]) == (2, 2)
    assert len(store.all("SELECT id FROM result WHERE workunit_id=?", row["id"])) == 2
    no_params = submit_args("q2", "uppercase", [("q2#1.0", [], [inputs["a.txt"]])], False)
    assert gahp.call("BOINC_SUBMIT", *no_params, "target_user=0") == ["NULL"]
    for extra, why in [
        (["colour=3"], "unknown"),
        (["priority=1", "priority=2"], "twice"),
        (["priority=high"], "not an integer"),
        (["priority=\u00b2"], "not an integer"),
        (["min_quorum=3", "target_nresults=2"], "min_quorum"),
        (["allocation_priority=2"], "0 or 1"),
    ]:
        res = gahp.command("BOINC_SUBMIT", "7", *submit_args("bad", "uppercase", jobs), *extra)
        assert res[0] == "E" and why in res[1], (extra, res)
    res = gahp.command("BOINC_SUBMIT", "8", *args[:-1], "priority=1")  # 5 parameters + option
    assert res[0] == "E" and "0 or 6" in res[1], res
