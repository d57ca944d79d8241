"""Soak test of boinc-gahp against the BOINC project emulator over real HTTP on loopback.

Submits N jobs across B batches, then for D seconds keeps R requests in flight (pipelined
BOINC_QUERY_BATCHES, BOINC_PING, BOINC_FETCH_OUTPUT, BOINC_SET_LEASE), polling RESULTS.
Records the GAHP's peak RSS and peak thread count (from /proc), results lost (every reqid
must be answered exactly once), duplicate or unknown ids, and error results.

Usage: python benchmarks/boinc_soak.py [--jobs 10000] [--batches 100] [--inflight 1000]
                                       [--duration 180] [--small]
Exit status 1 if a result was lost or duplicated.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from gahp_boinc.emulator import EmulatorServer
from gahp_core import GahpClient
from gahp_core.testing import proc_status


class Sampler(threading.Thread):
    """Samples RSS and thread count of a process every ``period`` seconds."""

    def __init__(self, pid: int, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.peak_rss = self.peak_threads = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.period):
            self.peak_rss = max(self.peak_rss, proc_status(self.pid, "VmRSS"))
            self.peak_threads = max(self.peak_threads, proc_status(self.pid, "Threads"))


class Soak:
    """Issues requests with fresh ids and accounts for every result."""

    def __init__(self, gahp: GahpClient, rng: random.Random) -> None:
        self.gahp, self.rng = gahp, rng
        self.next_id = 0
        self.pending: dict[str, tuple[str, float]] = {}
        self.answered: Counter[str] = Counter()
        self.unknown = 0
        self.errors: Counter[str] = Counter()
        self.sent = 0
        self.results_calls = 0
        self.latencies: list[float] = []

    def issue(self, lines: list[tuple[str, list[str]]]) -> None:
        """Send requests pipelined, then read their return lines."""
        ids = []
        payload = []
        from gahp_core import join

        for cmd, args in lines:
            self.next_id += 1
            rid = str(self.next_id)
            ids.append((rid, cmd))
            payload.append(join([cmd, rid, *args]) + "\r\n")
        self.gahp.send_raw("".join(payload).encode())
        now = time.monotonic()
        for rid, cmd in ids:
            ret = self.gahp.read_line(timeout=60)
            if ret != "S":
                raise SystemExit(f"{cmd} {rid} not accepted: {ret!r}")
            self.pending[rid] = (cmd, now)
            self.sent += 1

    def poll(self) -> int:
        """One RESULTS: account for each line; return how many came."""
        lines = self.gahp.results(timeout=60)
        self.results_calls += 1
        now = time.monotonic()
        seen: set[str] = set()
        for fields in lines:
            rid = fields[0]
            if rid in seen or self.answered[rid]:
                self.answered[rid] += 1
                continue
            seen.add(rid)
            if rid not in self.pending:
                self.unknown += 1
                continue
            cmd, t0 = self.pending.pop(rid)
            self.answered[rid] += 1
            self.latencies.append(now - t0)
            if fields[1] != "NULL":
                self.errors[f"{cmd}: {fields[1][:80]}"] += 1
        return len(lines)


def submit_all(soak: Soak, jobs: int, batches: int, files: list[Path]) -> list[str]:
    per = jobs // batches
    names = []
    reqs = []
    for b in range(batches):
        batch = f"soak#{b}"
        args = [batch, "uppercase", str(per)]
        for j in range(per):
            args += [f"{batch}#{j}", "0", "1", str(files[(b * per + j) % len(files)]), "in"]
        reqs.append(("BOINC_SUBMIT", args + ["NULL"] * 6))
        names.append(batch)
    for i in range(0, len(reqs), 20):
        soak.issue(reqs[i : i + 20])
    while soak.pending:
        soak.poll()
        time.sleep(0.05)
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--inflight", type=int, default=1000)
    p.add_argument("--duration", type=float, default=180.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--small", action="store_true", help="CI size: 1000 jobs, 10 batches, 200 in flight, 15 s"
    )
    a = p.parse_args(argv)
    if a.small:
        a.jobs, a.batches, a.inflight, a.duration = 1000, 10, 200, 15.0
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory(prefix="boinc-soak-") as tmp_s:
        tmp = Path(tmp_s)
        files = []
        for i in range(20):
            f = tmp / f"in{i}.txt"
            f.write_text(f"input {i}\n")
            files.append(f)
        out = tmp / "out"
        out.mkdir()
        srv = EmulatorServer(
            state_dir=tmp / "emu", job_delay=0.0, volunteers=4, inline_apps=True
        ).start()
        gahp = GahpClient([sys.executable, "-m", "gahp_boinc", "--timeout", "60"])
        sampler = Sampler(gahp.proc.pid)
        sampler.start()
        try:
            soak = Soak(gahp, rng)
            assert gahp.command("BOINC_SELECT_PROJECT", srv.url, srv.authenticator) == ["S"]
            t0 = time.monotonic()
            batches = submit_all(soak, a.jobs, a.batches, files)
            submit_s = time.monotonic() - t0
            per = a.jobs // a.batches
            lease = str(int(time.time()) + 6 * 3600)

            def one() -> tuple[str, list[str]]:
                x = rng.random()
                if x < 0.35:
                    return "BOINC_PING", []
                if x < 0.65:
                    names = rng.sample(batches, rng.randint(1, min(5, len(batches))))
                    return "BOINC_QUERY_BATCHES", [rng.choice(["0", "1"]), str(len(names)), *names]
                if x < 0.95:
                    job = f"{rng.choice(batches)}#{rng.randrange(per)}"
                    return "BOINC_FETCH_OUTPUT", [
                        job,
                        str(out),
                        "/dev/null",
                        "ALL",
                        "1",
                        "out",
                        f"{job}.out",
                    ]
                return "BOINC_SET_LEASE", [rng.choice(batches), lease]

            start = time.monotonic()
            while time.monotonic() - start < a.duration:
                room = a.inflight - len(soak.pending)
                if room > 0:
                    soak.issue([one() for _ in range(room)])
                if not soak.poll():
                    time.sleep(0.01)
            deadline = time.monotonic() + 300
            while soak.pending and time.monotonic() < deadline:
                if not soak.poll():
                    time.sleep(0.05)
            soak_s = time.monotonic() - start
            alive = gahp.command("COMMANDS")[0] == "S"
        finally:
            sampler.stop.set()
            sampler.join()
            hwm = proc_status(gahp.proc.pid, "VmHWM")
            gahp.close()
            srv.stop()
    lost = len(soak.pending)
    dups = sum(n - 1 for n in soak.answered.values() if n > 1)
    lat = sorted(soak.latencies) or [0.0]
    print(f"jobs {a.jobs} in {a.batches} batches submitted in {submit_s:.1f} s")
    print(
        f"soak {soak_s:.1f} s: {soak.sent} requests ({soak.sent / soak_s:.0f}/s), "
        f"{a.inflight} in flight, {soak.results_calls} RESULTS"
    )
    print(
        f"results lost {lost}, duplicated {dups}, unknown ids {soak.unknown}, server alive {alive}"
    )
    print(
        f"latency p50 {lat[len(lat) // 2]:.3f} s, p99 {lat[int(len(lat) * 0.99)]:.3f} s, "
        f"max {lat[-1]:.3f} s"
    )
    print(
        f"GAHP peak RSS {max(hwm, sampler.peak_rss) / 1024:.1f} MiB, "
        f"peak threads {sampler.peak_threads}"
    )
    print(f"error results {sum(soak.errors.values())}: {dict(soak.errors.most_common(5))}")
    return 1 if lost or dups or soak.unknown or not alive else 0


if __name__ == "__main__":
    sys.exit(main())
