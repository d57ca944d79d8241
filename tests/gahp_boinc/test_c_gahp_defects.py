"""A defect seen in BOINC's C GAHP that our boinc-gahp must never have, driven from the
outside: ``python -m gahp_boinc`` over pipes against the bundled emulator on loopback.

Many BOINC_FETCH_OUTPUT of one batch's jobs at once made the C GAHP fail with "mv failed"
(its downloads shared temporary names).  Here 20 fetches of a batch's 20 jobs are in flight
together, into one shared directory, for plain outputs and for a zip archive unpacked into
place: every one succeeds and every file holds its own job's output.

Other BOINC fault handling is tested in ``tests/reliability/test_boinc_faults.py``, and
random request lines in ``tests/reliability/test_fuzz_servers.py::test_fuzz_boinc_gahp``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient

ROOT = Path(__file__).resolve().parents[2]
GAHP = [sys.executable, "-m", "gahp_boinc", "--timeout", "20"]
JOBS = 20
LINES = 10_000  # ~200 KB a job: downloads of several chunks, which interleave


def content(i: int) -> str:
    return f"job {i} of the batch\n" * LINES


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorServer]:
    srv = EmulatorServer(state_dir=tmp_path / "emu", port=0, job_delay=0.02, volunteers=2)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def gahp() -> Iterator[GahpClient]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    c = GahpClient(GAHP, env=env)
    yield c
    c.close()


def wait_done(c: GahpClient, batch: str, timeout: float = 120) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        res = c.call("BOINC_QUERY_BATCHES", "0", "1", batch)
        assert res[0] == "NULL", res
        states = dict(zip(res[3::2], res[4::2], strict=True))
        if len(states) == JOBS and set(states.values()) <= {"DONE", "ERROR"}:
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.2)


@pytest.mark.parametrize(("app", "output"), [("uppercase", "out"), ("zipper", "upper.txt")])
def test_concurrent_fetches_of_one_batch_all_succeed(
    gahp: GahpClient, emulator: EmulatorServer, tmp_path: Path, app: str, output: str
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    batch = f"many_{app}"
    names = [f"{batch}#{i}" for i in range(JOBS)]
    args = [batch, app, str(JOBS)]
    for i, name in enumerate(names):
        (inputs / f"{i}.txt").write_text(content(i))
        args += [name, "0", "1", str(inputs / f"{i}.txt"), "in"]
    assert gahp.command("BOINC_SELECT_PROJECT", emulator.url, emulator.authenticator) == ["S"]
    assert gahp.call("BOINC_SUBMIT", *args, *["NULL"] * 6, timeout=120) == ["NULL"]
    assert wait_done(gahp, batch) == dict.fromkeys(names, "DONE")

    iwd = tmp_path / "iwd"  # one directory for all: as jobs of one HTCondor cluster
    iwd.mkdir()
    first = 1000
    reqids = [str(first + i) for i in range(JOBS)]
    lines = [
        ["BOINC_FETCH_OUTPUT", rid, name, str(iwd), f"{i}.err", "SOME", "1", output, f"{i}.out"]
        for i, (rid, name) in enumerate(zip(reqids, names, strict=True))
    ]
    gahp.send_raw(
        b"".join(" ".join(line).encode() + b"\r\n" for line in lines)
    )  # all in flight at once
    assert [gahp.read_fields(timeout=30) for _ in lines] == [["S"]] * JOBS
    got = gahp.wait_results(reqids, timeout=120)
    bad = {rid: res for rid, res in got.items() if res[0] != "NULL" or len(res) != 4}
    assert not bad, bad
    for i in range(JOBS):
        assert (iwd / f"{i}.out").read_text() == content(i).upper(), i
        assert (iwd / f"{i}.err").exists(), i
    leftovers = sorted(p.name for p in iwd.iterdir() if not p.name.endswith((".out", ".err")))
    assert not leftovers, leftovers  # no temporary file left behind, nothing unasked for
    assert gahp.call("BOINC_RETIRE_BATCH", batch) == ["NULL"]
