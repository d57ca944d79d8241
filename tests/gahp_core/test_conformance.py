"""The reusable conformance suite, run against the docs' example backend as a subprocess,
and against small servers with one defect each: the kit must fail them."""

import os
import re
import sys
from pathlib import Path

import pytest

from gahp_core.testing import GahpConformance, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


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
        if defect == "blocks":
            time.sleep(0.1)
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
        ping = "" if defect == "probe-not-listed" else " PING"
        out(f"S ASYNC_MODE_OFF ASYNC_MODE_ON COMMANDS{ping} QUIT RESULTS VERSION")
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
        burst_bound_s = 2.0

    return Small


KIT_TESTS = [
    "test_banner",
    "test_commands_lists_required",
    "test_commands_lists_the_probe_and_each_command_checked",
    "test_burst_of_probes_is_answered_at_once",
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
    declared = {"test_declared_result_shapes"}  # needs a gahp_core backend: run below
    assert names - set(KIT_TESTS) == prefix_tests | declared  # no RESPONSE_PREFIX in it


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
        ("probe-not-listed", "test_commands_lists_the_probe_and_each_command_checked", "PING"),
        ("blocks", "test_burst_of_probes_is_answered_at_once", "block the event loop"),
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


# ---- the kit on the docs' example with a plugin author's mistake in it -----------------------

EXAMPLE = (EXAMPLES / "echo_gahp.py").read_text()
BY_MODULE = object()
"""As ``backend=``: the module echo_kit wrote."""
BLOCKING_ECHO = (
    '        return ("NULL", *args)',
    '        time.sleep(0.1)\n        return ("NULL", *args)',
)


def echo_kit(tmp_path: Path, *edits: tuple[str, str], **settings: object) -> GahpConformance:
    """The kit on the docs' example with each ``(old, new)`` edit made, run as a subprocess."""
    text = EXAMPLE
    for old, new in edits:
        assert old in text, f"the example no longer has {old!r}"
        text = text.replace(old, new, 1)
    module = "echo_" + re.sub(r"\W", "_", tmp_path.name)  # one per test: imported once
    (tmp_path / f"{module}.py").write_text(text)

    class Kit(GahpConformance):
        server_command = (sys.executable, "-m", "gahp_core", "--backend", f"module:{module}")
        backend_module = f"module:{module}"
        server_env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
        async_probe = "ECHO {reqid} ping"
        probe_result_fields = 2
        burst_bound_s = 1.0

    for name, value in settings.items():
        setattr(Kit, name, Kit.backend_module if value is BY_MODULE else value)
    return Kit()


class TestExampleBackendInProcess(GahpConformance):
    """The kit with no subprocess: the backend runs in the test's process."""

    backend = "module:echo_gahp"
    async_probe = "ECHO {reqid} ping"
    command_requests = {"WAIT": "WAIT {reqid} 0", "BLOCK": "BLOCK {reqid} 0", "HELLO": "HELLO x"}

    @pytest.fixture(autouse=True)
    def _examples_importable(self, monkeypatch):
        monkeypatch.syspath_prepend(str(EXAMPLES))


def test_the_kit_passes_the_unbroken_example(tmp_path):
    kit = echo_kit(tmp_path)
    kit.test_burst_of_probes_is_answered_at_once()
    kit.test_commands_lists_the_probe_and_each_command_checked()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("@hookimpl\ndef gahp_commands", "def gahp_commands"), "gahp_commands not marked with"),
        (("def gahp_commands(context):", "def gahp_commands(ctx):"), "argument ctx not in the"),
        (
            ("def gahp_commands(context):\n", "def gahp_commands(context):\n    {}['X']\n"),
            "hook gahp_commands raised KeyError: 'X'",
        ),
    ],
    ids=["no-hookimpl", "misnamed-argument", "hook-raises"],
)
def test_the_kit_fails_a_backend_that_cannot_start_with_the_reason(tmp_path, edit, message):
    with pytest.raises(EOFError, match=message) as failure:
        echo_kit(tmp_path, edit).test_banner()
    assert "exit status 2" in str(failure.value)


def test_the_kit_fails_a_blocking_async_handler(tmp_path):
    with pytest.raises(AssertionError, match="block the event loop"):
        echo_kit(tmp_path, BLOCKING_ECHO).test_burst_of_probes_is_answered_at_once()


def test_the_kit_in_process_fails_a_blocking_async_handler(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    kit = echo_kit(
        tmp_path,
        BLOCKING_ECHO,
        server_command=(),
        backend=BY_MODULE,
        backend_args=["--slow-handler", "0.05"],
    )
    with pytest.raises(AssertionError, match="block the event loop") as failure:
        kit.test_burst_of_probes_is_answered_at_once()
    assert "ECHO held the event loop" in "\n".join(failure.value.__notes__)


def test_the_kit_fails_a_probe_that_commands_does_not_list(tmp_path):
    kit = echo_kit(tmp_path, async_probe="ECHO_PING {reqid}")
    with pytest.raises(AssertionError, match=r"COMMANDS does not list \['ECHO_PING'\]"):
        kit.test_commands_lists_the_probe_and_each_command_checked()


def test_the_kit_fails_a_result_of_the_wrong_shape_with_the_servers_stderr(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = ("nargs=1, parse=seconds)", "nargs=1, parse=seconds, result_fields=2)")
    kit = echo_kit(
        tmp_path, declared, backend=BY_MODULE, command_requests={"WAIT": "WAIT {reqid} 0"}
    )
    with pytest.raises(AssertionError, match="result of 1 field.* WAIT declares 2") as failure:
        kit.test_declared_result_shapes()
    assert "WAIT returned 1 field where it declares 2" in "\n".join(failure.value.__notes__)


def test_kit_failures_carry_a_message():
    """Every assert of the kit says what it expected and saw (pytest does not rewrite the
    asserts of an installed module: a bare one fails with no word)."""
    import ast
    import inspect

    import gahp_core.testing

    tree = ast.parse(inspect.getsource(gahp_core.testing))
    bare = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert) and n.msg is None]
    kit = ast.parse(inspect.getsource(GahpConformance))
    assert not [n for n in ast.walk(kit) if isinstance(n, ast.Assert) and n.msg is None], bare
