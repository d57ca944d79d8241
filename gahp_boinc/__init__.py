"""gahp_boinc: the BOINC GAHP (``boinc-gahp``), a BOINC client library and a BOINC project
server emulator.

``from gahp_boinc import BoincClient`` (see :mod:`gahp_boinc._client`); the client's names are
imported on first use, so the emulator and the GAHP start without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gahp_core import __version__

if TYPE_CHECKING:
    from gahp_boinc._client import (
        BatchDetail,
        BatchInfo,
        BatchStates,
        BoincClient,
        CompletedJob,
        Job,
        JobCounts,
        JobDetail,
        JobInstance,
        JobParams,
        Project,
        SubmitReport,
        SyncBoincClient,
        Templates,
    )
    from gahp_boinc._errors import BoincError
    from gahp_boinc._outputs import OutputError
    from gahp_boinc._replies import RpcError
    from gahp_boinc._staging import StagingError


__all__ = [
    "BatchDetail",
    "BatchInfo",
    "BatchStates",
    "BoincClient",
    "BoincError",
    "CompletedJob",
    "Job",
    "JobCounts",
    "JobDetail",
    "JobInstance",
    "JobParams",
    "OutputError",
    "Project",
    "RpcError",
    "StagingError",
    "SubmitReport",
    "SyncBoincClient",
    "Templates",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "__version__":
        from gahp_boinc import _client

        return getattr(_client, name)
    raise AttributeError(f"module 'gahp_boinc' has no attribute {name!r}")
