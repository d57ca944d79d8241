"""The values the BOINC RPCs take and give (attrs records, no I/O)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import attrs

from gahp_boinc._inputs import InputSpec
from gahp_boinc._replies import reply_float, reply_int
from gahp_boinc._requests import el
from gahp_boinc._templates import REPLICATION_FIELDS, check_replication


@attrs.frozen
class Project:
    """A BOINC project URL (ending in ``/``) and the account's authenticator."""

    url: str
    authenticator: str = attrs.field(repr=False)

    def endpoint(self, page: str) -> str:
        return self.url + page


@attrs.frozen
class Templates:
    """What the GAHP needs from an application's templates."""

    n_inputs: int
    output_names: tuple[str, ...]
    input_template: str = ""
    """The application's ``<input_template>`` as XML ("" when the reply had none)."""


@attrs.frozen
class CompletedJob:
    """query_completed_job: the outcome of a job's canonical (or failed) instance."""

    exit_status: int
    elapsed_time: float
    cpu_time: float
    stderr: str
    error_mask: int = 0
    canonical_resultid: int = 0
    error_resultid: int = 0
    """The failed instance reported instead, when the job has no canonical instance."""


@attrs.frozen
class JobDetail:
    """One job of query_batch with get_job_details: what the server says of it, failed jobs
    included (query_completed_job has nothing for those on a stock PHP 8 server)."""

    name: str
    status: str  # queued, in_progress, done, error (lower case, as the server writes them)
    exit_status: int | None = None  # of the failed instance, for an error job
    error: str = ""  # the workunit's error mask in words, e.g. too_many_total_results
    canonical_instance_id: int = 0
    cpu_time: float | None = None
    id: int = 0  # the workunit's database id (for query_job)


@attrs.frozen
class JobInstance:
    """query_job: one instance (result) of a job."""

    name: str
    id: int
    state: str  # BOINC's words, e.g. "In progress", "Completed and validated"
    outfile_sizes: tuple[int, ...] = ()  # of its output files, once it is over


BATCH_STATES = {0: "init", 1: "in_progress", 2: "complete", 3: "aborted", 4: "retired"}
"""BOINC's batch states (``batch.state``) by number."""


@attrs.frozen
class BatchInfo:
    """A batch as query_batches and query_batch describe it."""

    id: int
    name: str
    app_name: str = ""
    state: int = 0
    """0 init, 1 in progress, 2 complete, 3 aborted, 4 retired (see :data:`BATCH_STATES`)."""
    njobs: int = 0
    nerror_jobs: int = 0
    fraction_done: float = 0.0
    create_time: float = 0.0
    expire_time: float = 0.0
    completion_time: float = 0.0
    credit_canonical: float = 0.0
    total_cpu_time: float | None = None
    est_completion_time: float = 0.0
    """The server's estimate of when the batch will be done (0: none)."""
    credit_estimate: float = 0.0

    @property
    def state_name(self) -> str:
        return BATCH_STATES.get(self.state, str(self.state))

    @classmethod
    def from_reply(cls, fields: Any) -> BatchInfo:
        """From the fields of a ``<batch>`` (or of a query_batch reply's top level)."""
        d = fields if isinstance(fields, dict) else {}

        def num(key: str, conv: Any = float, default: Any = 0) -> Any:
            value = d.get(key)
            if value is None or isinstance(value, dict | list) or not str(value).strip():
                return default
            return (reply_int if conv is int else reply_float)(value, f"batch {key}")

        return cls(
            id=num("id", int),
            name=str(d.get("name") or "").strip(),
            app_name=str(d.get("app_name") or "").strip(),
            state=num("state", int),
            njobs=num("njobs", int),
            nerror_jobs=num("nerror_jobs", int),
            fraction_done=num("fraction_done"),
            create_time=num("create_time"),
            expire_time=num("expire_time"),
            completion_time=num("completion_time"),
            credit_canonical=num("credit_canonical"),
            total_cpu_time=num("total_cpu_time", float, None),
            est_completion_time=num("est_completion_time"),
            credit_estimate=num("credit_estimate"),
        )


@attrs.frozen
class BatchDetail:
    """query_batch: a batch and its jobs."""

    batch: BatchInfo
    jobs: tuple[JobDetail, ...]


@attrs.frozen
class JobCounts:
    """server_status.php's job counts: the project's queue and its daemons' backlogs."""

    results_ready_to_send: int = 0
    results_in_progress: int = 0
    results_need_file_delete: int = 0
    wus_need_validate: int = 0
    wus_need_assimilate: int = 0
    wus_need_file_delete: int = 0


def _template(root: str) -> Any:
    def check(_inst: object, attr: attrs.Attribute[Any], value: str | None) -> None:
        if value is None:
            return
        text = value.strip()
        try:
            el = ET.fromstring(text)
        except ET.ParseError as exc:
            raise ValueError(f"{attr.name}: not XML ({exc})") from None
        if el.tag != root:
            raise ValueError(f"{attr.name}: the root element must be <{root}>, not <{el.tag}>")

    return check


@attrs.frozen
class JobOptions:
    """Per-job options of submit_batch (None or 0: the server's default).

    ``min_quorum``, ``target_nresults``, ``max_error_results``, ``max_total_results`` and
    ``max_success_results`` (replication and quorum) travel in a per-job input template:
    :meth:`BoincClient.submit` writes the application's own with them set (or amends
    ``input_template`` when given). ``output_template``: the outputs' limits and gzip.
    ``target_host`` / ``target_user``: the job is sent to that host / user (database ids)
    only."""

    priority: int | None = None
    target_host: int = 0
    target_user: int = 0
    input_template: str | None = attrs.field(default=None, validator=_template("input_template"))
    output_template: str | None = attrs.field(default=None, validator=_template("output_template"))
    min_quorum: int | None = None
    target_nresults: int | None = None
    max_error_results: int | None = None
    max_total_results: int | None = None
    max_success_results: int | None = None

    def __attrs_post_init__(self) -> None:
        check_replication(self.replication)

    @property
    def replication(self) -> dict[str, int | None]:
        """The replication and quorum values set (None: the template's)."""
        return {k: v for k in REPLICATION_FIELDS if (v := getattr(self, k)) is not None}

    def xml(self) -> str:
        parts = []
        if self.target_user:
            parts.append(el("target_user", int(self.target_user)))
        if self.target_host:
            parts.append(el("target_host", int(self.target_host)))
        if self.priority is not None:
            parts.append(el("priority", int(self.priority)))
        for template in (self.input_template, self.output_template):
            if template is not None:
                parts.append(template.strip() + "\n")
        return "".join(parts)


@attrs.frozen
class JobInput:
    """A BOINC job for submit_batch: name, command line, its inputs (the physical names of
    staged files, or inputs of another mode, :mod:`gahp_boinc._inputs`)."""

    name: str
    command_line: str
    inputs: tuple[str | InputSpec, ...]
    options: JobOptions = JobOptions()


@attrs.frozen
class JobParams:
    """Optional job parameters sent with submit_batch (None: server default)."""

    rsc_fpops_est: float | None = None
    rsc_fpops_bound: float | None = None
    rsc_memory_bound: float | None = None
    rsc_disk_bound: float | None = None
    delay_bound: float | None = None
    app_version_num: int | None = None
    priority: int | None = None
    """The batch's jobs' priority (higher first)."""
    allocation_priority: bool = False
    """A priority from the submitter's share of the project instead (BOINC computes it)."""
