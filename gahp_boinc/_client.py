"""``BoincClient``: one object for a BOINC project's remote job submission, like httpx's client.

It owns the HTTP connection pool (keep-alive, retries with backoff, TLS settings), the MD5
cache of input files and the submission state, and offers

- a typed method for each remote-submission RPC (:meth:`BoincClient.ping`,
  :meth:`~BoincClient.create_batch`, :meth:`~BoincClient.query_batch2`, ...), returning
  attrs value objects;
- the operations built on them: :meth:`~BoincClient.submit` (a batch with
  content-addressed input staging, in a number of RPCs that does not grow with the jobs),
  :meth:`~BoincClient.wait`, :meth:`~BoincClient.fetch_output`, :meth:`~BoincClient.abort`,
  :meth:`~BoincClient.lease` and :meth:`~BoincClient.retire`.

A client has a default project (``url`` and ``authenticator``); every method also takes
``project=`` to address another one through the same pool. :class:`SyncBoincClient` is
the same client for code without an event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import attrs

from gahp_boinc._errors import BoincError
from gahp_boinc._inputs import INPUT_TYPES, InputSpec
from gahp_boinc._outputs import FetchRequest, fetch_output
from gahp_boinc._rpc import (
    MAX_DOWNLOAD_BYTES,
    MAX_REPLY_BYTES,
    BatchDetail,
    BatchInfo,
    BoincRpc,
    CompletedJob,
    JobCounts,
    JobInput,
    JobInstance,
    JobOptions,
    JobParams,
    Project,
    Templates,
)
from gahp_boinc._staging import Md5Cache, check_input, command_line, physical_name
from gahp_boinc._submit import (
    BoincJob,
    SubmitReport,
    SubmitRequest,
    SubmitState,
    hash_all,
    submit,
)
from gahp_core import ConfigError, http_url

if TYPE_CHECKING:
    import ssl

    import httpx

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

FINAL_STATES = frozenset({"DONE", "ERROR"})
"""query_batch2 job states after which a job does not change."""


def project(url: str, authenticator: str) -> Project:
    """A :class:`Project` with its URL ending in ``/`` (as the RPC pages are under it)."""
    try:
        url = http_url(url, "project URL")
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return Project(url=url if url.endswith("/") else url + "/", authenticator=authenticator)


def _paths(values: Iterable[str | Path | InputSpec]) -> tuple[Path | InputSpec, ...]:
    return tuple(v if isinstance(v, INPUT_TYPES) else Path(v) for v in values)


def _strings(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


@attrs.frozen
class Job:
    """A job to submit: its (unique) name, command-line arguments, and input files in the
    order of the application's input template: each a local path (staged by content) or
    an :class:`InlineInput`, :class:`RemoteInput`, :class:`ServerFile` or
    :class:`ServerUrl`."""

    name: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    inputs: tuple[Path | InputSpec, ...] = attrs.field(default=(), converter=_paths)
    options: JobOptions = JobOptions()
    """Priority, target host or user, per-job input and output templates."""

    def spec(self) -> BoincJob:
        return BoincJob(
            name=self.name,
            args=self.args,
            inputs=tuple(
                p if isinstance(p, INPUT_TYPES) else (str(p), p.name) for p in self.inputs
            ),
            options=self.options,
        )


@attrs.frozen
class BatchStates:
    """query_batch2: the server's time and, for each batch asked (in order), its jobs'
    ``(name, state)`` pairs; states are UNSENT, IN_PROGRESS, DONE or ERROR."""

    server_time: str
    batches: list[list[tuple[str, str]]]

    def jobs(self) -> dict[str, str]:
        """Every job's state, over all the batches."""
        return {name: state for jobs in self.batches for name, state in jobs}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _default_worker(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class BoincClient:
    """An asynchronous client of BOINC projects' remote job submission.

    Args:
        url: the default project's URL (``https://host/project/``).
        authenticator: the account's authenticator for it (never logged or shown).
        timeout: seconds allowed to an HTTP request, its whole reply included (connecting:
            at most 15; a body arriving at 16 KiB/s or more may take longer).
        verify: TLS verification: True, False (not for production), a CA bundle path
            (file or directory) or an ``ssl.SSLContext``.
        retries: retries of an idempotent RPC after a transport error or HTTP 502/503/504
            (Retry-After is honoured); create_batch, upload_files and submit_batch are sent
            once, :meth:`submit` recovers them safely.
        deadline: seconds within which an RPC and its retries end.
        max_reply_bytes: the largest RPC reply accepted (downloads are streamed to disk).
        max_download_bytes: the largest output download written to disk (a file or an
            archive; default 4 GiB): a bigger one is refused and nothing of it is kept.
        backoff: seconds before the first retry (doubling, with jitter).
        lease_seconds: how long a batch made by :meth:`submit` lives unless leased again.
        run_in_worker: ``await run_in_worker(fn, *args)`` runs blocking work (MD5 of
            inputs) off the event loop; default the loop's default executor.

    Use it as ``async with BoincClient(...) as client:`` or call :meth:`aclose`. Like an
    ``httpx.AsyncClient``, a client serves the event loop it is first used on; methods may
    run concurrently (at most 8 requests at a time share the pooled connections).
    """

    def __init__(
        self,
        url: str | None = None,
        authenticator: str | None = None,
        *,
        timeout: float = 60.0,
        verify: bool | str | ssl.SSLContext = True,
        retries: int = 4,
        deadline: float = 240.0,
        backoff: float = 0.5,
        lease_seconds: float = 3600.0,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        max_download_bytes: int = MAX_DOWNLOAD_BYTES,
        run_in_worker: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        if (url is None) != (authenticator is None):
            raise ValueError("give both the project URL and the authenticator, or neither")
        self.default_project: Project | None = (
            project(url, authenticator) if url is not None and authenticator is not None else None
        )
        self.rpc = BoincRpc(
            deadline=deadline,
            max_tries=1 + max(0, retries),
            backoff=backoff,
            timeout=timeout,
            verify=verify,
            max_reply_bytes=max_reply_bytes,
        )
        if max_download_bytes < 1:
            raise ValueError("max_download_bytes must be positive")
        self.rpc.max_download_bytes = max_download_bytes
        self.lease_seconds = lease_seconds
        self.md5 = Md5Cache()
        self.submit_state = SubmitState()
        self.run_in_worker = run_in_worker or _default_worker

    def __repr__(self) -> str:
        where = self.default_project.url if self.default_project else "no default project"
        return f"<BoincClient {where}>"

    @classmethod
    def sync(
        cls, url: str | None = None, authenticator: str | None = None, **options: Any
    ) -> SyncBoincClient:
        """The same client with blocking methods (:class:`SyncBoincClient`)."""
        return SyncBoincClient(url, authenticator, **options)

    @property
    def http(self) -> httpx.AsyncClient:
        """The pooled httpx client (TLS and proxied projects; plain-HTTP requests use a
        leaner client of their own, see :mod:`gahp_boinc._rpc`)."""
        return self.rpc.client

    @property
    def calls(self) -> dict[str, int]:
        """How many requests of each RPC were made (retries not counted)."""
        return self.rpc.calls

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.rpc.aclose()

    async def __aenter__(self) -> BoincClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _p(self, project: Project | None) -> Project:
        if project is not None:
            return project
        if self.default_project is None:
            raise BoincError("no project: give project= or create the client with a URL")
        return self.default_project

    # ---- the RPCs ---------------------------------------------------------------------------

    async def ping(self, *, project: Project | None = None) -> None:
        """ping: raise :class:`RpcError` unless the project answers."""
        await self.rpc.ping(self._p(project))

    async def get_templates(
        self,
        app_name: str | None = None,
        *,
        job_name: str | None = None,
        project: Project | None = None,
    ) -> Templates:
        """get_templates of an application (or of a job's application): the number of
        inputs and the output names."""
        if (app_name is None) == (job_name is None):
            raise ValueError("give app_name or job_name")
        return await self.rpc.get_templates(self._p(project), app_name=app_name, job_name=job_name)

    async def create_batch(
        self,
        batch_name: str,
        app_name: str,
        expire_time: float,
        *,
        project: Project | None = None,
    ) -> int:
        """create_batch (sent once, not retried): the new batch's id."""
        return await self.rpc.create_batch(self._p(project), batch_name, app_name, expire_time)

    async def query_files(
        self,
        names: Sequence[str],
        batch_id: int | None = None,
        *,
        project: Project | None = None,
    ) -> list[int]:
        """query_files: indices (into ``names``) of the physical files the server lacks;
        with ``batch_id``, the files it has are linked to that batch."""
        return await self.rpc.query_files(self._p(project), batch_id, names)

    async def upload_files(
        self,
        batch_id: int,
        files: Sequence[tuple[str, Path]],
        *,
        project: Project | None = None,
    ) -> None:
        """upload_files of (physical name, local path) pairs, in requests the server takes."""
        await self.rpc.upload_files(self._p(project), batch_id, files)

    async def submit_batch(
        self,
        batch_id: int,
        app_name: str,
        jobs: Sequence[JobInput],
        params: JobParams | None = None,
        *,
        project: Project | None = None,
    ) -> int:
        """submit_batch of jobs whose inputs are already on the server (sent once); the
        batch's id."""
        return await self.rpc.submit_batch(
            self._p(project), batch_id, app_name, jobs, params or JobParams()
        )

    async def query_batches(
        self, *, get_cpu_time: bool = False, project: Project | None = None
    ) -> list[BatchInfo]:
        """query_batches: the account's batches (not the retired ones); with
        ``get_cpu_time``, their ``total_cpu_time`` too."""
        batches = await self.rpc.query_batches(self._p(project), get_cpu_time)
        return [BatchInfo.from_reply(b) for b in batches]

    async def query_batch(
        self,
        batch_name: str | int,
        *,
        get_job_details: bool = True,
        get_cpu_time: bool = False,
        project: Project | None = None,
    ) -> BatchDetail:
        """query_batch: a batch's summary and its jobs (with their status and failure
        details unless ``get_job_details`` is false; the batch's CPU time if asked).

        A batch is named by its name or by its id (an ``int``, as :meth:`submit` and
        :meth:`create_batch` return it): BOINC's batch names need not be unique, and a name
        addresses the oldest batch of that name. So do abort_batch, retire_batch,
        set_expire_time, lease, retire and get_batch_outputs."""
        return await self.rpc.query_batch(
            self._p(project), batch_name, get_job_details, get_cpu_time
        )

    async def query_batch2(
        self,
        batch_names: Sequence[str],
        min_mod_time: str | float = "0",
        *,
        project: Project | None = None,
    ) -> BatchStates:
        """query_batch2: the state of each job of the batches changed after
        ``min_mod_time`` (a server time from an earlier reply; "0": every job)."""
        since = min_mod_time if isinstance(min_mod_time, str) else f"{min_mod_time:f}"
        server_time, batches = await self.rpc.query_batch2(
            self._p(project), list(batch_names), since
        )
        return BatchStates(server_time=server_time, batches=batches)

    async def query_completed_job(
        self, job_name: str, *, project: Project | None = None
    ) -> CompletedJob:
        """query_completed_job: exit status, times and stderr of a finished job."""
        return await self.rpc.query_completed_job(self._p(project), job_name)

    async def abort_jobs(self, job_names: Sequence[str], *, project: Project | None = None) -> None:
        """abort_jobs."""
        await self.rpc.abort_jobs(self._p(project), list(job_names))

    async def estimate_batch(
        self,
        app_name: str,
        jobs: Sequence[Job | JobInput],
        params: JobParams | None = None,
        *,
        project: Project | None = None,
    ) -> float:
        """estimate_batch: BOINC's estimate of the seconds a batch of these jobs would take
        on the project (nothing is submitted)."""
        inputs = [
            JobInput(j.name, command_line(j.args), ()) if isinstance(j, Job) else j for j in jobs
        ]
        return await self.rpc.estimate_batch(
            self._p(project), app_name, inputs, params or JobParams()
        )

    async def get_job_counts(self, *, project: Project | None = None) -> JobCounts:
        """server_status.php's job counts: instances waiting and running on the project."""
        return await self.rpc.get_job_counts(self._p(project))

    async def query_job(
        self, job_id: int, *, project: Project | None = None
    ) -> tuple[JobInstance, ...]:
        """query_job: the instances of a job (by its id, :attr:`JobDetail.id` of
        :meth:`query_batch`): name, id, state in words, output sizes."""
        return await self.rpc.query_job(self._p(project), job_id)

    async def abort_batch(self, batch_name: str | int, *, project: Project | None = None) -> None:
        """abort_batch: cancel every unfinished job of a batch (the batch is aborted)."""
        await self.rpc.abort_batch(self._p(project), batch_name)

    async def retire_batch(self, batch_name: str | int, *, project: Project | None = None) -> None:
        """retire_batch: the server may delete the batch's files."""
        await self.rpc.retire_batch(self._p(project), batch_name)

    async def set_expire_time(
        self, batch_name: str | int, expire_time: float, *, project: Project | None = None
    ) -> None:
        """set_expire_time (a Unix time)."""
        await self.rpc.set_expire_time(self._p(project), batch_name, expire_time)

    async def get_output(
        self,
        job_name: str,
        file_num: int,
        dest: str | Path,
        *,
        result_id: int = 0,
        gunzip: bool = False,
        project: Project | None = None,
    ) -> int:
        """get_output2.php (the authenticator in the login cookie, not in the URL): output
        ``file_num`` of a job's canonical instance into ``dest`` (written in one rename,
        never half); the byte count. ``result_id``: that instance's id when known
        (query_completed_job's ``canonical_resultid``), else it is asked. An output that a
        batch-collect app moved to ``results/<batch>/`` comes from get_output3.php.
        ``gunzip``: a gzipped output (``gzip_when_done``) is decompressed."""
        return await self.rpc.download_output(
            self._p(project), job_name, file_num, Path(dest), result_id, gunzip
        )

    async def get_collected_output(
        self,
        result_id: int,
        index: int,
        dest: str | Path,
        *,
        gunzip: bool = False,
        project: Project | None = None,
    ) -> int:
        """get_output3.php's ``get_file``: output ``index`` of instance ``result_id`` of a
        batch-collect app; the byte count."""
        return await self.rpc.download_collected_output(
            self._p(project), result_id, index, Path(dest), gunzip
        )

    async def get_batch_archive(
        self, batch_id: int, dest: str | Path, *, fmt: str = "zip", project: Project | None = None
    ) -> int:
        """get_output3.php's ``get_batch_zip``/``get_batch_tar`` (``fmt``): every collected
        output of a batch-collect app's batch, streamed to ``dest``; the byte count."""
        return await self.rpc.download_batch_archive(self._p(project), batch_id, Path(dest), fmt)

    async def get_job_outputs(
        self, job_id: int, dest: str | Path, *, project: Project | None = None
    ) -> int:
        """get_output2.php's ``workunit``: the outputs of a job's canonical instance (the
        file when it has one, else a zip under logical names) into ``dest``."""
        return await self.rpc.download_job_outputs(self._p(project), job_id, Path(dest))

    async def get_instance_output(
        self,
        instance_name: str,
        file_num: int,
        dest: str | Path,
        *,
        project: Project | None = None,
    ) -> int:
        """get_output.php's result_file: output ``file_num`` of any instance of a job
        (a name from :meth:`query_job`) into ``dest``; the byte count."""
        return await self.rpc.download_instance_output(
            self._p(project), instance_name, file_num, Path(dest)
        )

    async def get_batch_outputs(
        self, batch_name: str | int, dest: str | Path, *, project: Project | None = None
    ) -> int:
        """get_output.php's batch download: a zip of the outputs of every job of the batch
        that succeeded (members named by the files' physical names) into ``dest``; the
        byte count."""
        p = self._p(project)
        if isinstance(batch_name, int):
            return await self.rpc.download_batch_outputs(p, batch_name, Path(dest))
        info = (await self.rpc.query_batch(p, batch_name, get_job_details=False)).batch
        return await self.rpc.download_batch_outputs(p, info.id, Path(dest))

    # ---- operations -------------------------------------------------------------------------

    async def physical_names(self, paths: Sequence[str | Path]) -> list[str]:
        """The names :meth:`submit` gives these files on the project (MD5 of the content
        plus the extension), each file hashed off the event loop and remembered."""
        files = [Path(p) for p in paths]
        digests = await hash_all(files, self.md5, self.run_in_worker)
        return [physical_name(d, str(f)) for d, f in zip(digests, files, strict=True)]

    async def submit(
        self,
        batch_name: str,
        app_name: str,
        jobs: Sequence[Job | BoincJob],
        params: JobParams | None = None,
        *,
        lease_seconds: float | None = None,
        project: Project | None = None,
    ) -> SubmitReport:
        """Submit jobs as one batch, staging their inputs by content.

        Inputs are named by MD5 (each file hashed once per content, off the event loop);
        only the files the project lacks are uploaded, each once. The RPCs are
        get_templates, create_batch, query_files, upload_files (if any) and submit_batch,
        however many jobs. A batch left by an earlier failed submission of the same name
        is filled instead of a second one being made. Everything local is checked first.
        """
        req = SubmitRequest(
            project=self._p(project),
            batch=batch_name,
            app=app_name,
            jobs=tuple(j.spec() if isinstance(j, Job) else j for j in jobs),
            params=params or JobParams(),
        )
        return await self.submit_request(req, lease_seconds=lease_seconds)

    async def submit_request(
        self, req: SubmitRequest, *, lease_seconds: float | None = None
    ) -> SubmitReport:
        """:meth:`submit` of a prepared request."""
        return await submit(
            self.rpc,
            req,
            self.md5,
            self.run_in_worker,
            self.lease_seconds if lease_seconds is None else lease_seconds,
            self.submit_state,
        )

    async def wait(
        self,
        batch_names: str | Sequence[str],
        *,
        interval: float = 1.0,
        timeout: float | None = None,
        project: Project | None = None,
    ) -> dict[str, str]:
        """Poll query_batch2 until every job of the batches is DONE or ERROR; their states.

        Raises :class:`TimeoutError` after ``timeout`` seconds.
        """
        names = [batch_names] if isinstance(batch_names, str) else list(batch_names)
        end = None if timeout is None else time.monotonic() + timeout
        states: dict[str, str] = {}
        while True:
            states = (await self.query_batch2(names, project=project)).jobs()
            if all(s in FINAL_STATES for s in states.values()):
                return states
            pause = interval
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"jobs of {', '.join(names)} not finished in {timeout:g} s")
                pause = min(pause, left)
            await asyncio.sleep(pause)

    async def fetch_output(
        self,
        job_name: str,
        directory: str | Path,
        *,
        stderr_file: str | Path | None = None,
        files: Mapping[str, str | Path] | None = None,
        project: Project | None = None,
    ) -> CompletedJob:
        """Fetch a finished job's outputs into ``directory``; its outcome.

        Every output file lands under its own name, or only those named in ``files``
        (output name -> destination, relative to ``directory``). The job's stderr goes to
        ``stderr_file`` if given. A zip archive as the only output is unpacked. A failed
        job has no outputs: :class:`RpcError`.
        """
        specs = tuple((name, str(dest)) for name, dest in (files or {}).items())
        req = FetchRequest(
            project=self._p(project),
            job=job_name,
            iwd=str(directory),
            stderr_file=str(stderr_file) if stderr_file is not None else os.devnull,
            mode="SOME" if files is not None else "ALL",
            specs=specs,
        )
        return await self.fetch_request(req)

    async def fetch_request(
        self, req: FetchRequest, output_names: tuple[str, ...] | None = None
    ) -> CompletedJob:
        """:meth:`fetch_output` of a prepared request (BOINC_FETCH_OUTPUT's semantics).

        ``output_names``: the job's output names if known; else those remembered from its
        submission by this client, else asked of the server.
        """
        url = req.project.url
        if output_names is None:
            output_names = self.submit_state.known_outputs(url, req.job)
        done = await fetch_output(self.rpc, req, output_names)
        self.submit_state.forget_outputs(url, req.job)
        return done

    async def abort(
        self, job_names: str | Sequence[str], *, project: Project | None = None
    ) -> None:
        """Abort jobs (by name)."""
        names = [job_names] if isinstance(job_names, str) else list(job_names)
        await self.abort_jobs(names, project=project)

    async def lease(
        self, batch_name: str | int, seconds: float, *, project: Project | None = None
    ) -> float:
        """Keep a batch for ``seconds`` from now (it expires then); the new expiry time."""
        expire = time.time() + seconds
        await self.set_expire_time(batch_name, expire, project=project)
        return expire

    async def retire(self, batch_name: str | int, *, project: Project | None = None) -> None:
        """Retire a batch whose outputs are fetched."""
        await self.retire_batch(batch_name, project=project)


class _Blocking(Generic[P, R]):
    """A :class:`SyncBoincClient` method: the blocking twin of the :class:`BoincClient`
    coroutine method it is made of, with its signature, run by :meth:`SyncBoincClient.run`
    on the client's loop. Written once, in :class:`BoincClient`."""

    def __init__(self, method: Callable[Concatenate[BoincClient, P], Coroutine[Any, Any, R]]):
        name = self._name = method.__name__

        @functools.wraps(method)
        def unbound(sync: SyncBoincClient, *args: P.args, **kwargs: P.kwargs) -> R:
            coro: Coroutine[Any, Any, R] = getattr(sync.client, name)(*args, **kwargs)
            return sync.run(coro)

        unbound.__doc__ = f"Blocking :meth:`BoincClient.{name}`."
        self._unbound = unbound

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self._name:
            raise TypeError(f"{owner.__name__}.{name} is the twin of BoincClient.{self._name}")
        self._unbound.__qualname__ = f"{owner.__qualname__}.{name}"

    @overload
    def __get__(self, sync: None, owner: type) -> Callable[..., R]: ...

    @overload
    def __get__(self, sync: SyncBoincClient, owner: type) -> Callable[P, R]: ...

    def __get__(self, sync: SyncBoincClient | None, owner: type) -> Callable[..., R]:
        if sync is None:
            return self._unbound
        return types.MethodType(self._unbound, sync)


class SyncBoincClient:
    """:class:`BoincClient` with blocking methods, for scripts and threads.

    The asynchronous client runs on an event loop: by default one of its own, in a daemon
    thread; with ``loop=`` an event loop that another thread runs (a server's), so that a
    program keeps one loop. Each method waits for its result (at most ``call_timeout``
    seconds when set: then the call is cancelled and :class:`TimeoutError` raised). Methods
    may be called from any number of threads at once, never from the loop's own thread
    (await the client's methods there). Other arguments are those of
    :class:`BoincClient`. Use it as a context manager or call :meth:`close` (or, on the
    loop's thread, ``await`` :meth:`aclose`); closing cancels the calls still waiting, which
    then raise :class:`BoincError`.
    """

    def __init__(
        self,
        url: str | None = None,
        authenticator: str | None = None,
        *,
        call_timeout: float | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        **options: Any,
    ) -> None:
        self.call_timeout = call_timeout
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._pending_lock = threading.Lock()
        self._closed = False
        # The client binds to its loop on first use (like httpx's), so it is made here.
        self.client = BoincClient(url, authenticator, **options)
        self._thread: threading.Thread | None = None
        if loop is not None:
            self._loop = loop
        else:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="boinc-client-loop", daemon=True
            )
            self._thread.start()

    def __repr__(self) -> str:
        return f"<SyncBoincClient {self.client!r}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the asynchronous client runs on."""
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the client's loop (e.g. one of ``self.client``'s methods)."""
        if _running_loop() is self._loop:
            coro.close()
            raise RuntimeError("SyncBoincClient called from its own event loop: await instead")
        if self._closed or self._loop.is_closed():
            coro.close()
            raise BoincError("the BOINC client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        with self._pending_lock:
            self._pending.add(fut)
        limit = self.call_timeout if timeout is None else timeout
        try:
            return fut.result(limit)
        except concurrent.futures.CancelledError:
            raise BoincError("the call was cancelled: the BOINC client is closing") from None
        except concurrent.futures.TimeoutError:
            if fut.done() and not fut.cancelled():
                # the coroutine's own TimeoutError (e.g. of wait), or it just finished
                return fut.result()
            fut.cancel()
            raise TimeoutError(f"no answer from the BOINC project in {limit:g} s") from None
        finally:
            with self._pending_lock:
                self._pending.discard(fut)

    def _refuse_calls(self) -> None:
        """No new calls from now on; those still waiting are cancelled."""
        self._closed = True
        with self._pending_lock:
            pending = list(self._pending)
        for fut in pending:
            fut.cancel()

    def _stop(self) -> None:
        if self._thread is None:  # not our loop
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def close(self) -> None:
        """Cancel the calls still waiting, close the connections (and stop an own loop)."""
        if self._closed or self._loop.is_closed():
            return
        if _running_loop() is self._loop:
            raise RuntimeError("SyncBoincClient closed from its own event loop: await aclose()")
        self._refuse_calls()
        try:
            fut = asyncio.run_coroutine_threadsafe(self.client.aclose(), self._loop)
            fut.result(10)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        finally:
            self._stop()

    async def aclose(self) -> None:
        """:meth:`close`, from a coroutine on any loop (on the client's own loop too)."""
        if self._closed or self._loop.is_closed():
            return
        if _running_loop() is self._loop:
            self._refuse_calls()
            await self.client.aclose()
        else:
            await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __enter__(self) -> SyncBoincClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def default_project(self) -> Project | None:
        return self.client.default_project

    @property
    def calls(self) -> dict[str, int]:
        return self.client.calls

    # Each method is the blocking twin of the :class:`BoincClient` method of the same name,
    # with its signature, made of it (tests/gahp_boinc/test_boinc_public_api.py checks that
    # every public coroutine method has one).
    ping = _Blocking(BoincClient.ping)
    get_templates = _Blocking(BoincClient.get_templates)
    create_batch = _Blocking(BoincClient.create_batch)
    query_files = _Blocking(BoincClient.query_files)
    upload_files = _Blocking(BoincClient.upload_files)
    submit_batch = _Blocking(BoincClient.submit_batch)
    query_batches = _Blocking(BoincClient.query_batches)
    query_batch = _Blocking(BoincClient.query_batch)
    query_batch2 = _Blocking(BoincClient.query_batch2)
    query_completed_job = _Blocking(BoincClient.query_completed_job)
    abort_jobs = _Blocking(BoincClient.abort_jobs)
    estimate_batch = _Blocking(BoincClient.estimate_batch)
    get_job_counts = _Blocking(BoincClient.get_job_counts)
    query_job = _Blocking(BoincClient.query_job)
    abort_batch = _Blocking(BoincClient.abort_batch)
    retire_batch = _Blocking(BoincClient.retire_batch)
    set_expire_time = _Blocking(BoincClient.set_expire_time)
    get_output = _Blocking(BoincClient.get_output)
    get_collected_output = _Blocking(BoincClient.get_collected_output)
    get_batch_archive = _Blocking(BoincClient.get_batch_archive)
    get_job_outputs = _Blocking(BoincClient.get_job_outputs)
    get_instance_output = _Blocking(BoincClient.get_instance_output)
    get_batch_outputs = _Blocking(BoincClient.get_batch_outputs)
    physical_names = _Blocking(BoincClient.physical_names)
    submit = _Blocking(BoincClient.submit)
    submit_request = _Blocking(BoincClient.submit_request)
    wait = _Blocking(BoincClient.wait)
    fetch_output = _Blocking(BoincClient.fetch_output)
    fetch_request = _Blocking(BoincClient.fetch_request)
    abort = _Blocking(BoincClient.abort)
    lease = _Blocking(BoincClient.lease)
    retire = _Blocking(BoincClient.retire)


def check_job(job: Job | BoincJob) -> None:
    """Raise :class:`StagingError` unless ``job`` can be submitted as far as can be told
    locally: each input a readable regular file, the arguments passable to BOINC's job
    creator. Nothing is sent (:meth:`BoincClient.submit` checks the same first)."""
    spec = job.spec() if isinstance(job, Job) else job
    for item in spec.inputs:
        if not isinstance(item, INPUT_TYPES):
            check_input(Path(item[0]))
    command_line(spec.args)
