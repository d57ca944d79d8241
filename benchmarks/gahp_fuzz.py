"""Long protocol fuzzing of boinc-gahp and blahpd (the engine of tests/reliability).

Usage: python benchmarks/gahp_fuzz.py [--cases 20000] [--seed N] [--small]
Prints cases run, return codes, results, peak RSS and problems; exit status 1 on a problem.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reliability"))

from fuzzkit import (  # noqa: E402
    BLAH_COMMANDS,
    BLAH_HEADERS,
    BOINC_COMMANDS,
    BOINC_HEADERS,
    blah_check,
    boinc_check,
    run_fuzz,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=20_000, help="random cases per server")
    p.add_argument("--seed", type=int, default=20261122)
    p.add_argument("--small", action="store_true", help="CI size: 2000 cases per server")
    a = p.parse_args(argv)
    cases = 2000 if a.small else a.cases
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    problems = 0
    with tempfile.TemporaryDirectory(prefix="gahp-fuzz-") as tmp:
        cfg = Path(tmp) / "blah.toml"
        cfg.write_text('drivers = ["fork"]\n')
        runs = [
            (
                "boinc-gahp",
                [sys.executable, "-m", "gahp_boinc", "--retries", "0", "--timeout", "2"],
                BOINC_COMMANDS,
                BOINC_HEADERS,
                boinc_check,
                [f"BOINC_SELECT_PROJECT http://127.0.0.1:{dead}/p/ sekrit\r\n".encode()],
            ),
            (
                "blahpd",
                [
                    sys.executable,
                    "-m",
                    "gahp_blah",
                    "--state-dir",
                    f"{tmp}/state",
                    "--config",
                    str(cfg),
                ],
                BLAH_COMMANDS,
                BLAH_HEADERS,
                blah_check,
                [],
            ),
        ]
        for name, argv_, commands, headers, check, setup in runs:
            t0 = time.monotonic()
            r = run_fuzz(
                argv_, commands, headers, cases=cases, seed=a.seed, setup=setup, check_result=check
            )
            problems += len(r.problems)
            print(
                f"{name}: {r.cases} lines ({r.bytes_sent / 1e6:.1f} MB) in "
                f"{time.monotonic() - t0:.1f} s, returns {dict(r.returns)}, "
                f"{r.results}/{r.accepted_async} results, peak RSS {r.peak_rss_kib} KiB, "
                f"problems {len(r.problems)}"
            )
            for line in r.problems[:20]:
                print("  ", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
