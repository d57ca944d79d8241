"""BOINC_SUBMIT as Condor-B describes it, in a number of RPCs that does not grow with jobs.

get_templates, create_batch, query_files (every distinct physical name once), upload_files
(only the absent ones, in chunks the server accepts), submit_batch (every job at once).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from gahp_boinc._errors import RpcError, StagingError
from gahp_boinc._inputs import INPUT_TYPES, InputSpec, check_no_secret
from gahp_boinc._rpc import BoincRpc, JobInput, JobOptions, JobParams, Project
from gahp_boinc._staging import Md5Cache, check_input, command_line, physical_name
from gahp_boinc._templates import with_replication

log = logging.getLogger("gahp.boinc.submit")

BATCH_INIT_STATE = "0"
HASH_GROUP_BYTES = 32 * 1024 * 1024


@attrs.frozen
class BoincJob:
    """One job of a BOINC_SUBMIT request."""

    name: str
    args: tuple[str, ...]
    inputs: tuple[tuple[str, str] | InputSpec, ...]
    """(local source path, logical name) pairs, staged by content, or inputs of another
    mode (:mod:`gahp_boinc._inputs`)."""
    options: JobOptions = JobOptions()


@attrs.frozen
class SubmitRequest:
    """A parsed BOINC_SUBMIT, with the project it was issued for."""

    project: Project
    batch: str
    app: str
    jobs: tuple[BoincJob, ...]
    params: JobParams = JobParams()


@attrs.define
class SubmitState:
    """What the submissions of one GAHP process share.

    ``unfinished`` maps (project URL, batch name) of submissions that created their batch and
    then failed to whether their files were linked to it already (query_files done): a
    resubmission of such a name fills that batch, if still in its init state, instead of
    creating a second batch of the same name, and does not link a file twice (the server
    fails with HTTP 500 on a second link).
    """

    unfinished: dict[tuple[str, str], bool] = attrs.field(factory=dict)
    _locks: dict[str, asyncio.Lock] = attrs.field(factory=dict)
    _outputs: OrderedDict[tuple[str, str], tuple[str, ...]] = attrs.field(factory=OrderedDict)
    max_outputs: int = 200_000
    """Jobs whose output names are remembered (the oldest are forgotten first)."""

    def remember_outputs(
        self, project_url: str, jobs: Sequence[str], names: tuple[str, ...]
    ) -> None:
        """The output names of jobs just submitted (their application's output template):
        BOINC_FETCH_OUTPUT then need not ask the server for the job's templates."""
        outputs = self._outputs
        for job in jobs:
            outputs[(project_url, job)] = names
        while len(outputs) > self.max_outputs:
            outputs.popitem(last=False)

    def known_outputs(self, project_url: str, job: str) -> tuple[str, ...] | None:
        """The output names remembered for a job submitted by this process, if any."""
        return self._outputs.get((project_url, job))

    def forget_outputs(self, project_url: str, job: str) -> None:
        self._outputs.pop((project_url, job), None)

    def staging_lock(self, project_url: str) -> asyncio.Lock:
        """The lock serialising query_files + upload_files for one project."""
        lock = self._locks.get(project_url)
        if lock is None:
            lock = self._locks[project_url] = asyncio.Lock()
        return lock


@attrs.frozen
class SubmitReport:
    """What a submission did (for logs and benchmarks)."""

    batch_id: int
    distinct_files: int
    uploaded_files: int
    uploaded_bytes: int


async def submit(
    rpc: BoincRpc,
    req: SubmitRequest,
    md5: Md5Cache,
    run_in_worker: Callable[..., Awaitable[Any]],
    lease_seconds: float = 3600.0,
    state: SubmitState | None = None,
) -> SubmitReport:
    """Run the whole submission; raise :class:`RpcError` or :class:`StagingError` on failure.

    ``state`` is shared by the submissions of one process (see :class:`SubmitState`).
    """
    if state is None:
        state = SubmitState()
    project = req.project
    # Check everything local first: a bad request must not leave an empty batch behind.
    command_lines = [command_line(job.args) for job in req.jobs]
    paths = _checked_inputs(req.jobs, project.authenticator)
    templates = await _step("getting templates", rpc.get_templates(project, app_name=req.app))
    _check_input_counts(req, templates.n_inputs)
    phys_of, distinct = await _physical_names(paths, md5, run_in_worker)
    batch_id, linked = await _open_batch(rpc, req, state, lease_seconds)
    to_upload = await _stage(rpc, req, state, batch_id, linked, distinct)
    jobs = [
        JobInput(
            name=job.name,
            command_line=cl,
            inputs=tuple(
                item if isinstance(item, INPUT_TYPES) else phys_of[item[0]] for item in job.inputs
            ),
            options=_with_template(job.options, templates.input_template),
        )
        for job, cl in zip(req.jobs, command_lines, strict=True)
    ]
    await _step("submitting batch", rpc.submit_batch(project, batch_id, req.app, jobs, req.params))
    state.unfinished.pop((project.url, req.batch), None)
    state.remember_outputs(project.url, [job.name for job in jobs], templates.output_names)
    report = SubmitReport(
        batch_id=batch_id,
        distinct_files=len(distinct),
        uploaded_files=len(to_upload),
        uploaded_bytes=sum(p.stat().st_size for _, p in to_upload),
    )
    log.info(
        "submitted batch %s (id %d): %d jobs, %d files, %d uploaded (%d bytes)",
        req.batch,
        batch_id,
        len(req.jobs),
        report.distinct_files,
        report.uploaded_files,
        report.uploaded_bytes,
    )
    return report


def _with_template(options: JobOptions, app_template: str) -> JobOptions:
    """The job's options with its replication values written into its own input template
    (the application's, or the one the job brings)."""
    values = options.replication
    if not values:
        return options
    base = options.input_template or app_template
    if not base:
        raise StagingError("the application's input template is unknown: cannot set replication")
    return attrs.evolve(options, input_template=with_replication(base, values))


def _checked_inputs(jobs: Sequence[BoincJob], authenticator: str) -> dict[str, Path]:
    """Every distinct local input file of the jobs (by source path), each checked readable;
    inputs of other modes are checked to hold no authenticator."""
    paths: dict[str, Path] = {}
    for job in jobs:
        for item in job.inputs:
            if isinstance(item, INPUT_TYPES):
                try:
                    check_no_secret(item, authenticator)
                except ValueError as exc:
                    raise StagingError(f"job {job.name}: {exc}") from None
            elif item[0] not in paths:
                paths[item[0]] = Path(item[0])
    for path in paths.values():
        check_input(path)
    return paths


def _check_input_counts(req: SubmitRequest, n_inputs: int) -> None:
    """Refuse a job whose input files are not as many as its application takes."""
    for job in req.jobs:
        if len(job.inputs) != n_inputs:
            raise StagingError(
                f"job {job.name} has {len(job.inputs)} input files but application "
                f"{req.app} takes {n_inputs}"
            )


async def _physical_names(
    paths: dict[str, Path], md5: Md5Cache, run_in_worker: Callable[..., Awaitable[Any]]
) -> tuple[dict[str, str], dict[str, Path]]:
    """The physical name (from the MD5) of each source path, and a file for each distinct
    physical name (the first source path that has it)."""
    digests = await hash_all(list(paths.values()), md5, run_in_worker)
    phys_of = {src: physical_name(d, src) for src, d in zip(paths, digests, strict=True)}
    distinct: dict[str, Path] = {}
    for src, name in phys_of.items():
        distinct.setdefault(name, paths[src])
    return phys_of, distinct


async def _open_batch(
    rpc: BoincRpc, req: SubmitRequest, state: SubmitState, lease_seconds: float
) -> tuple[int, bool]:
    """The batch to fill, and whether the files are linked to it already: the batch a failed
    submission of the same name left in its init state, else a new one. It is marked
    unfinished in ``state`` until the submission succeeds."""
    project, unfinished = req.project, state.unfinished
    key = (project.url, req.batch)
    batch_id = await _find_init_batch(rpc, project, req.batch) if key in unfinished else None
    linked = batch_id is not None and unfinished[key]
    if batch_id is None:
        batch_id = await _create_batch(rpc, project, req, lease_seconds)
    else:
        log.info("reusing batch %s (id %d) left by a failed submission", req.batch, batch_id)
    unfinished[key] = linked
    return batch_id, linked


async def _stage(
    rpc: BoincRpc,
    req: SubmitRequest,
    state: SubmitState,
    batch_id: int,
    linked: bool,
    distinct: dict[str, Path],
) -> list[tuple[str, Path]]:
    """query_files (linking the files to the batch unless ``linked``), then upload_files of
    the absent ones; the (physical name, file) pairs uploaded."""
    project = req.project
    names = list(distinct)
    link_to = None if linked else batch_id
    # Two submissions sharing a file must not both find it absent and both upload it (the
    # second upload fails with HTTP 500): staging is serialised per project.
    async with state.staging_lock(project.url):
        absent = (
            await _step("querying files", rpc.query_files(project, link_to, names)) if names else []
        )
        state.unfinished[(project.url, req.batch)] = True
        to_upload = [(names[i], distinct[names[i]]) for i in sorted(set(absent))]
        if to_upload:
            await _step("uploading files", rpc.upload_files(project, batch_id, to_upload))
    return to_upload


async def _step(what: str, aw: Awaitable[Any]) -> Any:
    """Await one RPC of a submission; its error says which step failed and keeps its
    class, code and retryability (and the RPC's error as its cause)."""
    try:
        return await aw
    except RpcError as exc:
        raise exc.reworded(f"error {what}: {exc}") from exc


def _hash_groups(paths: Sequence[Path]) -> list[list[Path]]:
    """``paths`` in order, in groups of about ``HASH_GROUP_BYTES`` (a bigger file alone)."""
    groups: list[list[Path]] = [[]]
    size = 0
    for p in paths:
        try:
            n = p.stat().st_size
        except OSError as exc:
            raise StagingError(f"cannot read input file {p}: {exc.strerror}") from None
        if groups[-1] and size + n > HASH_GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(p)
        size += n
    return groups


async def hash_all(
    paths: Sequence[Path], md5: Md5Cache, run_in_worker: Callable[..., Awaitable[Any]]
) -> list[str]:
    """MD5 of every file, off the event loop.

    Files go to the worker pool in groups of about ``HASH_GROUP_BYTES``: many small files
    hash fastest in one thread (hashlib holds the GIL for small buffers), while big files
    spread over the cores.
    """
    groups = _hash_groups(paths)
    limit = asyncio.Semaphore(max(1, os.cpu_count() or 1))

    async def one(group: list[Path]) -> list[str]:
        async with limit:
            return await run_in_worker(md5.digest_many, group)

    try:
        parts = await asyncio.gather(*(one(g) for g in groups if g))
    except OSError as exc:
        raise StagingError(f"cannot read input file: {exc}") from None
    return [d for part in parts for d in part]


async def _create_batch(
    rpc: BoincRpc, project: Project, req: SubmitRequest, lease_seconds: float
) -> int:
    """create_batch, reusing a batch of the same name still in its init state.

    A resubmission after a lost reply then fills the batch it created before instead of
    leaving a second one behind.
    """
    expire = time.time() + lease_seconds
    try:
        return await rpc.create_batch(project, req.batch, req.app, expire)
    except RpcError as exc:
        if not exc.retryable:
            raise exc.reworded(f"error creating batch: {exc}") from exc
        log.warning("create_batch for %s failed (%s): looking for the batch", req.batch, exc)
    found = await _find_init_batch(rpc, project, req.batch)
    if found is not None:
        return found
    try:
        return await rpc.create_batch(project, req.batch, req.app, expire)
    except RpcError as exc:
        raise exc.reworded(f"error creating batch: {exc}") from exc


async def _find_init_batch(rpc: BoincRpc, project: Project, name: str) -> int | None:
    try:
        batches = await rpc.query_batches(project)
    except RpcError as exc:
        raise exc.reworded(f"error creating batch: {exc}") from exc
    for b in batches:
        if (
            str(b.get("name", "")).strip() == name
            and str(b.get("state", "")).strip() == BATCH_INIT_STATE
        ):
            return int(str(b.get("id")).strip())
    return None
