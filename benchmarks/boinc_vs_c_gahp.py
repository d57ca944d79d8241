"""boinc-gahp side by side with BOINC's reference C GAHP, on the real BOINC server and the emulator.

Both GAHPs are driven over pipes as HTCondor's gridmanager drives them (banner, COMMANDS,
ASYNC_MODE_ON, BOINC_SELECT_PROJECT, asynchronous requests with ids, RESULTS polling), back
to back in one run, on the same server:

1. a burst of N asynchronous BOINC_PING: rate (pings until the last result is in, per second)
   and failures (error results plus results missing when the wait ends);
2. BOINC_SUBMIT of J jobs over J/2 local files of ~4 KB (each file is the one input of two
   jobs; every GAHP gets fresh files, so both upload): wall time, HTTP requests (Apache's
   access log on the real server, the emulator's counters there), file bytes uploaded (the
   emulator's counter; Apache does not log request sizes). The C GAHP sends every file in
   one upload_files request, and PHP takes 20 files a request: it fails beyond 20 files.
   So the same again with J jobs over 20 files, where both succeed;
3. BOINC_QUERY_BATCHES over the J-job batch of 20 files: median wall time of a few queries;
4. F BOINC_FETCH_OUTPUT of DONE jobs, in one burst: wall time and failures. On the real server
   the one volunteer finishes a job every 30-60 s, so a few jobs (submitted first and waited
   for) are fetched repeatedly, each fetch into its own directory; on the emulator F jobs
   really complete first.

The requests to the real server go to the project URL with a doubled final slash
(``.../boinctest//``): Apache serves it as usual, and it marks this run's requests in the
shared access log. The C GAHP splits requests on every space and never answers QUIT (it is
killed): names and paths here contain no spaces. Batches are aborted and retired at the end.

Without the real server or the C GAHP only the emulator lines run (and say so), unless
GAHP_REQUIRE_BOINC_SERVER=1, which makes that an error.

Usage: python benchmarks/boinc_vs_c_gahp.py [--pings 1000] [--jobs 1000] [--fetches 100]
                                            [--small] [--emulator-only]
Exit status 1 if one of boinc-gahp's requests failed (the C GAHP's failures are only shown).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from gahp_core import GahpClient, join

ENV_FILE = Path(os.environ.get("GAHP_BOINC_DIR", "/tmp/gahp-boinc-server")) / "env"
REQUIRE = "GAHP_REQUIRE_BOINC_SERVER"
OURS = "ours"
THEIRS = "C GAHP"
C_GAHP_MAX_FILES = 20
"""The C GAHP uploads every file in one request, and PHP takes 20 files a request."""


# ---- the emulator, in a process of its own ---------------------------------------------------


def serve_emulator(state_dir: str, job_delay: float) -> None:
    """Child mode: run the emulator paused; stdin lines stats/reset/resume, EOF stops it."""
    from gahp_boinc.emulator import EmulatorServer

    with EmulatorServer(
        state_dir=state_dir,
        port=0,
        job_delay=job_delay,
        volunteers=2,
        inline_apps=True,
        paused=True,
    ) as srv:
        print(json.dumps({"url": srv.url, "auth": srv.authenticator}), flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "stats":
                print(json.dumps(dict(srv.stats)), flush=True)
            elif cmd == "reset":
                srv.reset_stats()
                print("{}", flush=True)
            elif cmd == "resume":
                srv.resume_volunteer()
                print("{}", flush=True)


class Emulator:
    """The emulator in a child process (off this process's GIL), with its counters."""

    def __init__(self, state_dir: Path, job_delay: float) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve-emulator",
                str(state_dir),
                "--job-delay",
                str(job_delay),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        hello = self._read()
        self.url, self.auth = hello["url"], hello["auth"]

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the emulator did not start")
        return json.loads(line)

    def ask(self, cmd: str) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self._read()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---- the real server -------------------------------------------------------------------------


def read_env(path: Path = ENV_FILE) -> dict[str, str]:
    """``export GAHP_BOINC_*=value`` lines of the server's env file, then the environment."""
    settings: dict[str, str] = {}
    try:
        for line in path.read_text().splitlines():
            name, sep, value = line.removeprefix("export ").partition("=")
            if sep and name.startswith("GAHP_BOINC_"):
                settings[name.strip()] = value.strip().strip("'\"")
    except OSError:
        pass
    settings.update({k: v for k, v in os.environ.items() if k.startswith("GAHP_BOINC_")})
    return settings


def ping_project(url: str) -> str | None:
    """None when the project answers the ping RPC, else why not."""
    data = urllib.parse.urlencode({"request": "<ping> </ping>"}).encode()
    try:
        with urllib.request.urlopen(url + "submit_rpc_handler.php", data, 10) as resp:
            body = resp.read()
    except OSError as exc:
        return f"project {url} does not answer ({exc})"
    return None if b"<success>1</success>" in body else f"project {url} answers {body[:100]!r}"


class AccessLog:
    """Counts this run's requests (marked by their URL path) appended to Apache's log."""

    def __init__(self, path: Path, marker: str) -> None:
        self.path, self.marker = path, marker.encode()
        self.offset = path.stat().st_size

    def count(self) -> int:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            return sum(1 for line in fh if self.marker in line)


# ---- driving a GAHP --------------------------------------------------------------------------


class Gahp:
    """One GAHP process, started and set up as the gridmanager does."""

    def __init__(self, name: str, command: Sequence[str], url: str, auth: str, cwd: Path) -> None:
        self.name = name
        self.client = GahpClient(command, cwd=cwd)
        if not self.client.command("COMMANDS")[0] == "S":
            raise SystemExit(f"{name}: COMMANDS refused")
        for line in (["ASYNC_MODE_ON"], ["BOINC_SELECT_PROJECT", url, auth]):
            ret = self.client.command(*line, timeout=30)
            if ret[:1] != ["S"]:
                raise SystemExit(f"{name}: {line[0]} answered {ret}")

    @property
    def pid(self) -> int:
        return self.client.proc.pid

    def burst(
        self,
        command: str,
        arglists: Sequence[Sequence[str]],
        timeout: float,
        stall: float = 30.0,
        poll: float = 0.01,
    ) -> tuple[float, dict[str, list[str]], int]:
        """Send every request at once, poll RESULTS every ``poll`` seconds until all are
        answered (or ``timeout``, or ``stall`` seconds without a new result). Returns
        (seconds from the first send to the last result, results by id, results missing)."""
        c = self.client
        ids = [c.reqid() for _ in arglists]
        payload = "".join(
            join([command, rid, *args]) + "\r\n" for rid, args in zip(ids, arglists, strict=True)
        )
        t0 = time.perf_counter()
        c.send_raw(payload.encode())
        for rid in ids:
            ret = c.read_line(timeout=60)
            if ret.rstrip("\r") != "S":
                raise SystemExit(f"{self.name}: {command} {rid} not accepted: {ret!r}")
        want = set(ids)
        got: dict[str, list[str]] = {}
        last = t0
        while want - got.keys():
            now = time.perf_counter()
            if now - t0 > timeout or now - max(last, t0) > stall:
                break
            for fields in c.results(timeout=60):
                if fields[0] in want and fields[0] not in got:
                    got[fields[0]] = fields[1:]
                    last = time.perf_counter()
            if want - got.keys():
                time.sleep(poll)
        return last - t0, got, len(want - got.keys())

    def call(self, command: str, *args: str, timeout: float = 600.0) -> tuple[float, list[str]]:
        elapsed, got, missing = self.burst(command, [args], timeout, stall=timeout, poll=0.001)
        if missing:
            return elapsed, ["(no result)"]
        return elapsed, next(iter(got.values()))

    def stop(self) -> None:
        p = self.client.proc
        if self.name == OURS:
            try:
                self.client.quit(timeout=10)
                return
            except (AssertionError, OSError, EOFError, subprocess.TimeoutExpired):
                pass
        p.kill()  # the C GAHP does not answer QUIT
        p.wait(10)


def failures(results: dict[str, list[str]], missing: int) -> tuple[int, str]:
    """Error results plus missing ones, and the most common error text."""
    errors = [r[0] if r else "" for r in results.values() if not r or r[0] != "NULL"]
    common = max(set(errors), key=errors.count) if errors else ""
    return len(errors) + missing, common


def make_files(folder: Path, n: int, size: int) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for i in range(n):
        p = folder / f"f{i:05d}.dat"
        head = f"{folder.name} {i} {time.time_ns()}\n".encode()
        body = os.urandom(max(0, size - len(head))).hex().encode()[: size - len(head)]
        p.write_bytes(head + body)
        paths.append(p)
    return paths


def submit_args(batch: str, app: str, files: Sequence[Path], njobs: int, params: bool) -> list[str]:
    args = [batch, app, str(njobs)]
    for i in range(njobs):
        args += [f"{batch}#{i}", "2", "--cpu_time", "1", "1", str(files[i % len(files)]), "in"]
    return args + (["NULL"] * 6 if params else [])


# ---- the comparison --------------------------------------------------------------------------


class Table:
    """The comparison table: one row per line."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str, str]] = []
        self.ours_failed = 0

    def add(
        self,
        line: str,
        ours: float | None,
        theirs: float | None,
        unit: str,
        higher_better: bool,
        f_ours: object = "",
        f_theirs: object = "",
    ) -> None:
        def fmt(v: float | None) -> str:
            if v is None:
                return "-"
            return f"{v:,.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"

        if isinstance(f_ours, int):
            self.ours_failed += f_ours
        ratio = "-"
        if ours is not None and theirs is not None and ours > 0 and theirs > 0:
            ratio = f"{(ours / theirs if higher_better else theirs / ours):.2f}x"
        self.rows.append((line, fmt(ours), fmt(theirs), ratio, str(f_ours), str(f_theirs)))

    def print(self) -> None:
        head = ("line", "ours", "C GAHP", "ours better by", "failures ours", "failures C")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(6)]
        for i, r in enumerate([head, *self.rows]):
            print("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |")
            if i == 0:
                print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


class Bench:
    """Runs the four lines on one server for the GAHPs given."""

    abort_at_once = False

    def __init__(
        self,
        a: argparse.Namespace,
        where: str,
        url: str,
        auth: str,
        work: Path,
        gahps: dict[str, list[str]],
        app: str,
    ) -> None:
        self.a, self.where, self.work, self.app = a, where, work, app
        self.table = Table()
        self.gahps = {n: Gahp(n, cmd, url, auth, work) for n, cmd in gahps.items()}
        self.batches: list[tuple[str, list[str]]] = []
        self.fetch_batch = ""
        self.aborted: set[str] = set()
        self.notes: list[str] = []

    @property
    def ours(self) -> Gahp:
        return self.gahps[OURS]

    def counters(self) -> tuple[int, int]:
        """HTTP requests served so far, and file bytes uploaded (-1: not known)."""
        raise NotImplementedError

    def ping_line(self) -> None:
        res = {}
        for name, g in self.gahps.items():
            g.call("BOINC_PING")  # as the gridmanager does first; warms up either process
            elapsed, got, missing = g.burst("BOINC_PING", [[]] * self.a.pings, timeout=180)
            nfail, why = failures(got, missing)
            res[name] = (self.a.pings / elapsed if elapsed > 0 else 0.0, nfail)
            if nfail:
                self.notes.append(f"{name} ping: {nfail} failed ({missing} missing), e.g. {why!r}")
        self.table.add(
            f"{self.where}: {self.a.pings} BOINC_PING burst",
            res[OURS][0],
            res.get(THEIRS, (None,))[0],
            "/s",
            True,
            res[OURS][1],
            res.get(THEIRS, ("", ""))[1],
        )

    def submit_line(self, nfiles: int) -> dict[str, str]:
        """One BOINC_SUBMIT of ``jobs`` jobs over ``nfiles`` fresh files per GAHP; the batch
        names that were submitted."""
        res = {}
        for name, g in self.gahps.items():
            tag = f"{'ours' if name == OURS else 'c'}{nfiles}"
            files = make_files(self.work / f"in-{self.where}-{tag}", nfiles, self.a.file_size)
            batch = f"cmpbench#{self.where}#{tag}#{int(time.time())}"
            args = submit_args(batch, self.app, files, self.a.jobs, params=True)
            before = self.counters()
            elapsed, ret = g.call("BOINC_SUBMIT", *args)
            after = self.counters()
            ok = ret == ["NULL"]
            if not ok:
                self.notes.append(f"{name} submit of {nfiles} files: {ret}")
            self.batches.append((batch, [f"{batch}#{i}" for i in range(self.a.jobs)]))
            if self.abort_at_once:
                self.abort_submitted()
            uploaded = after[1] - before[1] if after[1] >= 0 else -1
            res[name] = (elapsed, after[0] - before[0], uploaded, 0 if ok else 1, batch)
        t = self.table
        line = f"{self.where}: BOINC_SUBMIT {self.a.jobs} jobs / {nfiles} files"
        th = res.get(THEIRS)
        t.add(line + ", wall", res[OURS][0], th and th[0], "s", False, res[OURS][3], th and th[3])
        t.add(line + ", HTTP requests", res[OURS][1], th and th[1], "", False)
        if res[OURS][2] >= 0:
            t.add(line + ", bytes uploaded", res[OURS][2] / 1e6, th and th[2] / 1e6, "MB", False)
        return {n: r[4] for n, r in res.items() if not r[3]}

    def query_line(self, batches: dict[str, str]) -> None:
        res = {}
        for name, g in self.gahps.items():
            batch = batches.get(name)
            if batch is None:
                res[name] = (None, "no batch")
                continue
            times, bad = [], 0
            for _ in range(self.a.queries):
                elapsed, ret = g.call("BOINC_QUERY_BATCHES", "0", "1", batch)
                times.append(elapsed)
                jobs = (len(ret) - 3) // 2 if ret and ret[0] == "NULL" else -1
                if jobs != self.a.jobs:
                    bad += 1
                    self.notes.append(f"{name} query: {ret[:3]}... ({jobs} jobs)")
            res[name] = (statistics.median(times), bad)
        th = res.get(THEIRS)
        line = f"{self.where}: BOINC_QUERY_BATCHES, {self.a.jobs} jobs (median of {self.a.queries})"
        self.table.add(line, res[OURS][0], th and th[0], "s", False, res[OURS][1], th and th[1])

    def abort_submitted(self) -> None:
        """Abort the big batches' jobs, so no volunteer spends time on them."""
        for batch, jobs in self.batches:
            if batch == self.fetch_batch or batch in self.aborted:
                continue
            self.aborted.add(batch)
            _, ret = self.ours.call("BOINC_ABORT_JOBS", *jobs)
            if ret != ["NULL"]:
                self.notes.append(f"abort {batch}: {ret}")

    def submit_fetch_batch(self, njobs: int) -> list[str]:
        files = make_files(self.work / f"in-{self.where}-fetch", njobs, 24)
        batch = f"cmpbench#{self.where}#fetch#{int(time.time())}"
        _, ret = self.ours.call("BOINC_SUBMIT", *submit_args(batch, self.app, files, njobs, True))
        if ret != ["NULL"]:
            raise SystemExit(f"{self.where}: fetch batch not submitted: {ret}")
        jobs = [f"{batch}#{i}" for i in range(njobs)]
        self.batches.append((batch, jobs))
        self.fetch_batch = batch
        return jobs

    def wait_done(self, batch: str, njobs: int, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            _, ret = self.ours.call("BOINC_QUERY_BATCHES", "0", "1", batch)
            pairs = ret[3:] if ret and ret[0] == "NULL" else []
            done = [pairs[i] for i in range(0, len(pairs) - 1, 2) if pairs[i + 1] == "DONE"]
            ended = sum(1 for i in range(1, len(pairs), 2) if pairs[i] in ("DONE", "ERROR"))
            if ended >= njobs or time.monotonic() > deadline:
                return done
            time.sleep(2)

    def fetch_line(self, done: list[str], what: str) -> None:
        res = {}
        for name, g in self.gahps.items():
            tag = "ours" if name == OURS else "c"
            arglists = []
            for i in range(self.a.fetches):
                iwd = self.work / f"out-{self.where}-{tag}" / str(i)
                iwd.mkdir(parents=True)
                arglists.append([done[i % len(done)], str(iwd), "stderr.txt", "ALL", "0"])
            elapsed, got, missing = g.burst("BOINC_FETCH_OUTPUT", arglists, timeout=280)
            nfail, why = failures(got, missing)
            empty = sum(
                1
                for args in arglists
                if not (Path(args[1]) / "out").is_file()
                or b"ERROR" in (Path(args[1]) / "out").read_bytes()[:64]
            )
            if nfail or empty:
                self.notes.append(
                    f"{name} fetch: {nfail} failed ({missing} missing), e.g. {why!r}; "
                    f"{empty} without a good output file"
                )
            res[name] = (elapsed, nfail)
        th = res.get(THEIRS)
        self.table.add(
            f"{self.where}: {self.a.fetches} BOINC_FETCH_OUTPUT burst ({what})",
            res[OURS][0],
            th and th[0],
            "s",
            False,
            res[OURS][1],
            th and th[1],
        )

    def retire(self) -> None:
        for batch, _ in self.batches:
            self.ours.call("BOINC_RETIRE_BATCH", batch)

    def stop(self) -> None:
        for g in self.gahps.values():
            g.stop()


class RealBench(Bench):
    """The lines on the real project; HTTP requests counted from Apache's access log.

    Each big batch is aborted as soon as it is submitted (before its query line): jobs left
    unsent fill the project's feeder slots, and once aborted they hold them for minutes,
    delaying every other user's jobs on the one volunteer.
    """

    abort_at_once = True

    def __init__(self, log: AccessLog, *args, **kw) -> None:
        self.log = log
        super().__init__(*args, **kw)

    def counters(self) -> tuple[int, int]:
        time.sleep(0.5)  # Apache writes its log line after the reply
        return self.log.count(), -1


class EmuBench(Bench):
    """The lines on the emulator; requests and uploaded bytes from its counters."""

    def __init__(self, emu: Emulator, *args, **kw) -> None:
        self.emu = emu
        super().__init__(*args, **kw)

    def counters(self) -> tuple[int, int]:
        stats = self.emu.ask("stats")
        return int(stats.get("requests", 0)), int(stats.get("bytes_uploaded", 0))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pings", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=1000, help="jobs submitted (over jobs/2 files)")
    p.add_argument("--file-size", type=int, default=4096)
    p.add_argument("--queries", type=int, default=5)
    p.add_argument("--fetches", type=int, default=100)
    p.add_argument(
        "--real-done-jobs",
        type=int,
        default=2,
        help="real jobs run to fetch from (the volunteer takes 30-60 s each)",
    )
    p.add_argument(
        "--real-wait",
        type=float,
        default=400,
        help="seconds to wait for them (other users' jobs may be queued before; "
        "--small: at most 150); none DONE by then: no real fetch line",
    )
    p.add_argument(
        "--small",
        action="store_true",
        help="CI size: 200 pings, 100 jobs, 10 fetches of 1 real job",
    )
    p.add_argument("--emulator-only", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the work directory (inputs, outputs)")
    p.add_argument("--serve-emulator", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("--job-delay", type=float, default=0.05, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve_emulator:
        serve_emulator(a.serve_emulator, a.job_delay)
        return 0
    if a.small:
        a.pings, a.jobs, a.fetches, a.queries, a.real_done_jobs = 200, 100, 10, 3, 1
        a.real_wait = min(a.real_wait, 150)

    env = read_env()
    c_gahp = env.get("GAHP_BOINC_C_GAHP", "")
    url = env.get("GAHP_BOINC_PROJECT_URL", "")
    why_not = None
    if a.emulator_only:
        why_not = "--emulator-only"
    elif not url:
        why_not = f"no real BOINC server settings ({ENV_FILE})"
    elif (reason := ping_project(url)) is not None:
        why_not = reason
    if not c_gahp or not os.access(c_gahp, os.X_OK):
        why_not = why_not or f"no C GAHP binary ({c_gahp or 'GAHP_BOINC_C_GAHP unset'})"
        c_gahp = ""
    if why_not and os.environ.get(REQUIRE) == "1" and not a.emulator_only:
        print(f"{REQUIRE}=1 but {why_not}", file=sys.stderr)
        return 1
    ours_cmd = [sys.executable, "-m", "gahp_boinc", "--timeout", "120"]
    gahps = {OURS: ours_cmd} | ({THEIRS: [c_gahp]} if c_gahp else {})
    work = Path(tempfile.mkdtemp(prefix="boinc-vs-c-"))
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if why_not:
        print(f"real server lines skipped: {why_not}" + ("" if c_gahp else "; C GAHP missing"))

    real: RealBench | None = None
    try:
        if not why_not:
            marked = url.rstrip("/") + "//"
            log = AccessLog(
                Path(env.get("GAHP_BOINC_ACCESS_LOG", "/var/log/apache2/access.log")),
                urllib.parse.urlsplit(marked).path,
            )
            (work / "real").mkdir()
            real = RealBench(
                log,
                a,
                "real",
                marked,
                env["GAHP_BOINC_AUTH"],
                work / "real",
                gahps,
                env.get("GAHP_BOINC_APP", "worker"),
            )
            real_fetch = real.submit_fetch_batch(a.real_done_jobs)
            real.ping_line()
            real.submit_line(max(1, a.jobs // 2))
            real.query_line(real.submit_line(C_GAHP_MAX_FILES))
            real.abort_submitted()

        (work / "emu").mkdir()
        emulator = Emulator(work / "emu-state", a.job_delay)
        emu = EmuBench(
            emulator, a, "emulator", emulator.url, emulator.auth, work / "emu", gahps, "worker"
        )
        try:
            emu.ping_line()
            emu.submit_line(max(1, a.jobs // 2))
            emu.query_line(emu.submit_line(C_GAHP_MAX_FILES))
            emu.abort_submitted()
            jobs = emu.submit_fetch_batch(a.fetches)
            emulator.ask("resume")
            done = emu.wait_done(emu.fetch_batch, len(jobs), 300)
            emu.fetch_line(done, f"{len(done)} jobs")
            emu.retire()
        finally:
            emu.stop()
            emulator.stop()

        tables = [emu.table]
        notes = emu.notes
        if real is not None:
            done = real.wait_done(real.fetch_batch, len(real_fetch), a.real_wait)
            if done:
                real.fetch_line(done, f"{len(done)} DONE jobs, {a.fetches} fetches")
            else:
                real.notes.append(f"no real job DONE within {a.real_wait:g} s: no fetch line")
            tables.insert(0, real.table)
            notes = real.notes + notes
    finally:
        if real is not None:
            try:
                real.abort_submitted()  # again: a failure may have come before
                real.retire()
            finally:
                real.stop()
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    table = Table()
    for t in tables:
        table.rows += t.rows
        table.ours_failed += t.ours_failed
    table.print()
    for n in notes:
        print("note:", n)
    if table.ours_failed:
        print(f"FAILED: {table.ours_failed} of boinc-gahp's requests failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
