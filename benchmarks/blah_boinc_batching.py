"""blahpd's boinc driver: N jobs submitted as HTCondor's gridmanager does (one BLAH_JOB_SUBMIT
per job, 50 in flight), one BOINC batch per job (BEFORE: ``batch_window_s = 0``,
``status_registry = false``, as the driver was) against shared batches (AFTER: the
defaults, ``batch_window_s = 1``).

For each: the BOINC batches created, the HTTP requests the project received until every job
was on it (total and per job), the wall time until all submits were answered and until all
jobs were on the project; then one status poll round (a BLAH_JOB_STATUS per job, 50 in
flight) and the requests it cost.  Every job has an input file of its own.

Against the emulator (volunteer paused: the jobs stay queued); ``--real`` adds the same at
``--real-n`` jobs on the real BOINC server of `.ci/boinc-server-up.sh` (requests counted in
blahpd's log, as the project has other clients; the jobs are cancelled at the end so the
volunteer is not loaded).

Usage: python benchmarks/blah_boinc_batching.py [--small] [--n N] [--real] [--real-n N]
(N = 500, 100 with --small)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gahp_boinc.emulator import EmulatorServer
from gahp_core import GahpClient

BLAHPD = [sys.executable, "-m", "gahp_blah"]
INFLIGHT = 50


def pipelined(c: GahpClient, command: str, args: list[str]) -> tuple[float, list[list[str]]]:
    """One ``command`` per argument, at most INFLIGHT unanswered; wall time and results."""
    t0 = time.perf_counter()
    results: dict[str, list[str]] = {}
    order: list[str] = []
    pending: set[str] = set()
    todo = list(args)
    while todo or pending:
        sent = []
        while todo and len(pending) + len(sent) < INFLIGHT:
            rid = c.reqid()
            sent.append(rid)
            order.append(rid)
            c.send(command, rid, todo.pop(0))
        for rid in sent:
            if c.read_line(timeout=300) != "S":
                raise SystemExit(f"{command} not accepted")
            pending.add(rid)
        got = c.results(timeout=300)
        for fields in got:
            results[fields[0]] = fields[1:]
            pending.discard(fields[0])
        if not got:
            time.sleep(0.002)
    return time.perf_counter() - t0, [results[r] for r in order]


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(path: Path, url: str, auth: Path, extra: str) -> Path:
    path.write_text(
        f"state_dir = {quote(str(path.parent / 'state'))}\n"
        f"[driver.boinc]\nproject_url = {quote(url)}\nauthenticator_file = {quote(str(auth))}\n"
        + extra
    )
    return path


MODES = {
    "before (one batch per job)": "batch_window_s = 0\nstatus_registry = false\n",
    "after (shared batches)": "",
}


def run(
    label: str,
    n: int,
    work: Path,
    url: str,
    auth: Path,
    extra: str,
    app: str,
    requests: Callable[[], int] | None,
    jobs_on_project: Callable[[list[str]], int],
    batches: Callable[[list[str]], int],
) -> dict[str, float]:
    work.mkdir(parents=True)
    stamp = f"{time.time():.6f}"[-9:]  # inputs new to the project: each is uploaded
    for i in range(n):
        (work / f"in.{i}").write_text(f"job {i} {stamp}\n")
    conf = write_config(work / "blah.toml", url, auth, extra)
    ads = [
        f'[ Cmd = {quote(str(work / app))}; Iwd = {quote(str(work))}; In = "in.{i}";'
        ' gridtype = "boinc" ]'
        for i in range(n)
    ]
    argv = [*BLAHPD, "--config", str(conf)]
    if requests is None:  # count the requests blahpd logs (the project has other clients)
        log = work / "blah.log"
        argv += ["--log", str(log), "--log-level", "DEBUG"]

        def requests() -> int:
            text = log.read_text() if log.exists() else ""
            return len(re.findall(r" gahp\.boinc\.rpc DEBUG \S+: HTTP \d+", text))

    with GahpClient(argv) as c:
        start = requests()
        t0 = time.perf_counter()
        t_answered, res = pipelined(c, "BLAH_JOB_SUBMIT", ads)
        bad = [r for r in res if r[0] != "0"]
        if bad:
            raise SystemExit(f"{label}: {len(bad)} submits failed, e.g. {bad[0]}")
        names = [r[2].rsplit("/", 1)[1] for r in res]
        deadline = time.monotonic() + 600
        while jobs_on_project(names) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"{label}: jobs not on the project after 600 s")
            time.sleep(0.05)
        t_all = time.perf_counter() - t0
        submit_requests = requests() - start
        nbatches = batches(names)
        time.sleep(1.0)
        before_poll = requests()
        t_poll, st = pipelined(c, "BLAH_JOB_STATUS", [r[2] for r in res])
        poll_requests = requests() - before_poll
        errors = sum(1 for r in st if r[0] != "0")
        t_cancel, _ = pipelined(c, "BLAH_JOB_CANCEL", [r[2] for r in res])
        c.quit()
    print(
        f"  {label}: {n} jobs -> {nbatches} BOINC batches, {submit_requests} HTTP requests "
        f"({submit_requests / n:.3f} per job); submits answered in {t_answered:.2f} s, "
        f"all jobs on the project in {t_all:.2f} s; one status round {t_poll:.2f} s, "
        f"{poll_requests} requests ({poll_requests / n:.3f} per job), {errors} errors",
        flush=True,
    )
    return {
        "batches": nbatches,
        "requests": submit_requests,
        "per_job": submit_requests / n,
        "t_answered": t_answered,
        "t_all": t_all,
        "poll_requests": poll_requests,
    }


def emulator_runs(n: int, tmp: Path) -> dict[str, dict[str, float]]:
    out = {}
    print(f"emulator: {n} jobs, one BLAH_JOB_SUBMIT each, {INFLIGHT} in flight", flush=True)
    for i, (label, extra) in enumerate(MODES.items()):
        with EmulatorServer(state_dir=tmp / f"project{i}", port=0, paused=True) as emu:
            auth = tmp / f"auth{i}"
            auth.write_text(emu.authenticator + "\n")
            store = emu.store
            assert store is not None

            def on_project(names: list[str], store=store) -> int:
                return store.one("SELECT COUNT(*) AS n FROM workunit")["n"]

            def nbatches(names: list[str], store=store) -> int:
                return store.one("SELECT COUNT(*) AS n FROM batch")["n"]

            out[label] = run(
                label,
                n,
                tmp / f"work{i}",
                emu.url,
                auth,
                extra,
                "uppercase",
                lambda emu=emu: emu.stats.get("requests", 0),
                on_project,
                nbatches,
            )
    return out


def real_runs(n: int, tmp: Path) -> None:
    env_path = Path(os.environ.get("GAHP_BOINC_DIR", "/tmp/gahp-boinc-server")) / "env"
    env: dict[str, str] = {}
    for line in env_path.read_text().splitlines() if env_path.exists() else []:
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep:
            env[name.strip()] = value.strip().strip("'\"")
    if "GAHP_BOINC_PROJECT_URL" not in env:
        print("real server: not running (bash .ci/boinc-server-up.sh), skipped")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "boinc_real"))
    from conftest import RealBoinc  # type: ignore[import-not-found]

    real = RealBoinc(
        url=env["GAHP_BOINC_PROJECT_URL"],
        auth=env["GAHP_BOINC_AUTH"],
        nosubmit_auth=env.get("GAHP_BOINC_NOSUBMIT_AUTH", ""),
        app=env["GAHP_BOINC_APP"],
        db_host=env["GAHP_BOINC_DB_HOST"],
        db_name=env["GAHP_BOINC_DB_NAME"],
        db_user=env["GAHP_BOINC_DB_USER"],
        db_password=env["GAHP_BOINC_DB_PASSWORD"],
        project_dir=Path(env["GAHP_BOINC_PROJECT_DIR"]),
        c_gahp=Path(env.get("GAHP_BOINC_C_GAHP", "/nonexistent")),
        access_log=Path(env["GAHP_BOINC_ACCESS_LOG"]),
    )
    auth = tmp / "real-auth"
    auth.write_text(real.auth + "\n")
    auth.chmod(0o600)

    def in_list(names: list[str]) -> str:
        return ",".join(f"'{x}'" for x in names)

    def on_project(names: list[str]) -> int:
        rows = real.sql(f"SELECT COUNT(*) AS n FROM workunit WHERE name IN ({in_list(names)})")
        return int(rows[0]["n"])

    def nbatches(names: list[str]) -> int:
        rows = real.sql(
            f"SELECT COUNT(DISTINCT batch) AS n FROM workunit WHERE name IN ({in_list(names)})"
        )
        return int(rows[0]["n"])

    print(f"real BOINC 8.3 server: {n} jobs", flush=True)
    for i, (label, extra) in enumerate(MODES.items()):
        run(label, n, tmp / f"real{i}", real.url, auth, extra, real.app, None, on_project, nbatches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="100 jobs (CI)")
    ap.add_argument("--n", type=int, help="jobs (default 500, 100 with --small)")
    ap.add_argument("--real", action="store_true", help="also on the real BOINC server")
    ap.add_argument("--real-n", type=int, default=20)
    args = ap.parse_args()
    n = args.n or (100 if args.small else 500)
    with tempfile.TemporaryDirectory(prefix="blah-boinc-batching-") as tmp:
        got = emulator_runs(n, Path(tmp))
        before, after = got.values()
        print(
            f"=> HTTP requests per job {before['per_job']:.3f} -> {after['per_job']:.3f}; "
            f"batches {before['batches']:g} -> {after['batches']:g}; all jobs on the project "
            f"in {before['t_all']:.2f} s -> {after['t_all']:.2f} s; status round "
            f"{before['poll_requests']:g} -> {after['poll_requests']:g} requests"
        )
        # Each upload_files request takes at most 20 files: with an input file per job that
        # is 0.05 requests per job, plus ~6 per batch, so the target is for 500 jobs; a
        # smaller run must cut the requests at least 20-fold.
        if n >= 500:
            ok = after["per_job"] < 0.1
            target = "< 0.1 HTTP requests per job"
        else:
            ok = after["per_job"] <= before["per_job"] / 20
            target = "20 times fewer HTTP requests (< 0.1 per job is for 500 jobs)"
        print(f"target ({target}): {'met' if ok else 'NOT met'}")
        if args.real:
            real_runs(args.real_n, Path(tmp))
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
