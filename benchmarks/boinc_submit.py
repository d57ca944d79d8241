"""BOINC GAHP figures against the project emulator over real HTTP on loopback.

1. BOINC_SUBMIT of one batch of N jobs with N input file references, half of them to a
   small pool of shared files: wall time, RPCs made, files and bytes uploaded; then the
   same MD5 work done by the GAHP's staging code (worker pool) and by a plain hashlib loop.
2. BOINC_QUERY_BATCHES over B batches totalling Q jobs in one request: time and the
   GAHP's peak memory (VmHWM).

Usage: python benchmarks/boinc_submit.py [--jobs 10000] [--file-size 4096] [--query-jobs 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

from gahp_boinc import BoincClient
from gahp_boinc.emulator import EmulatorServer
from gahp_core import GahpClient
from gahp_core.testing import proc_status


def make_files(folder: Path, jobs: int, size: int) -> list[Path]:
    """One path per job: the first half unique files, the second half a pool of shared ones."""
    folder.mkdir(parents=True)
    unique = jobs - jobs // 2
    pool = max(1, min(50, jobs // 2))
    paths = []
    for i in range(unique + pool):
        p = folder / f"f{i}.dat"
        head = f"file {i}\n".encode()
        p.write_bytes(head + os.urandom(max(0, size - len(head))))
        paths.append(p)
    refs = paths[:unique] + [paths[unique + (i % pool)] for i in range(jobs // 2)]
    return refs


def submit_line(batch: str, app: str, refs: list[Path]) -> list[str]:
    args = [batch, app, str(len(refs))]
    for i, path in enumerate(refs):
        args += [f"{batch}#{i}", "0", "1", str(path), "in"]
    return args + ["NULL"] * 6


def md5_figures(paths: list[Path]) -> tuple[float, float, int]:
    """MB/s of the GAHP's staging hashing (worker pool, cold cache) and of a hashlib loop."""
    total = sum(p.stat().st_size for p in paths)
    t0 = time.perf_counter()
    for p in paths:
        hashlib.md5(p.read_bytes(), usedforsecurity=False).hexdigest()
    plain = total / (time.perf_counter() - t0) / 1e6

    async def staged() -> float:
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:

            async def run_in_worker(fn, *args):
                return await loop.run_in_executor(pool, fn, *args)

            async with BoincClient(run_in_worker=run_in_worker) as client:
                t0 = time.perf_counter()
                await client.physical_names(paths)
                return time.perf_counter() - t0

    ours = total / asyncio.run(staged()) / 1e6
    return ours, plain, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--file-size", type=int, default=4096)
    ap.add_argument("--query-jobs", type=int, default=100_000)
    ap.add_argument("--query-batches", type=int, default=10)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="boinc-bench-"))
    refs = make_files(work / "inputs", a.jobs, a.file_size)
    distinct = sorted(set(refs))
    with EmulatorServer(state_dir=work / "project", port=0, paused=True) as srv:
        gahp = GahpClient([sys.executable, "-m", "gahp_boinc", "--timeout", "300"])
        assert gahp.command("BOINC_SELECT_PROJECT", srv.url, srv.authenticator) == ["S"]
        srv.reset_stats()
        t0 = time.perf_counter()
        res = gahp.call("BOINC_SUBMIT", *submit_line("bench", "uppercase", refs), timeout=600)
        wall = time.perf_counter() - t0
        assert res == ["NULL"], res
        stats = dict(srv.stats)
        rpcs = sum(
            v
            for k, v in stats.items()
            if k not in ("requests", "bytes_uploaded") and not k.endswith(".php")
        )
        print(
            f"submit: {a.jobs} jobs, {len(refs)} input references, {len(distinct)} distinct "
            f"files of {a.file_size} B: {wall:.2f} s wall, {stats.get('requests', rpcs)} HTTP "
            f"requests ({', '.join(f'{k} {v}' for k, v in sorted(stats.items()) if k not in ('requests', 'bytes_uploaded'))}), "  # noqa: E501
            f"{stats.get('bytes_uploaded', 0)} bytes uploaded"
        )

        per_batch = max(1, a.query_jobs // a.query_batches)
        names = []
        qrefs = [distinct[0]] * per_batch
        t0 = time.perf_counter()
        for b in range(a.query_batches):
            name = f"q{b}"
            names.append(name)
            res = gahp.call("BOINC_SUBMIT", *submit_line(name, "uppercase", qrefs), timeout=600)
            assert res == ["NULL"], res
        setup = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = gahp.call("BOINC_QUERY_BATCHES", "0", str(len(names)), *names, timeout=600)
        qtime = time.perf_counter() - t0
        assert res[0] == "NULL", res[:2]
        reported = (len(res) - 2 - len(names)) // 2
        print(
            f"query: {len(names)} batches, {reported} jobs in one BOINC_QUERY_BATCHES: "
            f"{qtime:.2f} s (batches submitted in {setup:.1f} s); "
            f"GAHP peak RSS {proc_status(gahp.proc.pid, 'VmHWM') / 1024:.1f} MiB"
        )
        gahp.quit()
    ours, plain, total = md5_figures(distinct)
    print(
        f"md5: {len(distinct)} files, {total / 1e6:.1f} MB: staging (worker pool) "
        f"{ours:.0f} MB/s, plain hashlib loop {plain:.0f} MB/s"
    )


if __name__ == "__main__":
    main()
