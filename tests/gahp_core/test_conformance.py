"""The reusable conformance suite, run against the docs' example backend as a subprocess."""

import sys
from pathlib import Path

import pytest

from gahp_core.testing import GahpConformance

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


class TestExampleBackendConformance(GahpConformance):
    server_command = (sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp")
    server_env = {"PYTHONPATH": str(EXAMPLES)}
    async_probe = "ECHO {reqid} ping"


REORDERING_GAHP = r'''
import sys
results = []
print("$GahpVersion: 1.0.0 Jan 1 2026 Reordering\\ GAHP $", flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        print("E", flush=True)
    elif words[0] == "PING" and len(words) == 2 and words[1].isdigit() and words[1] != "0":
        results.append(words[1])
        print("S", flush=True)
    elif words[0] == "RESULTS":
        print(f"S {len(results)}")
        for rid in sorted(results, key=int):  # the defect: sorted, not in queue order
            print(f"{rid} NULL")
        results.clear()
        sys.stdout.flush()
    elif words[0] == "QUIT":
        print("S", flush=True)
        break
    else:
        print("E", flush=True)
'''


def test_the_order_check_catches_a_server_that_sorts_its_results(tmp_path):
    script = tmp_path / "reordering_gahp.py"
    script.write_text(REORDERING_GAHP)

    class Reordering(GahpConformance):
        server_command = (sys.executable, str(script))
        async_probe = "PING {reqid}"
        probe_settle_s = 0.05

    with pytest.raises(AssertionError, match="results in the order"):
        Reordering().test_async_results_in_order()
