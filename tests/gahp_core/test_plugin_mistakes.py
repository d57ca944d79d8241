"""The mistakes a plugin author makes, each made on the docs' example backend
(docs/examples/echo_gahp.py) and caught by the framework at start or at run time, with a
message that names the backend, the hook or the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gahp_core.testing import GahpClient

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "docs" / "examples" / "echo_gahp.py").read_text()


def variant(tmp_path: Path, *edits: tuple[str, str], name: str = "broken_echo") -> list[str]:
    """The example with each ``(old, new)`` edit made (each must apply): its server command."""
    text = EXAMPLE
    for old, new in edits:
        assert old in text, f"the example no longer has {old!r}"
        text = text.replace(old, new, 1)
    (tmp_path / f"{name}.py").write_text(text)
    return [sys.executable, "-m", "gahp_core", "--backend", f"module:{name}"]


def start(tmp_path: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the server on an input of QUIT alone: how it starts (or refuses to)."""
    return subprocess.run(
        command,
        input="QUIT\r\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )


def refused(tmp_path: Path, *edits: tuple[str, str]) -> str:
    """The one line on stderr of a server that refused to start (status 2, no banner)."""
    done = start(tmp_path, variant(tmp_path, *edits))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "$GahpVersion" not in done.stdout, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_the_example_itself_starts(tmp_path):
    done = start(tmp_path, variant(tmp_path))
    assert done.returncode == 0 and done.stdout.startswith("$GahpVersion"), done


def test_gahp_commands_without_hookimpl_is_refused(tmp_path):
    err = refused(tmp_path, ("@hookimpl\ndef gahp_commands", "def gahp_commands"))
    assert "backend broken_echo" in err and "gahp_commands not marked with" in err, err


def test_a_misnamed_hook_argument_names_the_backend_and_the_hook(tmp_path):
    err = refused(tmp_path, ("def gahp_commands(context):", "def gahp_commands(ctx):"))
    assert "backend broken_echo: hook gahp_commands(ctx): argument ctx" in err, err
    assert "gahp_commands(context)" in err, err


def test_a_backend_with_no_gahp_commands_is_refused(tmp_path):
    err = refused(tmp_path, ("@hookimpl\ndef gahp_commands", "def _gahp_commands"))
    assert "backend broken_echo implements no gahp_commands hook" in err, err


def test_a_backend_returning_no_command_is_refused(tmp_path):
    err = refused(tmp_path, ("    return [\n", "    return []\n    return [\n"))
    assert "backend broken_echo: hook gahp_commands returned no command" in err, err


def test_an_exception_in_a_hook_names_the_backend_the_hook_and_the_line(tmp_path):
    err = refused(
        tmp_path, ("def gahp_commands(context):\n", "def gahp_commands(context):\n    {}['X']\n")
    )
    assert "backend broken_echo: hook gahp_commands raised KeyError: 'X'" in err, err
    assert "broken_echo.py:" in err and "--log FILE for the traceback" in err, err


def test_an_exception_in_gahp_version_names_the_hook(tmp_path):
    err = refused(tmp_path, ('    return Version("1.0.0"', '    return Version(1 / 0, "1.0.0"'))
    assert "backend broken_echo: hook gahp_version raised ZeroDivisionError" in err, err


def test_a_backend_option_clashing_with_a_core_option_is_refused_by_name(tmp_path):
    edit = (
        "@hookimpl\ndef gahp_commands",
        "@hookimpl\ndef gahp_add_options(parser):\n"
        "    parser.add_argument('--log')\n\n\n@hookimpl\ndef gahp_commands",
    )
    err = refused(tmp_path, edit)
    assert "backend broken_echo: hook gahp_add_options: argument --log" in err, err
    assert "prefix the backend's with its name" in err, err


def test_a_blocking_call_in_an_async_handler_is_logged_with_its_name(tmp_path):
    """A deliberately blocking ``async def`` handler (a 1 s sleep against a 0.05 s
    threshold): the warning is asserted, never the time it took."""
    command = variant(
        tmp_path,
        (
            '        return ("NULL", *args)',
            '        time.sleep(1.0)\n        return ("NULL", *args)',
        ),
    )
    with GahpClient([*command, "--slow-handler", "0.05"], env={"PYTHONPATH": str(tmp_path)}) as c:
        assert c.call("ECHO", "x") == ["NULL", "x"]
        assert c.quit() == 0
    err = c.stderr_text
    assert "WARNING ECHO is holding the event loop" in err, err
    assert "broken_echo.py:" in err and "WARNING ECHO held the event loop for" in err, err


def test_a_blocking_sync_handler_is_logged_with_its_name(tmp_path):
    command = variant(
        tmp_path, ('lambda args: ("hello", *args)', 'lambda args: (time.sleep(1.0), "hello")[1:]')
    )
    with GahpClient([*command, "--slow-handler", "0.05"], env={"PYTHONPATH": str(tmp_path)}) as c:
        assert c.command("HELLO") == ["S", "hello"]
        assert c.quit() == 0
    assert "WARNING HELLO is holding the event loop" in c.stderr_text, c.stderr_text


def test_a_result_of_the_wrong_shape_becomes_an_error_result_and_a_logged_error(tmp_path):
    command = variant(
        tmp_path,
        ('Command("ECHO", echo, nargs=(0, None))', 'Command("ECHO", echo, result_fields=2)'),
    )
    with GahpClient(command, env={"PYTHONPATH": str(tmp_path)}) as c:
        assert c.call("ECHO", "one") == ["NULL", "one"]
        bad = c.call("ECHO", "one", "two")
        assert bad == ["internal error: ECHO returned 3 fields where it declares 2 fields"], bad
        assert c.quit() == 0
    assert "ERROR ECHO" in c.stderr_text and "returned 3 fields" in c.stderr_text, c.stderr_text


def test_wrong_argument_counts_name_the_command_and_what_it_takes(tmp_path):
    with GahpClient(variant(tmp_path), env={"PYTHONPATH": str(tmp_path)}) as c:
        assert c.command("HELLO", "a", "b") == [
            "E",
            "wrong number of arguments: HELLO takes 0 to 1 arguments, not 2",
        ]
        assert c.command("WAIT", "1") == [
            "E",
            "wrong number of arguments: WAIT takes a request id and 1 argument, not 0",
        ]


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("error_fields=2", "error_result gives 1 field where it declares 2 fields"),
        ("result_fields=-1", "bad result_fields -1"),
        ("result_fields=('a', '')", "result_fields must be field names"),
    ],
)
def test_a_wrong_shape_declaration_is_refused_at_start(tmp_path, declaration, message):
    err = refused(
        tmp_path,
        ('Command("FAIL", fail, nargs=1)', f'Command("FAIL", fail, nargs=1, {declaration})'),
    )
    assert "FAIL" in err and message in err, err


def test_a_configuration_error_in_a_hook_is_said_as_phrased_naming_the_backend(tmp_path):
    edit = (
        "def gahp_commands(context):\n",
        "def gahp_commands(context):\n"
        "    from gahp_core import ConfigError\n"
        "    raise ConfigError('echo.toml: timeout must be a positive number, not -1')\n",
    )
    err = refused(tmp_path, edit)
    assert err.strip().endswith(
        "cannot start: backend broken_echo: hook gahp_commands:"
        " echo.toml: timeout must be a positive number, not -1"
    ), err
