"""The Ninf-G dialect in process (no subprocess), and how a backend brings it."""

import subprocess
import sys
from typing import Any

import attrs

from gahp_core import Command, ServerOptions, Version, dialect_of, load_backend, plugin_manager
from gahp_ninfg.dialect import NinfgDialect


@attrs.define
class FakeRuntime:
    """Just what a dialect asks of the runtime."""

    commands: dict[str, Command]
    version: Version = Version("1.0.0", "test")
    options: ServerOptions = ServerOptions()
    in_flight: int = 0
    stopping: bool = False

    def command_names(self) -> list[str]:
        return sorted(self.commands)

    def request_stop(self) -> None:
        self.stopping = True

    def start(self, cmd: Command, parsed: Any, done: Any) -> None:
        raise AssertionError("the Ninf-G dialect runs no asynchronous command")


def dialect_with(*commands: Command) -> tuple[NinfgDialect, FakeRuntime]:
    dialect = NinfgDialect(features=("STAGING_AUTH_NUMBER",))
    builtins = dialect.builtins().gahp_commands(context=None)
    runtime = FakeRuntime({c.name: c for c in [*builtins, *commands]})
    dialect.attach(runtime)
    return dialect, runtime


def test_replies_end_in_crlf_and_notifications_go_to_stderr():
    status = Command("JOB_STATUS", lambda args: ("ACTIVE",), asynchronous=False, nargs=1)
    dialect, _ = dialect_with(status)
    dialect.receive(b"JOB_STATUS 1\r")
    dialect.receive(b"\nNOPE\n")
    assert dialect.data_to_send() == b"S ACTIVE\r\nF unknown request NOPE\r\n"
    dialect.notify(("STATUS_NOTIFY", "1", "DONE"))
    assert dialect.errors_to_send() == b"STATUS_NOTIFY 1 DONE\r\n"
    assert dialect.data_to_send() == b"" and dialect.errors_to_send() == b""


def test_job_create_block_is_one_request_with_its_attributes():
    got = []
    create = Command("JOB_CREATE", lambda args: got.append(args) or (), asynchronous=False, nargs=1)
    dialect, _ = dialect_with(create)
    dialect.receive(b"JOB_CREATE 7\r\nhostname  h1\r\ncount 2\r\nJOB_CREATE_END\r\n")
    assert got == [("7", (("hostname", "h1"), ("count", "2")))]
    assert dialect.data_to_send() == b"S\r\n"


def test_exit_stops_the_rest_and_silences_notifications():
    dialect, runtime = dialect_with()
    dialect.receive(b"QUERY_FEATURES\r\nEXIT\r\nQUERY_FEATURES\r\n")
    assert dialect.data_to_send().split(b"\r\n") == [
        b"SM",
        b"protocol_version 2.0",
        b"feature STAGING_AUTH_NUMBER",
        b"request EXIT",
        b"REPLY_END",
        b"S",
        b"",
    ]
    assert runtime.stopping
    dialect.notify(("CREATE_NOTIFY", "1", "S", "x"))
    assert dialect.errors_to_send() == b""


def test_the_backend_brings_its_dialect_through_the_hook():
    pm = plugin_manager()
    load_backend(pm, "ninfg")
    assert isinstance(dialect_of(pm), NinfgDialect)


def test_the_core_imports_no_dialect_but_gahp():
    code = (
        "import sys, gahp_core, gahp_core._cli, gahp_core.testing, gahp_core._shell;"
        "print(sorted(m for m in sys.modules if 'ninfg' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
