"""Core runtime figures through a real subprocess pipe, using the docs' example backend.

1. Throughput: N pipelined no-op asynchronous commands (ECHO), then RESULTS until all N
   results are collected: commands per second, end to end.
2. Latency: with K slow requests in flight (WAIT 30 s), the time from sending a request
   to reading its return line, over M requests: median and p99.

Usage: python benchmarks/core_throughput.py [--n 100000] [--inflight 1000] [--samples 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from gahp_core.testing import GahpClient

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
CMD = [sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp"]


def throughput(n: int) -> float:
    with GahpClient(CMD, env={"PYTHONPATH": str(EXAMPLES)}) as c:
        payload = b"".join(b"ECHO %d\r\n" % i for i in range(1, n + 1))
        start = time.perf_counter()
        c.send_raw(payload)
        for _ in range(n):
            if c.read_line(timeout=60) != "S":
                raise SystemExit("unexpected return line")
        got = 0
        while got < n:
            c.send_raw(b"RESULTS\r\n")
            head = c.read_line(timeout=60)
            k = int(head.split()[1])
            for _ in range(k):
                c.read_line(timeout=60)
            got += k
        elapsed = time.perf_counter() - start
        c.quit()
    return n / elapsed


def latency(inflight: int, samples: int) -> tuple[float, float, float]:
    with GahpClient(CMD, env={"PYTHONPATH": str(EXAMPLES)}) as c:
        c.send_raw(b"".join(b"WAIT %d 30\r\n" % i for i in range(1, inflight + 1)))
        for _ in range(inflight):
            c.read_line(timeout=60)
        times = []
        for i in range(samples):
            t0 = time.perf_counter()
            c.send_raw(b"ECHO %d x\r\n" % (inflight + 1 + i))
            if c.read_line(timeout=10) != "S":
                raise SystemExit("unexpected return line")
            times.append((time.perf_counter() - t0) * 1000)
        c.close()
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return statistics.median(times), p99, times[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--inflight", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=2000)
    a = ap.parse_args()
    rate = throughput(a.n)
    print(f"throughput: {a.n} pipelined async no-op commands + RESULTS: {rate:,.0f} commands/s")
    med, p99, worst = latency(a.inflight, a.samples)
    print(
        f"latency: return line with {a.inflight} requests in flight over {a.samples} requests: "
        f"median {med:.3f} ms, p99 {p99:.3f} ms, max {worst:.3f} ms"
    )


if __name__ == "__main__":
    main()
