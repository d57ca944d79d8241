"""The reusable conformance suite, run against the docs' example backend as a subprocess."""

import sys
from pathlib import Path

from gahp_core.testing import GahpConformance

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


class TestExampleBackendConformance(GahpConformance):
    server_command = (sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp")
    server_env = {"PYTHONPATH": str(EXAMPLES)}
    async_probe = "ECHO {reqid} ping"
