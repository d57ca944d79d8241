"""An emulated BOINC 8.3 project server (remote job submission) for tests and demos.

``EmulatorServer`` serves submit_rpc_handler.php, job_file.php, get_output.php and
get_output2.php with the byte formats of a real project, keeps its state in SQLite and runs
jobs with a simulated volunteer. The import is lazy so that ``python -m
gahp_boinc.emulator.apps`` (run once per job) starts quickly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import EmulatorError

if TYPE_CHECKING:
    from .server import EmulatorServer

__all__ = ["EmulatorError", "EmulatorServer"]


def __getattr__(name: str) -> Any:
    if name == "EmulatorServer":
        from .server import EmulatorServer

        return EmulatorServer
    raise AttributeError(name)
