"""gahp_boinc: the BOINC GAHP (``boinc-gahp``), a BOINC client library and a BOINC project
server emulator (:mod:`gahp_boinc.emulator`).

The library's public names are importable from here (``from gahp_boinc import
BoincClient``); the modules whose names start with an underscore are the implementation
and may change without notice. The client's names are imported on first use, so the
emulator starts without them.

Every exception the library raises derives from :class:`BoincError`. An RPC's failure is
an :class:`RpcError`, and a refusal a caller may act on has its own subclass
(:class:`BadAuthenticator`, :class:`AccessDenied`, :class:`NoSuchApp`,
:class:`NoSuchBatch`, :class:`NoSuchJob`, :class:`NoOutput`), whatever the message.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gahp_boinc._errors import (
    AccessDenied,
    BadAuthenticator,
    BoincError,
    NoOutput,
    NoSuchApp,
    NoSuchBatch,
    NoSuchJob,
    OutputError,
    RpcError,
    StagingError,
    UnsafeOutput,
)
from gahp_core import __version__

if TYPE_CHECKING:
    from gahp_boinc._client import (
        BatchStates,
        BoincClient,
        Job,
        SyncBoincClient,
        check_job,
    )
    from gahp_boinc._inputs import InlineInput, RemoteInput, ServerFile, ServerUrl
    from gahp_boinc._outputs import ArchiveLimits, FetchRequest
    from gahp_boinc._records import (
        BATCH_STATES,
        BatchDetail,
        BatchInfo,
        CompletedJob,
        JobCounts,
        JobDetail,
        JobInput,
        JobInstance,
        JobOptions,
        JobParams,
        Project,
        Templates,
    )
    from gahp_boinc._safe_names import check_output_name, open_inside
    from gahp_boinc._staging import md5_file, physical_name
    from gahp_boinc._submit import BoincJob, SubmitReport, SubmitRequest

_LAZY = {
    "gahp_boinc._client": ("BatchStates", "BoincClient", "Job", "SyncBoincClient", "check_job"),
    "gahp_boinc._inputs": ("InlineInput", "RemoteInput", "ServerFile", "ServerUrl"),
    "gahp_boinc._outputs": ("ArchiveLimits", "FetchRequest"),
    "gahp_boinc._safe_names": ("check_output_name", "open_inside"),
    "gahp_boinc._records": (
        "BATCH_STATES",
        "BatchDetail",
        "BatchInfo",
        "CompletedJob",
        "JobCounts",
        "JobDetail",
        "JobInput",
        "JobInstance",
        "JobOptions",
        "JobParams",
        "Project",
        "Templates",
    ),
    "gahp_boinc._staging": ("md5_file", "physical_name"),
    "gahp_boinc._submit": ("BoincJob", "SubmitReport", "SubmitRequest"),
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "BATCH_STATES",
    "AccessDenied",
    "ArchiveLimits",
    "BadAuthenticator",
    "BatchDetail",
    "BatchInfo",
    "BatchStates",
    "BoincClient",
    "BoincError",
    "BoincJob",
    "CompletedJob",
    "FetchRequest",
    "InlineInput",
    "Job",
    "JobCounts",
    "JobDetail",
    "JobInput",
    "JobInstance",
    "JobOptions",
    "JobParams",
    "NoOutput",
    "NoSuchApp",
    "NoSuchBatch",
    "NoSuchJob",
    "OutputError",
    "Project",
    "RemoteInput",
    "RpcError",
    "ServerFile",
    "ServerUrl",
    "StagingError",
    "SubmitReport",
    "SubmitRequest",
    "SyncBoincClient",
    "Templates",
    "UnsafeOutput",
    "__version__",
    "check_job",
    "check_output_name",
    "open_inside",
    "md5_file",
    "physical_name",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'gahp_boinc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
