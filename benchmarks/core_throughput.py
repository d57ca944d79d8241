"""Core runtime figures through a real subprocess pipe, using the docs' example backend.

1. Throughput: N pipelined no-op asynchronous commands (ECHO), then RESULTS until all N
   results are collected: commands per second, end to end. The same client first drives
   a minimal hand-written asyncio GAHP loop (the ceiling: ``readline()``, split, answer
   ``S``, queue the result, answer RESULTS; no escaping, no dispatch, no tasks), so the
   ratio of the two figures is comparable across machines.
2. Latency: with K slow requests in flight (WAIT 30 s), the time from sending a request
   to reading its return line, over M requests: median and p99.

Usage: python benchmarks/core_throughput.py [--n 100000] [--inflight 1000] [--samples 2000]
       [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from gahp_core import GahpClient, parse_results_head

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
CMD = [sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp"]
CEILING_CMD = [sys.executable, __file__, "--ceiling-server"]
ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")]))}
"""The example backend on the path, before the checkout's own (where PYTHONPATH names it)."""


async def ceiling_server() -> None:
    """The ceiling: the least an asyncio GAHP server must do for ECHO and RESULTS."""
    import asyncio

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    transport.write(b"$GahpVersion: 0.0.0 Jan 1 2024 ceiling $\n")
    results: list[str] = []
    while True:
        line = await reader.readline()
        if not line:
            break
        words = line.decode().rstrip("\r\n").split(" ")
        command = words[0].upper()
        if command == "ECHO":
            transport.write(b"S\n")
            results.append(" ".join((words[1], "NULL", *words[2:])) + "\n")
        elif command == "RESULTS":
            transport.write(f"S {len(results)}\n{''.join(results)}".encode())
            results.clear()
        elif command == "QUIT":
            transport.write(b"S\n")
            transport.close()
            return
        else:
            transport.write(b"E\n")


def throughput(n: int, command: list[str] = CMD) -> float:
    """The client takes the lines in bulk and only counts them, so that the figure is the
    server's."""
    with GahpClient(command, env=ENV, stderr=None, reader_thread=False) as c:
        payload = b"".join(b"ECHO %d\r\n" % i for i in range(1, n + 1))
        start = time.perf_counter()
        writer = threading.Thread(target=c.send_raw, args=(payload,))
        writer.start()
        if any(line != "S" for line in c.read_lines(n, timeout=60)):
            raise SystemExit("unexpected return line")
        writer.join()
        got = 0
        while got < n:
            k = parse_results_head(c.command("RESULTS", timeout=60))
            c.read_lines(k, timeout=60)
            got += k
        elapsed = time.perf_counter() - start
        c.quit(10)
    return n / elapsed


def latency(inflight: int, samples: int) -> tuple[float, float, float]:
    with GahpClient(CMD, env=ENV) as c:
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
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds (best is kept)")
    ap.add_argument("--ceiling-server", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ceiling_server:
        import asyncio

        asyncio.run(ceiling_server())
        return
    ceilings, rates = [], []
    for _ in range(max(1, a.rounds)):  # interleaved, so that both see the same conditions
        ceilings.append(throughput(a.n, CEILING_CMD))
        rates.append(throughput(a.n))
    rate, ceiling = max(rates), max(ceilings)
    print(
        f"throughput: {a.n} pipelined async no-op commands + RESULTS: {rate:,.0f} commands/s; "
        f"ceiling (minimal asyncio loop) {ceiling:,.0f} commands/s; ratio {rate / ceiling:.1%} "
        f"(best of {len(rates)} interleaved rounds each; ratios per round: "
        + ", ".join(f"{r / c:.0%}" for r, c in zip(rates, ceilings, strict=True))
        + ")"
    )
    med, p99, worst = latency(a.inflight, a.samples)
    print(
        f"latency: return line with {a.inflight} requests in flight over {a.samples} requests: "
        f"median {med:.3f} ms, p99 {p99:.3f} ms, max {worst:.3f} ms"
    )


if __name__ == "__main__":
    main()
