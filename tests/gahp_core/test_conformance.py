"""The reusable conformance suite, run against the docs' example backend as a subprocess,
and against small servers with one defect each: the kit must fail them."""

import sys
from pathlib import Path

import pytest

from gahp_core.testing import GahpConformance, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


class TestExampleBackendConformance(GahpConformance):
    server_command = (sys.executable, "-m", "gahp_core", "--backend", "module:echo_gahp")
    server_env = {"PYTHONPATH": str(EXAMPLES)}
    async_probe = "ECHO {reqid} ping"
    probe_result_fields = 2  # NULL ping


# A GAHP just good enough for the kit, with the defect named in argv[1] (or none): PING's
# result line is "<id> NULL pong"; results are queued in the order the PINGs arrive.
SMALL_GAHP = r"""
import sys, time
defect = sys.argv[1]
results, r_sent, async_mode = [], False, False
def out(text):
    sys.stdout.write(text + "\r\n")
    sys.stdout.flush()
out("$GahpVersion: 1.0.0 Jan 1 2026 Small\\ GAHP $")
for line in sys.stdin:
    words = line.split()
    code = words[0].upper() if words else ""
    if code == "PING" and len(words) == 2 and words[1].isdigit() and words[1] != "0":
        out("S")
        fields = ["NULL"] if defect == "short-result" and len(results) % 2 else ["NULL", "pong"]
        results.append([words[1], *fields])
        if async_mode and (defect == "r-per-result" or not r_sent):
            out("R")
            r_sent = True
    elif code == "RESULTS" and len(words) == 1:
        if defect == "sorts-ascending":
            results.sort(key=lambda r: int(r[0]))
        elif defect == "sorts-descending":
            results.sort(key=lambda r: int(r[0]), reverse=True)
        out(f"S {len(results)}")
        for r in results:
            out(" ".join(r))
        results, r_sent = [], False
    elif code in ("ASYNC_MODE_ON", "ASYNC_MODE_OFF") and len(words) == 1:
        async_mode = code == "ASYNC_MODE_ON"
        out("S")
    elif code == "COMMANDS":
        out("S ASYNC_MODE_OFF ASYNC_MODE_ON COMMANDS PING QUIT RESULTS VERSION")
    elif code == "VERSION":
        out("S $GahpVersion: 1.0.0 Jan 1 2026 Small\\ GAHP $")
    elif code == "RESPONSE_PREFIX" and len(words) == 2:
        out("S")
    elif code == "QUIT":
        out("S")
        if defect == "lingers-after-quit":
            time.sleep(60)
        sys.exit(3 if defect == "quit-status-3" else 0)
    else:
        out("E")
if defect == "lingers-at-eof":
    time.sleep(60)
sys.exit(3 if defect == "eof-status-3" else 0)
"""


def small_gahp(tmp_path: Path, defect: str) -> type[GahpConformance]:
    script = tmp_path / "small_gahp.py"
    script.write_text(SMALL_GAHP)

    class Small(GahpConformance):
        server_command = (sys.executable, str(script), defect)
        async_probe = "PING {reqid}"
        probe_result_fields = 2
        probe_settle_s = 0.05
        exit_bound_s = 3.0

    return Small


KIT_TESTS = [
    "test_banner",
    "test_commands_lists_required",
    "test_case_insensitive_command_codes",
    "test_errors_keep_the_server_running",
    "test_bad_request_ids",
    "test_probe_result_field_count",
    "test_async_results_in_order",
    "test_async_mode_single_r",
    "test_quit_exits_promptly",
    "test_stdin_eof_exits_promptly",
]


def test_every_kit_test_is_run_here():
    names = {n for n in dir(GahpConformance) if n.startswith("test_")}
    prefix_tests = {"test_response_prefix", "test_prefix_applies_to_r_and_results"}
    assert names - set(KIT_TESTS) == prefix_tests  # the small GAHP has no RESPONSE_PREFIX


@pytest.mark.parametrize("test", KIT_TESTS)
def test_the_small_gahp_without_a_defect_passes(tmp_path, test):
    getattr(small_gahp(tmp_path, "none")(), test)()


@pytest.mark.parametrize(
    ("defect", "test", "message"),
    [
        ("sorts-ascending", "test_async_results_in_order", "results in the order"),
        ("sorts-descending", "test_async_results_in_order", "results in the order"),
        ("short-result", "test_probe_result_field_count", "without 2 field"),
        ("short-result", "test_async_results_in_order", "without 2 field"),
        ("short-result", "test_async_mode_single_r", "without 2 field"),
        ("r-per-result", "test_async_mode_single_r", "not one R before RESULTS"),
        ("lingers-after-quit", "test_quit_exits_promptly", r"still running 3\.\d s after QUIT"),
        ("quit-status-3", "test_quit_exits_promptly", "exit status 3 after QUIT"),
        ("lingers-at-eof", "test_stdin_eof_exits_promptly", r"still running 3\.\d s after the end"),
        ("eof-status-3", "test_stdin_eof_exits_promptly", "exit status 3 at the end"),
    ],
)
def test_the_kit_fails_a_server_with_a_defect(tmp_path, defect, test, message):
    with pytest.raises(AssertionError, match=message):
        getattr(small_gahp(tmp_path, defect)(), test)()


def test_without_a_declared_count_the_probe_results_must_agree(tmp_path):
    kit = small_gahp(tmp_path, "short-result")
    kit.probe_result_fields = None
    with pytest.raises(AssertionError, match="different field counts"):
        kit().test_probe_result_field_count()


def test_wait_for_returns_the_first_truthy_value_and_fails_naming_what():
    calls = iter([0, "", None, "here"])
    assert wait_for(lambda: next(calls), timeout=30, interval=0) == "here"
    with pytest.raises(AssertionError, match=r"the flag: not within 0\.2 s \(last: False\)"):
        wait_for(lambda: False, timeout=0.2, what="the flag", interval=0.01)
