"""``boinc-gahp-demo``: a BOINC GAHP session against a local BOINC project emulator.

Starts the emulator on 127.0.0.1, spawns ``boinc-gahp`` and drives it as HTCondor's
gridmanager would: select the project, ping, submit a batch whose jobs share some input
files, set the lease, poll until every job is final, fetch the outputs (renamed) into a
directory, retire the batch, and print a summary. The project's own view of the batch is
read with :class:`~gahp_boinc.BoincClient`.

``--library`` runs the same workflow without the GAHP, through ``BoincClient`` alone (the
way a Python program submits to BOINC).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gahp_boinc import BoincClient, BoincError, Job, SyncBoincClient
from gahp_boinc.emulator import EmulatorServer
from gahp_core import GahpClient, __version__

WORDS = ["volunteer", "computing", "grid", "ascii", "helper", "protocol", "batch", "job"]


def _make_inputs(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(count):
        p = folder / f"input{i}.txt"
        p.write_text(f"{WORDS[i % len(WORDS)]} number {i}\n")
        files.append(p)
    return files


def run_demo(out_dir: Path, jobs: int, job_delay: float, failing: bool = True) -> int:
    """Run the whole demo; return 0 when every job ended as expected."""
    work = Path(tempfile.mkdtemp(prefix="boinc-gahp-demo-"))
    try:
        inputs = _make_inputs(work / "inputs", max(1, jobs // 2))  # jobs share inputs
        with EmulatorServer(
            state_dir=work / "project", port=0, job_delay=job_delay, volunteers=2
        ) as srv:
            print(f"BOINC project emulator at {srv.url}")
            gahp = GahpClient(
                [sys.executable, "-m", "gahp_boinc", "--log", str(work / "gahp.log")],
                stderr=subprocess.DEVNULL,
            )
            try:
                return _session(gahp, srv, inputs, out_dir, jobs, failing)
            finally:
                gahp.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _session(
    gahp: GahpClient,
    srv: EmulatorServer,
    inputs: list[Path],
    out_dir: Path,
    jobs: int,
    failing: bool,
) -> int:
    print(f"GAHP banner: {gahp.banner}")
    assert gahp.command("BOINC_SELECT_PROJECT", srv.url, srv.authenticator) == ["S"]
    print("ping:", " ".join(gahp.call("BOINC_PING")))
    batch = f"condor#demo#uppercase#{int(time.time())}"
    args, names = _submit_args(batch, inputs, jobs)
    t0 = time.monotonic()
    res = gahp.call("BOINC_SUBMIT", *args, timeout=300)
    if res != ["NULL"]:
        print("submit failed:", res[0])
        return 1
    print(
        f"submitted {jobs} jobs with {len(inputs)} distinct input files "
        f"in {time.monotonic() - t0:.2f} s ({srv.stats.get('upload_files', 0)} upload request)"
    )
    extra = _submit_failing(gahp, batch, inputs[0]) if failing else None
    gahp.call("BOINC_SET_LEASE", batch, str(int(time.time()) + 6 * 3600))
    states = _poll(gahp, batch, jobs, t0)
    if states is None:
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    fetched = _fetch_done(gahp, names, states, out_dir)
    print(f"fetched outputs of {fetched} jobs into {out_dir}")
    if extra:
        _show_failed_job(gahp, extra, out_dir)
    _show_batch(srv, batch)
    print("retire:", " ".join(gahp.call("BOINC_RETIRE_BATCH", batch)))
    sample = out_dir / "job0.out"
    if sample.exists():
        print(f"job0: {inputs[0].read_text().strip()!r} -> {sample.read_text().strip()!r}")
    gahp.quit()
    return _summary(jobs, fetched, states)


def _submit_failing(gahp: GahpClient, batch: str, input_file: Path) -> str:
    """Submit a one-job batch of the ``fail`` app beside ``batch``; its name."""
    extra = f"{batch}-fail"
    fail_args = [extra, "fail", "1", f"{extra}#1.0", "0", "1", str(input_file), "in"]
    gahp.call("BOINC_SUBMIT", *fail_args)
    return extra


def _summary(jobs: int, fetched: int, states: dict[str, str]) -> int:
    """Print the summary line; the exit status (0 when every job's outputs came)."""
    ok = fetched == jobs
    print(
        f"summary: {jobs} jobs, {fetched} done and fetched, "
        f"{sum(1 for s in states.values() if s == 'ERROR')} failed: "
        f"{'OK' if ok else 'INCOMPLETE'}"
    )
    return 0 if ok else 1


def _submit_args(batch: str, inputs: list[Path], jobs: int) -> tuple[list[str], list[str]]:
    """BOINC_SUBMIT's arguments for a batch of ``jobs`` jobs sharing ``inputs``, and the
    jobs' names."""
    args = [batch, "uppercase", str(jobs)]
    names = []
    for i in range(jobs):
        name = f"{batch}#1.{i}"
        names.append(name)
        src = inputs[i % len(inputs)]
        args += [name, "2", "--repeat", "1", "1", str(src), "in"]
    args += ["NULL"] * 6
    return args, names


def _poll(gahp: GahpClient, batch: str, jobs: int, t0: float) -> dict[str, str] | None:
    """Query the batch until its jobs are all final (or two minutes passed), showing the
    progress; the jobs' states, or None when a query failed."""
    states: dict[str, str] = {}
    server_time = "0"
    shown = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        res = gahp.call("BOINC_QUERY_BATCHES", server_time, "1", batch)
        if res[0] != "NULL":
            print("query failed:", res[0])
            return None
        server_time = res[1]
        states.update(zip(res[3::2], res[4::2], strict=True))
        counts = {s: list(states.values()).count(s) for s in sorted(set(states.values()))}
        line = ", ".join(f"{k} {v}" for k, v in counts.items()) or "waiting"
        if line != shown:
            print(f"progress after {time.monotonic() - t0:4.1f} s: {line}")
            shown = line
        if len(states) == jobs and all(s in ("DONE", "ERROR") for s in states.values()):
            break
        time.sleep(0.5)
    return states


def _fetch_done(gahp: GahpClient, names: list[str], states: dict[str, str], out_dir: Path) -> int:
    """Fetch the outputs of the jobs done into ``out_dir`` (renamed); how many were."""
    fetched = 0
    for i, name in enumerate(names):
        if states.get(name) != "DONE":
            continue
        res = gahp.call(
            "BOINC_FETCH_OUTPUT",
            name,
            str(out_dir),
            f"job{i}.stderr",
            "ALL",
            "1",
            "out",
            f"job{i}.out",
        )
        if res[0] == "NULL":
            fetched += 1
        else:
            print(f"fetch {name} failed: {res[0]}")
    return fetched


def _show_failed_job(gahp: GahpClient, extra: str, out_dir: Path) -> None:
    """How the job of the batch that fails on purpose ends; retire that batch."""
    # it was submitted after the main batch, and may still be running when that one is done
    deadline = time.monotonic() + 60
    res = gahp.call("BOINC_QUERY_BATCHES", "0", "1", extra)
    while len(res) > 4 and res[4] not in ("DONE", "ERROR") and time.monotonic() < deadline:
        time.sleep(0.2)
        res = gahp.call("BOINC_QUERY_BATCHES", "0", "1", extra)
    state = res[4] if len(res) > 4 else f"unknown ({res[0]})"
    print(f"a job of an application that fails on purpose ends as: {state}")
    res = gahp.call("BOINC_FETCH_OUTPUT", f"{extra}#1.0", str(out_dir), "fail.stderr", "ALL", "0")
    print(f"  and fetching its output answers: {res[0]}")
    gahp.call("BOINC_RETIRE_BATCH", extra)


def _show_batch(srv: EmulatorServer, batch: str) -> None:
    """The project's own summary of the batch, read with the client library."""
    with SyncBoincClient(srv.url, srv.authenticator) as client:
        info = client.query_batch(batch, get_job_details=False).batch
    print(
        f"the project's view: batch {info.id}, {info.njobs} jobs, {info.nerror_jobs} failed, "
        f"{info.fraction_done:.0%} done, {info.state_name}"
    )


def run_library_demo(out_dir: Path, jobs: int, job_delay: float) -> int:
    """The demo's workflow through :class:`BoincClient` alone; 0 when every job is fetched."""
    work = Path(tempfile.mkdtemp(prefix="boinc-client-demo-"))
    try:
        inputs = _make_inputs(work / "inputs", max(1, jobs // 2))
        with EmulatorServer(
            state_dir=work / "project", port=0, job_delay=job_delay, volunteers=2
        ) as srv:
            print(f"BOINC project emulator at {srv.url}")
            return asyncio.run(_library_session(srv, inputs, out_dir, jobs))
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _library_session(
    srv: EmulatorServer, inputs: list[Path], out_dir: Path, jobs: int
) -> int:
    batch = f"demo-uppercase-{int(time.time())}"
    async with BoincClient(srv.url, srv.authenticator) as client:
        await client.ping()
        print("ping: OK")
        t0 = time.monotonic()
        job_list = [
            Job(f"{batch}-{i}", ["--repeat", "1"], [inputs[i % len(inputs)]]) for i in range(jobs)
        ]
        report = await client.submit(batch, "uppercase", job_list)
        print(
            f"submitted {jobs} jobs with {report.distinct_files} distinct input files "
            f"in {time.monotonic() - t0:.2f} s ({report.uploaded_files} uploaded)"
        )
        await client.lease(batch, 6 * 3600)
        states = await client.wait(batch, interval=0.5, timeout=120)
        print(f"finished after {time.monotonic() - t0:.1f} s: {sorted(states.values())}")
        out_dir.mkdir(parents=True, exist_ok=True)
        fetched = 0
        for i, name in enumerate(sorted(states)):
            try:
                await client.fetch_output(
                    name, out_dir, stderr_file=f"job{i}.stderr", files={"out": f"job{i}.out"}
                )
                fetched += 1
            except BoincError as exc:
                print(f"fetch {name} failed: {exc}")
        print(f"fetched outputs of {fetched} jobs into {out_dir}")
        await client.retire(batch)
        print(f"RPCs sent: {dict(sorted(client.calls.items()))}")
    ok = fetched == jobs
    print(f"summary: {jobs} jobs, {fetched} done and fetched: {'OK' if ok else 'INCOMPLETE'}")
    return 0 if ok else 1


def main() -> None:
    ap = argparse.ArgumentParser(prog="boinc-gahp-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    ap.add_argument(
        "--out",
        type=Path,
        default=Path("demo-output"),
        help="where outputs go (default ./demo-output)",
    )
    ap.add_argument("--jobs", type=int, default=8, help="jobs in the batch (default 8)")
    ap.add_argument(
        "--job-delay",
        type=float,
        default=0.5,
        help="seconds a simulated volunteer takes per job (default 0.5)",
    )
    ap.add_argument(
        "--library",
        action="store_true",
        help="submit through the BoincClient library instead of the GAHP",
    )
    a = ap.parse_args()
    if a.jobs < 1:
        ap.error("--jobs must be at least 1")
    if a.library:
        raise SystemExit(run_library_demo(a.out, a.jobs, a.job_delay))
    raise SystemExit(run_demo(a.out, a.jobs, a.job_delay))


if __name__ == "__main__":
    main()
