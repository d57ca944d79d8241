"""Subprocess fuzzing of boinc-gahp and blahpd with random and adversarial request lines.

Seeded and counted; ``GAHP_FUZZ_CASES`` raises the number of random cases (default 1500 per
server), ``GAHP_FUZZ_SEED`` changes the seed.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from fuzzkit import (
    BLAH_COMMANDS,
    BLAH_HEADERS,
    BOINC_COMMANDS,
    BOINC_HEADERS,
    RawGahp,
    blah_check,
    boinc_check,
    proc_status,
    run_fuzz,
)

CASES = int(os.environ.get("GAHP_FUZZ_CASES", "1500"))
SEED = int(os.environ.get("GAHP_FUZZ_SEED", "20261122"))
RSS_BOUND_KIB = 256 * 1024
MARKER = Path("/tmp/gahp-fuzz-pwned")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fuzz_boinc_gahp(capsys: pytest.CaptureFixture[str]) -> None:
    """No project: every accepted request fails with one message; then with a dead project."""
    MARKER.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "gahp_boinc", "--retries", "0", "--timeout", "2"]
    total = 0
    for setup in (
        [],
        [f"BOINC_SELECT_PROJECT http://127.0.0.1:{closed_port()}/p/ sekrit\r\n".encode()],
    ):
        report = run_fuzz(
            argv,
            BOINC_COMMANDS,
            BOINC_HEADERS,
            cases=CASES // 2,
            seed=SEED,
            setup=setup,
            check_result=boinc_check,
        )
        assert not report.problems, report.problems[:20]
        assert report.cases >= CASES // 2 and report.accepted_async > CASES // 20
        assert report.results == report.accepted_async
        assert 0 < report.peak_rss_kib < RSS_BOUND_KIB, report.peak_rss_kib
        total += report.cases
        with capsys.disabled():
            print(
                f"\nboinc-gahp fuzz: {report.cases} lines ({report.bytes_sent} bytes), "
                f"returns {dict(report.returns)}, {report.results} results, "
                f"peak RSS {report.peak_rss_kib} KiB, problems {len(report.problems)}"
            )
    assert not MARKER.exists()


def test_fuzz_blahpd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    MARKER.unlink(missing_ok=True)
    config = tmp_path / "blah.toml"
    config.write_text('drivers = ["fork"]\n')
    argv = [
        sys.executable,
        "-m",
        "gahp_blah",
        "--state-dir",
        str(tmp_path / "state"),
        "--config",
        str(config),
    ]
    report = run_fuzz(
        argv, BLAH_COMMANDS, BLAH_HEADERS, cases=CASES, seed=SEED, check_result=blah_check
    )
    assert not report.problems, report.problems[:20]
    assert report.results == report.accepted_async > CASES // 20
    assert 0 < report.peak_rss_kib < RSS_BOUND_KIB, report.peak_rss_kib
    assert not MARKER.exists()
    with capsys.disabled():
        print(
            f"\nblahpd fuzz: {report.cases} lines, returns {dict(report.returns)}, "
            f"{report.results} results, peak RSS {report.peak_rss_kib} KiB"
        )


def test_line_over_the_limit_is_refused_and_memory_returns(tmp_path: Path) -> None:
    """A 65 MB line (over the 64 MB limit) gets one E; the server goes on, RSS stays bounded."""
    gahp = RawGahp([sys.executable, "-m", "gahp_boinc"])
    try:
        chunk = b"A" * (1 << 20)
        assert gahp.proc.stdin is not None
        for _ in range(65):
            gahp.send(chunk)
        ret = gahp.request(b"\r\n")
        assert ret == ["E", "request line too long"]
        assert gahp.request(b"COMMANDS\r\n")[0] == "S"
        assert gahp.request(b"BOINC_PING 1\r\n") == ["S"]
        assert proc_status(gahp.proc.pid, "VmHWM") < 2 * RSS_BOUND_KIB
    finally:
        gahp.close()
