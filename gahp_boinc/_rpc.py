"""The BOINC remote job submission RPCs over HTTP, as a real project serves them.

One :class:`BoincRpc` owns the connections (pool, timeouts, TLS verification) and serves
every project: each call names the :class:`Project` it is for. Plain ``http://`` requests
go through the lean client of :mod:`gahp_boinc._http`; TLS, proxies (from the environment)
and large uploads through an ``httpx.AsyncClient``, made when first needed.
Idempotent RPCs are retried with backoff on transport errors and 502/503/504 (honouring
Retry-After) within a deadline; the others are sent once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import attrs

from gahp_boinc._errors import NoOutput, RpcError, rpc_error
from gahp_boinc._http import (
    ERROR_BODY,
    READ_SIZE,
    HttpTimeout,
    HttpTooLarge,
    HttpTransportError,
    PlainHttp,
    Reply,
    Slots,
)
from gahp_boinc._replies import (
    _DECL,
    _NotPlain,
    as_list,
    clean_stderr,
    decode_text,
    parse_query_batch2,
    parse_reply,
    partial_fields,
    query_batch_jobs,
    top_level_error,
)

if TYPE_CHECKING:
    import ssl

    import httpx

    from gahp_boinc._httpx_transport import Streamed

log = logging.getLogger("gahp.boinc.rpc")

USER_AGENT = "gahp-boinc (BOINC Condor adapter)"
MAX_FILES_PER_UPLOAD = 20
"""PHP's default max_file_uploads on the project server."""
MAX_BYTES_PER_UPLOAD = 6 * 1024 * 1024
"""Stay under PHP's default post_max_size (8 MB) with room for the request part."""
MAX_CONNECTIONS = 8
"""Concurrent HTTP requests to one project, over every command in flight.

Each kept-alive connection holds one of an Apache prefork server's children (BOINC's
usual mod_php setup) between requests; a burst that opens more connections than the
server has spare children waits while it forks more (at first one a second)."""
TOTAL_CONNECTIONS = 4 * MAX_CONNECTIONS
"""Concurrent HTTP requests to all projects: a slow project holds only its own
``MAX_CONNECTIONS`` slots, the others keep theirs."""
MAX_REPLY_BYTES = 64 * 1024 * 1024
"""The default limit on the size of an RPC reply (downloads are written to disk as they
arrive and have none)."""
SHARDS = 2
"""httpx connection pools the connections are spread over (see
:class:`gahp_boinc._httpx_transport.ShardedTransport`)."""
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
"""With one of these set, plain-HTTP requests go through httpx, which honours them."""


class _HideAuthStr(logging.Filter):
    """Masks the authenticator in the get_output.php URLs httpx logs (``auth_str=...``)."""

    _pattern = re.compile(r"(auth_str=)[^&\s\"]*")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "auth_str=" in message:
            record.msg, record.args = self._pattern.sub(r"\1***", message), None
        return True


_httpx_log = logging.getLogger("httpx")
if not any(isinstance(f, _HideAuthStr) for f in _httpx_log.filters):
    _httpx_log.addFilter(_HideAuthStr())


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
            return (_int if conv is int else _float)(value, f"batch {key}")

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

    ``input_template`` (an ``<input_template>`` document) is the way to set a job's
    ``min_quorum``, ``target_nresults``, ``max_error_results``, ``max_total_results``,
    ``max_success_results``; ``output_template`` its outputs' limits and gzip. ``target_host``
    / ``target_user``: the job is sent to that host / user (database ids) only."""

    priority: int | None = None
    target_host: int = 0
    target_user: int = 0
    input_template: str | None = attrs.field(default=None, validator=_template("input_template"))
    output_template: str | None = attrs.field(default=None, validator=_template("output_template"))

    def xml(self) -> str:
        parts = []
        if self.target_user:
            parts.append(_el("target_user", int(self.target_user)))
        if self.target_host:
            parts.append(_el("target_host", int(self.target_host)))
        if self.priority is not None:
            parts.append(_el("priority", int(self.priority)))
        for template in (self.input_template, self.output_template):
            if template is not None:
                parts.append(template.strip() + "\n")
        return "".join(parts)


@attrs.frozen
class JobInput:
    """A BOINC job for submit_batch: name, command line, physical names of its inputs."""

    name: str
    command_line: str
    inputs: tuple[str, ...]
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


def _el(tag: str, value: object) -> str:
    return f"<{tag}>{xml_escape(str(value))}</{tag}>\n"


def xml_escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as entities (as ``xml.sax.saxutils.escape``, whose import
    brings urllib.request and the email package)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _request(command: str, project: Project | None, body: str = "") -> str:
    auth = _el("authenticator", project.authenticator) if project is not None else ""
    return f"<{command}>\n{auth}{body}</{command}>\n"


class BoincRpc:
    """Client for a BOINC project's submit_rpc_handler.php, job_file.php and get_output.php."""

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        deadline: float = 240.0,
        max_tries: int = 5,
        backoff: float = 0.5,
        *,
        timeout: float = 60.0,
        verify: bool | str | ssl.SSLContext = True,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        """``client``: an httpx client for every request; without one, plain-HTTP requests
        use the lean client and the others an httpx client made when first needed, with
        ``verify`` (checked here: a bad CA bundle fails at once). Whichever client, a
        request (connecting, sending, reading the whole reply) ends within ``timeout``
        seconds (longer only for a body arriving at 16 KiB/s or more), an RPC's reply may
        hold ``max_reply_bytes`` bytes, an error reply's first 4 KiB are read, and an RPC
        and its retries end within ``deadline`` seconds."""
        self._client = client
        self._timeout = timeout
        self.max_reply_bytes = max_reply_bytes
        self._verify = tls_verify(verify)
        self.plain: PlainHttp | None = None
        if client is None and not any(os.environ.get(v) for v in PROXY_VARIABLES):
            self.plain = PlainHttp(timeout, min(timeout, 15.0), USER_AGENT)
        self.deadline = deadline
        self.max_tries = max_tries
        self.backoff = backoff
        self.calls: dict[str, int] = {}
        # Requests beyond the pool's connections wait here, not in httpcore's pool: its
        # queue costs O(queued x connections) per assignment, which with a thousand GAHP
        # requests in flight ate half the CPU (and its pool timeout would count the wait).
        self._slots = Slots(MAX_CONNECTIONS, TOTAL_CONNECTIONS)

    @staticmethod
    def make_client(
        timeout: float = 60.0, verify: bool | str | ssl.SSLContext = True
    ) -> httpx.AsyncClient:
        """An httpx client as this class makes its own (pooled connections, timeouts, no
        redirects for POSTs); ``verify``: True (the usual CAs), False (no check), a CA
        bundle file or directory, or an ``ssl.SSLContext``."""
        from gahp_boinc._httpx_transport import make_client

        return make_client(timeout, verify)

    @property
    def client(self) -> httpx.AsyncClient:
        """The httpx client (made on first use when none was given)."""
        if self._client is None:
            self._client = self.make_client(self._timeout, self._verify)
        return self._client

    def _plain_for(self, url: str) -> PlainHttp | None:
        """The lean client, when it may serve ``url``."""
        if self.plain is not None and url.startswith("http://") and _plain_url(url):
            return self.plain
        return None

    async def aclose(self) -> None:
        """Close every pooled connection."""
        if self.plain is not None:
            await self.plain.aclose()
        if self._client is not None:
            await self._client.aclose()

    # ---- transport --------------------------------------------------------------------------

    async def _post(
        self,
        project: Project,
        page: str,
        command: str,
        xml: str,
        files: Sequence[tuple[str, Path]] = (),
        idempotent: bool = True,
        method: str = "POST",
    ) -> bytes:
        """POST a request (or GET ``page``), return the body of a 200 reply; retry what is
        safe to retry."""
        url = project.endpoint(page)
        self.calls[command] = self.calls.get(command, 0) + 1
        plain = self._plain_for(url)
        if files and plain is not None and _total_size(files) > MAX_BYTES_PER_UPLOAD:
            plain = None  # streamed from the files by httpx, never held in memory
        start = time.monotonic()
        end = asyncio.get_running_loop().time() + self.deadline
        attempt = 0
        while True:
            attempt += 1
            resp: Reply | Streamed
            try:
                async with asyncio.timeout_at(end):
                    if plain is not None:
                        resp = await self._send_plain(plain, url, command, xml, files, method)
                    else:
                        resp = await self._send_httpx(url, command, xml, files, method)
            except TimeoutError:
                raise RpcError(
                    f"{command}: no reply from {url} within the deadline ({self.deadline:g} s)"
                ) from None
            except HttpTimeout as exc:
                err = RpcError(
                    f"{command}: no reply from {url} in time ({exc.kind})", retryable=True
                )
            except HttpTooLarge as exc:
                raise RpcError(f"{command}: reply from {url} too large ({exc})") from None
            except HttpTransportError as exc:
                err = RpcError(f"{command}: cannot reach {url}: {exc}", retryable=exc.retryable)
            except OSError as exc:
                raise RpcError(f"{command}: cannot read input file: {exc}") from None
            else:
                status_err = self._check_status(resp, command, url)
                if status_err is None:
                    return resp.content
                err = status_err
            delay = self._retry_delay(err, attempt, start) if idempotent else None
            if delay is None:
                raise err
            log.info("%s failed (%s); retry %d in %.1f s", command, err, attempt, delay)
            await asyncio.sleep(delay)

    async def _send_plain(
        self,
        plain: PlainHttp,
        url: str,
        command: str,
        xml: str,
        files: Sequence[tuple[str, Path]],
        method: str,
    ) -> Reply:
        """One request through the lean client (the files read into the body)."""
        content, ctype = _form_request(xml, files)
        limit = self.max_reply_bytes
        async with self._slots.hold(url):
            sent = time.monotonic()
            if method == "GET":
                resp = await plain.request("GET", url, limit=limit)
            else:
                resp = await plain.request("POST", url, content, ctype, limit=limit)
        _log_reply(command, resp, sent)
        return resp

    async def _send_httpx(
        self,
        url: str,
        command: str,
        xml: str,
        files: Sequence[tuple[str, Path]],
        method: str,
    ) -> Streamed:
        """One request through httpx (the files streamed from open handles)."""
        from gahp_boinc._httpx_transport import send

        handles = []
        try:
            if files:
                parts: list[tuple[str, Any]] = [("request", (None, xml.encode("utf-8")))]
                for i, (_, path) in enumerate(files):
                    fh = open(path, "rb")  # noqa: SIM115 - closed in finally
                    handles.append(fh)
                    parts.append((f"file_{i}", (path.name, fh, "application/octet-stream")))
                kwargs: dict[str, Any] = {"files": parts}
            else:
                content, ctype = _form_request(xml)
                kwargs = {"content": content, "headers": {"Content-Type": ctype}}
            timeout, limit = self._timeout, self.max_reply_bytes
            async with self._slots.hold(url):
                sent = time.monotonic()
                if method == "GET":
                    resp = await send(self.client, "GET", url, timeout, limit)
                else:
                    resp = await send(self.client, "POST", url, timeout, limit, **kwargs)
        finally:
            for fh in handles:
                fh.close()
        _log_reply(command, resp, sent)
        return resp

    def _retry_delay(self, err: RpcError, attempt: int, start: float) -> float | None:
        """How long to wait before trying again after ``err`` (backoff with jitter, at least
        its Retry-After); None when it is not retryable or the tries or deadline are spent."""
        delay = self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random())
        retry_after = getattr(err, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, retry_after)
        elapsed = time.monotonic() - start
        if not err.retryable or attempt >= self.max_tries or elapsed + delay > self.deadline:
            return None
        return delay

    @staticmethod
    def _check_status(resp: Reply | Streamed, command: str, url: str) -> RpcError | None:
        status = resp.status_code
        if status == 200:
            return None
        if 300 <= status < 400:
            where = resp.headers.get("location", "?")
            return RpcError(f"{command}: {url} redirects to {where}; use that project URL")
        body = resp.content
        err = top_level_error(body, command)
        if err is not None:
            return err.reworded(f"{command}: HTTP {status}: {err}")
        snippet = decode_text(body[:160]).strip().replace("\n", " ")
        retryable = status in (502, 503, 504)
        err = RpcError(
            f"{command}: HTTP {status} {resp.reason_phrase} from {url}"
            + (f": {snippet}" if snippet and status != 500 else ""),
            retryable=retryable,
        )
        if status == 503 and (ra := resp.headers.get("retry-after", "")).strip().isdigit():
            err.retry_after = float(ra)  # type: ignore[attr-defined]
        err.status = status  # type: ignore[attr-defined]
        err.body = body  # type: ignore[attr-defined]
        return err

    # ---- RPCs -------------------------------------------------------------------------------

    async def ping(self, project: Project) -> None:
        body = await self._post(project, "submit_rpc_handler.php", "ping", _request("ping", None))
        reply = parse_reply(body, "ping")
        if not reply.get("success"):
            raise RpcError("ping: server did not answer success")

    async def get_templates(
        self, project: Project, app_name: str | None = None, job_name: str | None = None
    ) -> Templates:
        inner = _el("app_name", app_name) if app_name is not None else _el("job_name", job_name)
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "get_templates",
            _request("get_templates", project, inner),
        )
        reply = parse_reply(body, "get_templates")
        templates = reply.get("templates") or {}
        inputs = (templates.get("input_template") or {}) if isinstance(templates, dict) else {}
        outputs = (templates.get("output_template") or {}) if isinstance(templates, dict) else {}
        n_inputs = len(as_list(inputs.get("file_info"))) if isinstance(inputs, dict) else 0
        names: list[str] = []
        if isinstance(outputs, dict):
            result = outputs.get("result") or {}
            for ref in as_list(result.get("file_ref") if isinstance(result, dict) else None):
                if isinstance(ref, dict) and ref.get("open_name"):
                    names.append(str(ref["open_name"]).strip())
        return Templates(n_inputs=n_inputs, output_names=tuple(names))

    async def create_batch(
        self, project: Project, batch_name: str, app_name: str, expire_time: float
    ) -> int:
        inner = (
            _el("batch_name", batch_name)
            + _el("app_name", app_name)
            + _el("expire_time", f"{expire_time:f}")
        )
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "create_batch",
            _request("create_batch", project, inner),
            idempotent=False,
        )
        return _int(parse_reply(body, "create_batch").get("batch_id"), "create_batch batch_id")

    async def query_batches(
        self, project: Project, get_cpu_time: bool = False
    ) -> list[dict[str, Any]]:
        inner = _el("get_cpu_time", 1) if get_cpu_time else ""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_batches",
            _request("query_batches", project, inner),
        )
        return [b for b in as_list(parse_reply(body, "query_batches").get("batch")) if b]

    async def query_files(
        self, project: Project, batch_id: int | None, names: Sequence[str]
    ) -> list[int]:
        """Indices (into ``names``) of the files the server does not have.

        With a ``batch_id`` the server links the files it has to that batch.
        """
        inner = (_el("batch_id", batch_id) if batch_id is not None else "") + "".join(
            _el("phys_name", n) for n in names
        )
        body = await self._post(
            project, "job_file.php", "query_files", _request("query_files", project, inner)
        )
        absent = parse_reply(body, "query_files").get("absent_files") or {}
        idx = [_int(i, "query_files index") for i in as_list(absent.get("file"))]
        if any(i < 0 or i >= len(names) for i in idx):
            raise RpcError("query_files: server named a file index out of range")
        return idx

    async def upload_files(
        self, project: Project, batch_id: int, files: Sequence[tuple[str, Path]]
    ) -> None:
        """Upload (physical name, local path) pairs, at most 20 files and ~6 MB a request."""
        for chunk in _upload_chunks(files):
            inner = _el("batch_id", batch_id) + "".join(_el("phys_name", n) for n, _ in chunk)
            body = await self._post(
                project,
                "job_file.php",
                "upload_files",
                _request("upload_files", project, inner),
                files=chunk,
                idempotent=False,
            )
            parse_reply(body, "upload_files")

    async def submit_batch(
        self,
        project: Project,
        batch_id: int,
        app_name: str,
        jobs: Sequence[JobInput],
        params: JobParams = JobParams(),
    ) -> None:
        job_params = "".join(
            _el(k, f"{v:f}")
            for k, v in (
                ("rsc_fpops_est", params.rsc_fpops_est),
                ("rsc_fpops_bound", params.rsc_fpops_bound),
                ("rsc_memory_bound", params.rsc_memory_bound),
                ("rsc_disk_bound", params.rsc_disk_bound),
                ("delay_bound", params.delay_bound),
            )
            if v is not None
        )
        parts = [
            "<batch>\n",
            _el("batch_id", batch_id),
            _el("app_name", app_name),
            _el("app_version_num", params.app_version_num or 0),
            f"<job_params>\n{job_params}</job_params>\n",
        ]
        if params.allocation_priority:
            parts.append("<allocation_priority>1</allocation_priority>\n")
        elif params.priority is not None:
            parts.append(_el("priority", int(params.priority)))
        for job in jobs:
            parts.append("<job>\n" + _el("name", job.name) + _el("command_line", job.command_line))
            parts.append(job.options.xml())
            parts.extend(
                f"<input_file>\n<mode>local_staged</mode>\n{_el('source', src)}</input_file>\n"
                for src in job.inputs
            )
            parts.append("</job>\n")
        parts.append("</batch>\n")
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "submit_batch",
            _request("submit_batch", project, "".join(parts)),
            idempotent=False,
        )
        parse_reply(body, "submit_batch")

    async def query_batch2(
        self, project: Project, batch_names: Sequence[str], min_mod_time: str
    ) -> tuple[str, list[list[tuple[str, str]]]]:
        inner = _el("min_mod_time", min_mod_time) + "".join(
            _el("batch_name", b) for b in batch_names
        )
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_batch2",
            _request("query_batch2", project, inner),
        )
        parsed = _plain_query_batch2(body)
        server_time, batches = parsed if parsed is not None else parse_query_batch2(body)
        if len(batches) != len(batch_names):
            raise RpcError(
                f"query_batch2: {len(batches)} batches in reply for {len(batch_names)} asked"
            )
        return server_time, batches

    async def query_batch_details(self, project: Project, batch_name: str) -> list[JobDetail]:
        """query_batch with get_job_details: every job of a batch with its status and, for a
        failed job, the failed instance's exit status and the workunit's error."""
        return list((await self.query_batch(project, batch_name)).jobs)

    async def query_batch(
        self,
        project: Project,
        batch_name: str,
        get_job_details: bool = True,
        get_cpu_time: bool = False,
    ) -> BatchDetail:
        """query_batch: the batch's summary and its jobs (with their status and failure
        details when ``get_job_details``; the batch's CPU time when ``get_cpu_time``)."""
        inner = (
            _el("batch_name", batch_name)
            + (_el("get_cpu_time", 1) if get_cpu_time else "")
            + (_el("get_job_details", 1) if get_job_details else "")
        )
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_batch",
            _request("query_batch", project, inner),
        )
        reply = parse_reply(body, "query_batch")
        jobs = tuple(
            JobDetail(
                name=j["name"],
                status=j["status"],
                exit_status=_int(j["exit_status"], "exit_status") if j["exit_status"] else None,
                error=j["error"],
                canonical_instance_id=_int(j["canonical_instance_id"] or 0, "canonical id"),
                cpu_time=_float(j["cpu_time"], "cpu_time") if j["cpu_time"] else None,
                id=_int(j["id"] or 0, "job id"),
            )
            for j in query_batch_jobs(reply, with_id=True)
        )
        return BatchDetail(batch=BatchInfo.from_reply(reply), jobs=jobs)

    async def query_completed_job(self, project: Project, job_name: str) -> CompletedJob:
        """The outcome of a finished job; a clear RpcError when the server has none."""
        try:
            body = await self._post(
                project,
                "submit_rpc_handler.php",
                "query_completed_job",
                _request("query_completed_job", project, _el("job_name", job_name)),
            )
        except RpcError as exc:
            partial = getattr(exc, "body", b"")
            if getattr(exc, "status", None) == 500 and b"<error_mask>" in partial:
                mask = partial_fields(partial).get("error_mask", "?")
                raise NoOutput(
                    f"job {job_name} has no completed instance (error_mask {mask}; "
                    f"{_error_mask_text(mask)}): no output to fetch"
                ) from None
            raise
        reply = parse_reply(body, "query_completed_job")
        cj = reply.get("completed_job")
        if not isinstance(cj, dict):
            raise RpcError(f"query_completed_job: no completed_job for {job_name} in reply")
        return CompletedJob(
            exit_status=_int(cj.get("exit_status", 0), "exit_status"),
            elapsed_time=_float(cj.get("elapsed_time", 0), "elapsed_time"),
            cpu_time=_float(cj.get("cpu_time", 0), "cpu_time"),
            stderr=clean_stderr(cj.get("stderr_out")),
            error_mask=_int(cj.get("error_mask", 0), "error_mask"),
            canonical_resultid=_int(cj.get("canonical_resultid", 0), "canonical_resultid"),
            error_resultid=_int(cj.get("error_resultid", 0), "error_resultid"),
        )

    async def abort_jobs(self, project: Project, job_names: Sequence[str]) -> None:
        inner = "".join(_el("job_name", j) for j in job_names)
        body = await self._post(
            project, "submit_rpc_handler.php", "abort_jobs", _request("abort_jobs", project, inner)
        )
        parse_reply(body, "abort_jobs")

    async def estimate_batch(
        self,
        project: Project,
        app_name: str,
        jobs: Sequence[JobInput],
        params: JobParams = JobParams(),
    ) -> float:
        """estimate_batch: BOINC's estimate of the seconds a batch would take (its FLOPs,
        ``params.rsc_fpops_est`` per job or the template's, over the project's FLOPS)."""
        fpops = (
            _el("rsc_fpops_est", f"{params.rsc_fpops_est:f}")
            if params.rsc_fpops_est is not None
            else ""
        )
        parts = ["<batch>\n", _el("app_name", app_name)]
        for job in jobs:
            parts.append(
                "<job>\n" + _el("name", job.name) + fpops + _el("command_line", job.command_line)
            )
            parts.append("</job>\n")
        parts.append("</batch>\n")
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "estimate_batch",
            _request("estimate_batch", project, "".join(parts)),
        )
        return _float(parse_reply(body, "estimate_batch").get("seconds"), "estimate seconds")

    async def get_job_counts(self, project: Project) -> JobCounts:
        """server_status.php?counts=1 (no authenticator needed)."""
        body = await self._post(
            project, "server_status.php?counts=1", "job_counts", "", method="GET"
        )
        reply = parse_reply(body, "job_counts")
        fields = attrs.fields_dict(JobCounts)
        return JobCounts(
            **{k: _int(v, k) for k, v in reply.items() if k in fields and v is not None}
        )

    async def query_job(self, project: Project, job_id: int) -> tuple[JobInstance, ...]:
        """query_job: the instances of a job, by the job's id (:attr:`JobDetail.id`)."""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_job",
            _request("query_job", project, _el("job_id", job_id)),
        )
        reply = parse_reply(body, "query_job")
        instances = []
        for inst in as_list(reply.get("instance")):
            inst = inst if isinstance(inst, dict) else {}
            sizes = tuple(
                _int(f.get("size") if isinstance(f, dict) else None, "output size")
                for f in as_list(inst.get("outfile"))
            )
            instances.append(
                JobInstance(
                    name=str(inst.get("name") or "").strip(),
                    id=_int(inst.get("id") or 0, "instance id"),
                    state=str(inst.get("state") or "").strip(),
                    outfile_sizes=sizes,
                )
            )
        return tuple(instances)

    async def abort_batch(self, project: Project, batch_name: str) -> None:
        """abort_batch: cancel every unfinished job of the batch."""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "abort_batch",
            _request("abort_batch", project, _el("batch_name", batch_name)),
        )
        parse_reply(body, "abort_batch")

    async def retire_batch(self, project: Project, batch_name: str) -> None:
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "retire_batch",
            _request("retire_batch", project, _el("batch_name", batch_name)),
        )
        parse_reply(body, "retire_batch")

    async def set_expire_time(self, project: Project, batch_name: str, expire: float) -> None:
        inner = _el("batch_name", batch_name) + _el("expire_time", f"{expire:f}")
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "set_expire_time",
            _request("set_expire_time", project, inner),
        )
        parse_reply(body, "set_expire_time")

    async def download_output(
        self,
        project: Project,
        job_name: str,
        file_num: int,
        dest: Path,
        result_id: int = 0,
        gunzip: bool = False,
    ) -> int:
        """Download output ``file_num`` of a job's canonical instance into ``dest``.

        The file comes from get_output2.php (``cmd=file``) with the authenticator in the
        ``auth`` cookie, as a logged-in user: get_output.php's ``workunit_file`` would put
        it in the URL, and so in the project's access log. ``result_id`` is the canonical
        instance's id (query_completed_job's ``canonical_resultid``); asked when 0.
        An output a batch-collect app's assimilator moved is fetched from get_output3.php
        instead. ``gunzip``: a gzipped output (``gzip_when_done``) is decompressed.
        Written to a temporary name beside ``dest`` and renamed, so an error body or an
        interrupted transfer never replaces a file. Returns the byte count.
        """
        if result_id <= 0:
            done = await self.query_completed_job(project, job_name)
            result_id = done.canonical_resultid
            if result_id <= 0:
                raise rpc_error(
                    f"get_output failed for {job_name} file {file_num}: "
                    f"no canonical result for wu {job_name}",
                    f"no canonical result for wu {job_name}",
                )
        url = f"{project.url}get_output2.php?cmd=file&result_id={result_id}&file_num={file_num}"
        shown = f"{project.url}get_output2.php (job {job_name}, file {file_num})"
        what = f"{job_name} file {file_num}"
        size, announced = await self._fetch(url, shown, what, dest, auth_cookie(project))
        if size or "__" not in announced:
            if gunzip and _is_gzip(dest):
                size = gunzip_in_place(dest, what)
            return size
        # get_output2.php answers an empty file for one that is not in the upload
        # directory: ask get_output.php (signed), which says so; a batch-collect app's
        # assimilator has moved it to results/<batch>/, served by get_output3.php.
        instance = announced.rsplit("__", 1)[0]
        try:
            return await self.download_instance_output(project, instance, file_num, dest)
        except RpcError as exc:
            if "no such file" not in str(exc):
                raise
        return await self.download_collected_output(
            project, result_id, file_num, dest, gunzip, job_name=job_name
        )

    async def download_collected_output(
        self,
        project: Project,
        result_id: int,
        index: int,
        dest: Path,
        gunzip: bool = False,
        *,
        job_name: str = "",
    ) -> int:
        """Output ``index`` of instance ``result_id`` of a batch-collect app (moved to
        ``results/<batch>/``) from get_output3.php (``get_file``, login cookie) into
        ``dest``; ``gunzip``: a gzipped output (``gzip_when_done``) is decompressed.

        get_output3.php answers an empty file for one it does not have, so an empty
        download is an error here (:class:`NoOutput`). It refuses a job name holding
        characters other than letters, digits, ``_-.`` and space (HTCondor's hold ``#``):
        given ``job_name``, the file is then taken from the batch's tar."""
        url = (
            f"{project.url}get_output3.php?action=get_file&result_id={result_id}"
            f"&index={index}&download=1"
        )
        shown = f"{project.url}get_output3.php (instance {result_id}, file {index})"
        what = f"instance {result_id} file {index}"
        try:
            size, announced = await self._fetch(url, shown, what, dest, auth_cookie(project))
        except RpcError as exc:
            if not job_name or "web page" not in str(exc) or _COLLECTABLE.fullmatch(job_name):
                raise
            size, announced = await self._collected_from_batch(project, job_name, index, dest)
        if size == 0:
            dest.unlink(missing_ok=True)
            raise NoOutput(
                f"get_output failed for {what}: the project has no such file (neither in "
                "its upload directory nor among its batch-collect results)"
            )
        if gunzip and announced.endswith(".gz"):
            size = gunzip_in_place(dest, what)
        return size

    async def _collected_from_batch(
        self, project: Project, job_name: str, index: int, dest: Path
    ) -> tuple[int, str]:
        """Output ``index`` of a batch-collect job from its batch's tar (get_output3.php's
        ``get_batch_tar``): the batch found with query_batches and query_batch2, the
        logical name with get_templates."""
        batches = {str(b.get("name") or "").strip(): b for b in await self.query_batches(project)}
        names = [n for n in batches if n]
        _, jobs = await self.query_batch2(project, names, "0") if names else ("", [])
        found = [n for n, js in zip(names, jobs, strict=False) if any(j == job_name for j, _ in js)]
        if not found:
            raise NoOutput(f"get_output failed for {job_name}: no batch of the job was found")
        batch_id = _int(batches[found[0]].get("id") or 0, "batch id")
        outputs = (await self.get_templates(project, job_name=job_name)).output_names
        if not 0 <= index < len(outputs):
            raise NoOutput(f"get_output failed for {job_name}: no output {index}")
        member = f"{job_name}__file_{outputs[index]}"
        tmp = Path(part_path(dest))
        try:
            await self.download_batch_archive(project, batch_id, tmp, "tar")
            size, announced = _untar_member(tmp, (member, member + ".gz"), dest)
        finally:
            tmp.unlink(missing_ok=True)
        return size, announced

    async def download_batch_archive(
        self, project: Project, batch_id: int, dest: Path, fmt: str = "zip"
    ) -> int:
        """Every collected output of a batch-collect app's batch, as one zip or tar
        (get_output3.php's ``get_batch_zip``/``get_batch_tar``, login cookie), into
        ``dest``; the byte count."""
        if fmt not in ("zip", "tar"):
            raise ValueError(f"archive format {fmt!r}: zip or tar")
        url = f"{project.url}get_output3.php?action=get_batch_{fmt}&batch_id={batch_id}"
        shown = f"{project.url}get_output3.php (batch {batch_id}, {fmt})"
        return await self._download(
            url, shown, f"batch {batch_id} {fmt}", dest, auth_cookie(project)
        )

    async def download_job_outputs(self, project: Project, job_id: int, dest: Path) -> int:
        """get_output2.php's ``workunit``: the canonical instance's outputs (the file when
        there is one, else a zip of them under their logical names) into ``dest``."""
        url = f"{project.url}get_output2.php?cmd=workunit&wu_id={job_id}"
        shown = f"{project.url}get_output2.php (job {job_id})"
        return await self._download(url, shown, f"job {job_id}", dest, auth_cookie(project))

    async def download_instance_output(
        self, project: Project, instance_name: str, file_num: int, dest: Path
    ) -> int:
        """Download output ``file_num`` of one instance (get_output.php's result_file, signed
        with the MD5 of authenticator and instance name) into ``dest``; the byte count."""
        sign = hashlib.md5(
            f"{project.authenticator}{instance_name}".encode(), usedforsecurity=False
        ).hexdigest()
        url = (
            f"{project.url}get_output.php?cmd=result_file&result_name="
            f"{quote(instance_name, safe='')}&file_num={file_num}&auth_str={sign}"
        )
        shown = f"{project.url}get_output.php (instance {instance_name}, file {file_num})"
        return await self._download(url, shown, f"{instance_name} file {file_num}", dest)

    async def download_batch_outputs(self, project: Project, batch_id: int, dest: Path) -> int:
        """Download a zip of the canonical outputs of every finished job of a batch
        (get_output.php's batch_files, signed with the MD5 of authenticator and batch id,
        so the authenticator is not in the URL) into ``dest``; the byte count."""
        sign = hashlib.md5(
            f"{project.authenticator}{batch_id}".encode(), usedforsecurity=False
        ).hexdigest()
        url = f"{project.url}get_output.php?cmd=batch_files&batch_id={batch_id}&auth_str={sign}"
        shown = f"{project.url}get_output.php (outputs of batch {batch_id})"
        return await self._download(url, shown, f"batch {batch_id}", dest)

    async def _download(
        self, url: str, shown: str, what: str, dest: Path, cookie: str | None = None
    ) -> int:
        """GET a get_output*.php download into ``dest`` (through a temporary name)."""
        return (await self._fetch(url, shown, what, dest, cookie))[0]

    async def _fetch(
        self, url: str, shown: str, what: str, dest: Path, cookie: str | None = None
    ) -> tuple[int, str]:
        """:meth:`_download`, also giving the file name the server announced (its
        ``Content-Disposition``; '' when none)."""
        self.calls["get_output"] = self.calls.get("get_output", 0) + 1
        tmp = part_path(dest)
        plain = self._plain_for(url)
        placed = False
        opened: contextlib.AbstractAsyncContextManager[Reply | Streamed]
        try:
            if plain is not None:
                opened = plain.stream("GET", url, cookie)
            else:
                from gahp_boinc._httpx_transport import stream

                opened = stream(self.client, url, self._timeout, cookie)
            async with self._slots.hold(url), opened as resp:
                if resp.status_code != 200:
                    raise RpcError(
                        f"get_output: HTTP {resp.status_code} from {shown}",
                        retryable=resp.status_code in (502, 503, 504),
                    )
                ctype = resp.headers.get("content-type", "")
                if not ctype.startswith("application/octet-stream"):
                    text = decode_text((await resp.aread(ERROR_BODY, truncate=True))[:300])
                    text = text.strip()
                    if text.startswith("ERROR:"):
                        text = text[6:].strip()
                    elif "<html" in text.lower():
                        text = "the project answered with a web page, not the file"
                    raise rpc_error(f"get_output failed for {what}: {text}", text)
                size = 0
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                with os.fdopen(fd, "wb") as fh:  # in pieces, whatever the framing
                    async for chunk in resp.aiter_bytes(READ_SIZE):
                        fh.write(chunk)
                        size += len(chunk)
                expected = resp.headers.get("content-length")
                if expected is not None and expected.isdigit() and int(expected) != size:
                    raise RpcError(f"get_output: {what} truncated ({size} of {expected} bytes)")
                announced = _disposition_name(resp.headers.get("content-disposition", ""))
            os.replace(tmp, dest)
            placed = True
            return size, announced
        except HttpTimeout:
            raise RpcError(f"get_output: no reply from {shown} in time") from None
        except HttpTransportError as exc:
            raise RpcError(f"get_output: cannot reach {shown}: {exc}") from None
        finally:
            if not placed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)


_COLLECTABLE = re.compile(r"[\w\-. ]{1,255}")
"""Job names get_output3.php's get_file accepts (its is_valid_filename)."""


def _untar_member(archive: Path, members: tuple[str, ...], dest: Path) -> tuple[int, str]:
    """Copy the first of ``members`` (a regular file) found in the tar ``archive`` to
    ``dest`` (through a temporary name); its size and name. :class:`NoOutput` when none."""
    import tarfile

    try:
        with tarfile.open(archive, "r:") as tar:
            for info in tar:
                if info.name in members:
                    if not info.isfile():
                        break
                    src = tar.extractfile(info)
                    if src is None:
                        break
                    tmp = part_path(dest)
                    try:
                        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        with os.fdopen(fd, "wb") as out:
                            while chunk := src.read(READ_SIZE):
                                out.write(chunk)
                        os.replace(tmp, dest)
                    finally:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(tmp)
                    return info.size, info.name
    except (tarfile.TarError, EOFError) as exc:
        raise RpcError(f"the batch archive is not a valid tar: {exc}") from None
    raise NoOutput(f"the batch archive holds no file {members[0]}")


_DISPOSITION = re.compile(r'filename="?([^";]*)"?')


def _disposition_name(header: str) -> str:
    """The file name of a ``Content-Disposition: attachment; filename=...`` header."""
    m = _DISPOSITION.search(header)
    return os.path.basename(m.group(1).strip()) if m else ""


GUNZIP_RATIO = 100
"""A gzipped output may inflate to this many times its size (at least 16 MiB)."""


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def gunzip_in_place(path: Path, what: str) -> int:
    """Decompress the gzip file ``path`` into itself (through a temporary name), bounded
    against a gzip bomb; the decompressed byte count."""
    import gzip
    import zlib

    limit = max(16 << 20, GUNZIP_RATIO * path.stat().st_size)
    tmp = part_path(path)
    total = 0
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as src:
            while chunk := src.read(READ_SIZE):
                total += len(chunk)
                if total > limit:
                    raise RpcError(f"gzipped output {what} inflates beyond {limit} bytes")
                out.write(chunk)
        os.replace(tmp, path)
    except (OSError, EOFError, zlib.error) as exc:
        raise RpcError(f"gzipped output {what} cannot be decompressed: {exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return total


def auth_cookie(project: Project) -> str:
    """The ``Cookie`` header value that logs the account in (BOINC's ``auth`` cookie): the
    way to authenticate get_output2.php and get_output3.php without a secret in the URL."""
    auth = project.authenticator
    if not auth or any(not 0x21 <= ord(c) <= 0x7E or c in ';,"\\' for c in auth):
        raise RpcError("the authenticator holds characters a cookie cannot carry")
    return f"auth={auth}"


def part_path(dest: Path) -> str:
    """A temporary name beside ``dest`` (``.NAME.part-PID-RANDOM``), for a file written
    whole and then renamed to ``dest`` (string operations: pathlib costs more)."""
    head, tail = os.path.split(os.fspath(dest))
    return os.path.join(head, f".{tail}.part-{os.getpid()}-{random.getrandbits(32):08x}")


def _log_reply(command: str, resp: Reply | Streamed, sent: float) -> None:
    """Log a reply's status, size and time since ``sent`` (at DEBUG level)."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "%s: HTTP %d, %d bytes in %.3f s",
            command,
            resp.status_code,
            len(resp.content),
            time.monotonic() - sent,
        )


def _plain_query_batch2(body: bytes) -> tuple[str, list[list[tuple[str, str]]]] | None:
    """What ``parse_query_batch2`` returns for a plain reply, read by ElementTree's C parser
    (7 times faster for a thousand jobs); None for anything unusual (an error, attributes,
    repeated or nested fields, a size mismatch...), which ``parse_query_batch2`` then reads
    with its own tolerance and error messages. The server writes job names unescaped, so a
    reply holding ``&`` (an entity or a raw name) is not plain either."""
    if b"&" in body or top_level_error(body, "query_batch2") is not None:
        return None
    try:
        return _plain_batches(ET.fromstring(decode_text(_DECL.sub(b"", body, count=1))))
    except (ET.ParseError, _NotPlain):
        return None


def _plain_batches(root: ET.Element) -> tuple[str, list[list[tuple[str, str]]]]:
    """The server time and batches of a parsed query_batch2 reply; :class:`_NotPlain` when
    anything in it is unusual."""
    server_time = ""
    sizes: list[int] = []
    batches: list[list[tuple[str, str]]] = []
    for el in root:
        tag = el.tag
        if el.attrib or tag.startswith("{"):
            raise _NotPlain
        if tag == "job":
            if not batches:
                raise _NotPlain
            batches[-1].append(_plain_job(el))
        elif tag == "server_time":
            server_time = _plain_leaf(el)
        elif tag == "batch_size":
            text = _plain_leaf(el)
            if not text.isdigit():
                raise _NotPlain
            sizes.append(int(text))
            batches.append([])
    if not server_time or sizes != [len(jobs) for jobs in batches]:
        raise _NotPlain
    return server_time, batches


def _plain_job(el: ET.Element) -> tuple[str, str]:
    """A ``<job>``'s name and status, when its fields are distinct, bare text elements."""
    fields: dict[str, str] = {}
    for child in el:
        if child.tag in fields or child.attrib or len(child):
            raise _NotPlain
        fields[child.tag] = (child.text or "").strip()
    if not fields and (el.text or "").strip():
        raise _NotPlain
    return fields.get("job_name", ""), fields.get("status", "")


def _plain_leaf(el: ET.Element) -> str:
    """The stripped text of an element without children."""
    if len(el):
        raise _NotPlain
    return (el.text or "").strip()


def _form_request(xml: str, files: Sequence[tuple[str, Path]] = ()) -> tuple[bytes, str]:
    """The multipart/form-data body of a request (with these files' contents as parts
    ``file_0``, ``file_1``...), and its content type.

    The parts httpx's multipart encoder makes from ``files=[("request", (None, xml)),
    ("file_0", (name, fh, "application/octet-stream")), ...]``, built at once: the encoder
    streams a body in many small chunks, one socket write each, which made half the CPU
    time of a burst of small RPCs.
    """
    boundary = os.urandom(16).hex()
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n'.encode(),
        xml.encode("utf-8"),
        b"\r\n",
    ]
    for i, (_, path) in enumerate(files):
        name = path.name.replace("\\", "\\\\").replace('"', "%22")
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file_{i}"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        )
        parts += [path.read_bytes(), b"\r\n"]
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _total_size(files: Sequence[tuple[str, Path]]) -> int:
    try:
        return sum(path.stat().st_size for _, path in files)
    except OSError:
        return 0  # read (and reported) when the request is made


def _plain_url(url: str) -> bool:
    """An URL the lean client sends as it is: printable ASCII, no spaces."""
    return url.isascii() and url.isprintable() and " " not in url


def _upload_chunks(files: Sequence[tuple[str, Path]]):
    chunk: list[tuple[str, Path]] = []
    size = 0
    for name, path in files:
        fsize = path.stat().st_size
        if chunk and (len(chunk) >= MAX_FILES_PER_UPLOAD or size + fsize > MAX_BYTES_PER_UPLOAD):
            yield chunk
            chunk, size = [], 0
        chunk.append((name, path))
        size += fsize
    if chunk:
        yield chunk


def tls_verify(verify: bool | str | ssl.SSLContext) -> bool | ssl.SSLContext:
    """httpx's ``verify`` for a CA bundle path: an SSL context trusting the certificates of
    that file (or directory), as httpx made of a path itself before deprecating it."""
    if not isinstance(verify, str):
        return verify
    import ssl

    if os.path.isdir(verify):
        return ssl.create_default_context(capath=verify)
    return ssl.create_default_context(cafile=verify)


def _int(value: Any, what: str) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        raise RpcError(f"bad {what} in reply: {value!r}") from None


def _float(value: Any, what: str) -> float:
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        raise RpcError(f"bad {what} in reply: {value!r}") from None


_MASK_BITS = {
    1: "could not send",
    2: "too many errors",
    4: "too many success results",
    8: "too many total results",
    16: "cancelled",
    32: "no canonical result (validation)",
}


def _error_mask_text(mask: str) -> str:
    try:
        m = int(mask)
    except ValueError:
        return "job failed"
    names = [text for bit, text in _MASK_BITS.items() if m & bit]
    return ", ".join(names) if names else "job not finished"
