"""The BOINC remote job submission RPCs, as a real project serves them.

One :class:`BoincRpc` owns the connections (its :class:`~gahp_boinc._transport.Transport`,
the request slots) and serves every project: each call names the :class:`Project` it is
for. Concerns live beside it: the records (:mod:`gahp_boinc._records`), building requests
(:mod:`gahp_boinc._requests`), reading replies (:mod:`gahp_boinc._replies`), sending with
retries (:mod:`gahp_boinc._retry`), downloads (:mod:`gahp_boinc._downloads`), and the
transports (:mod:`gahp_boinc._transport`: the lean client for plain HTTP, httpx for TLS,
proxies and large uploads).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import attrs

from gahp_boinc._downloads import (
    COLLECTABLE,
    MAX_DOWNLOAD_BYTES,
    fetch,
    gunzip_in_place,
    is_gzip,
    part_path,
    untar_member,
)
from gahp_boinc._errors import NoOutput, RpcError, rpc_error
from gahp_boinc._http import Slots
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
from gahp_boinc._replies import (
    as_list,
    clean_stderr,
    error_mask_text,
    parse_query_batch2,
    parse_reply,
    partial_fields,
    plain_query_batch2,
    query_batch_jobs,
    reply_float,
    reply_int,
)
from gahp_boinc._requests import (
    auth_cookie,
    batch_el,
    el,
    estimate_batch_xml,
    rpc_request,
    signature,
    submit_batch_xml,
    upload_chunks,
    xml_escape,
)
from gahp_boinc._retry import RetryPolicy, post
from gahp_boinc._route import RoutedTransport, make_client
from gahp_boinc._templates import input_template_of
from gahp_boinc._transport import (
    MAX_CONNECTIONS,
    TOTAL_CONNECTIONS,
    Form,
    Transport,
    tls_verify,
)

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "BATCH_STATES",
    "MAX_DOWNLOAD_BYTES",
    "MAX_REPLY_BYTES",
    "BatchDetail",
    "BatchInfo",
    "BoincRpc",
    "CompletedJob",
    "JobCounts",
    "JobDetail",
    "JobInput",
    "JobInstance",
    "JobOptions",
    "JobParams",
    "Project",
    "Templates",
    "auth_cookie",
    "gunzip_in_place",
    "part_path",
    "tls_verify",
    "xml_escape",
]

DEFAULT_PARAMS = JobParams()
"""Every job parameter left to the server."""
MAX_REPLY_BYTES = 64 * 1024 * 1024
"""The default limit on the size of an RPC reply (downloads are written to disk as they
arrive, up to :data:`MAX_DOWNLOAD_BYTES`)."""


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
        transport: Transport | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        """``client``: an httpx client for every request; without one, plain-HTTP requests
        use the lean client and the others an httpx client made when first needed, with
        ``verify`` (checked here: a bad CA bundle fails at once). Whichever client, a
        request (connecting, sending, reading the whole reply) ends within ``timeout``
        seconds (longer only for a body arriving at 16 KiB/s or more), an RPC's reply may
        hold ``max_reply_bytes`` bytes, an error reply's first 4 KiB are read, and an RPC
        and its retries end within ``deadline`` seconds.

        ``transport``: every request goes through it instead (``client``, ``timeout`` and
        ``verify`` are then not used), e.g. a test's in-memory server; ``retry``: the
        retry policy instead of one made of ``deadline``, ``max_tries`` and ``backoff``."""
        self.transport: Transport = (
            transport
            if transport is not None
            else RoutedTransport(client, timeout=timeout, verify=verify)
        )
        self.retry = retry or RetryPolicy(deadline, max_tries, backoff)
        self.max_reply_bytes = max_reply_bytes
        self.max_download_bytes = MAX_DOWNLOAD_BYTES
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
        return make_client(timeout, verify)

    @property
    def client(self) -> httpx.AsyncClient:
        """The httpx client (made on first use when none was given); an error when this
        object was given a transport of its own."""
        if not isinstance(self.transport, RoutedTransport):
            raise RpcError("no httpx client: this BoincRpc was given its own transport")
        return self.transport.client

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self.transport.aclose()

    async def _post(
        self,
        project: Project,
        page: str,
        command: str,
        xml: str | None,
        files: Sequence[tuple[str, Path]] = (),
        idempotent: bool = True,
    ) -> bytes:
        """POST a request (or GET ``page`` when ``xml`` is None), return the body of a 200
        reply; retry what is safe to retry."""
        self.calls[command] = self.calls.get(command, 0) + 1
        form = Form(xml, tuple(files)) if xml is not None else None
        return await post(
            self.transport,
            self._slots,
            self.retry,
            project.endpoint(page),
            command,
            form,
            limit=self.max_reply_bytes,
            idempotent=idempotent,
        )

    # ---- RPCs -------------------------------------------------------------------------------

    async def ping(self, project: Project) -> None:
        body = await self._post(
            project, "submit_rpc_handler.php", "ping", rpc_request("ping", None)
        )
        reply = parse_reply(body, "ping")
        if not reply.get("success"):
            raise RpcError("ping: server did not answer success")

    async def get_templates(
        self, project: Project, app_name: str | None = None, job_name: str | None = None
    ) -> Templates:
        inner = el("app_name", app_name) if app_name is not None else el("job_name", job_name)
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "get_templates",
            rpc_request("get_templates", project, inner),
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
        return Templates(
            n_inputs=n_inputs, output_names=tuple(names), input_template=input_template_of(body)
        )

    async def create_batch(
        self, project: Project, batch_name: str, app_name: str, expire_time: float
    ) -> int:
        inner = (
            el("batch_name", batch_name)
            + el("app_name", app_name)
            + el("expire_time", f"{expire_time:f}")
        )
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "create_batch",
            rpc_request("create_batch", project, inner),
            idempotent=False,
        )
        return reply_int(parse_reply(body, "create_batch").get("batch_id"), "create_batch batch_id")

    async def query_batches(
        self, project: Project, get_cpu_time: bool = False
    ) -> list[dict[str, Any]]:
        inner = el("get_cpu_time", 1) if get_cpu_time else ""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_batches",
            rpc_request("query_batches", project, inner),
        )
        return [b for b in as_list(parse_reply(body, "query_batches").get("batch")) if b]

    async def query_files(
        self, project: Project, batch_id: int | None, names: Sequence[str]
    ) -> list[int]:
        """Indices (into ``names``) of the files the server does not have.

        With a ``batch_id`` the server links the files it has to that batch.
        """
        inner = (el("batch_id", batch_id) if batch_id is not None else "") + "".join(
            el("phys_name", n) for n in names
        )
        body = await self._post(
            project, "job_file.php", "query_files", rpc_request("query_files", project, inner)
        )
        absent = parse_reply(body, "query_files").get("absent_files") or {}
        idx = [reply_int(i, "query_files index") for i in as_list(absent.get("file"))]
        if any(i < 0 or i >= len(names) for i in idx):
            raise RpcError("query_files: server named a file index out of range")
        return idx

    async def upload_files(
        self, project: Project, batch_id: int, files: Sequence[tuple[str, Path]]
    ) -> None:
        """Upload (physical name, local path) pairs, at most 20 files and ~6 MB a request."""
        for chunk in upload_chunks(files):
            inner = el("batch_id", batch_id) + "".join(el("phys_name", n) for n, _ in chunk)
            body = await self._post(
                project,
                "job_file.php",
                "upload_files",
                rpc_request("upload_files", project, inner),
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
        params: JobParams = DEFAULT_PARAMS,
    ) -> int:
        """submit_batch: the batch's id (as the server answers it)."""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "submit_batch",
            rpc_request(
                "submit_batch", project, submit_batch_xml(batch_id, app_name, jobs, params)
            ),
            idempotent=False,
        )
        reply = parse_reply(body, "submit_batch")
        return reply_int(reply.get("batch_id") or batch_id, "batch_id")

    async def query_batch2(
        self, project: Project, batch_names: Sequence[str], min_mod_time: str
    ) -> tuple[str, list[list[tuple[str, str]]]]:
        inner = el("min_mod_time", min_mod_time) + "".join(el("batch_name", b) for b in batch_names)
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_batch2",
            rpc_request("query_batch2", project, inner),
        )
        parsed = plain_query_batch2(body)
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
        batch_name: str | int,
        get_job_details: bool = True,
        get_cpu_time: bool = False,
    ) -> BatchDetail:
        """query_batch: the batch's summary and its jobs (with their status and failure
        details when ``get_job_details``; the batch's CPU time when ``get_cpu_time``)."""
        inner = (
            batch_el(batch_name)
            + (el("get_cpu_time", 1) if get_cpu_time else "")
            + (el("get_job_details", 1) if get_job_details else "")
        )
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_batch",
            rpc_request("query_batch", project, inner),
        )
        reply = parse_reply(body, "query_batch")
        jobs = tuple(
            JobDetail(
                name=j["name"],
                status=j["status"],
                exit_status=reply_int(j["exit_status"], "exit_status")
                if j["exit_status"]
                else None,
                error=j["error"],
                canonical_instance_id=reply_int(j["canonical_instance_id"] or 0, "canonical id"),
                cpu_time=reply_float(j["cpu_time"], "cpu_time") if j["cpu_time"] else None,
                id=reply_int(j["id"] or 0, "job id"),
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
                rpc_request("query_completed_job", project, el("job_name", job_name)),
            )
        except RpcError as exc:
            if exc.status == 500 and b"<error_mask>" in exc.body:
                mask = partial_fields(exc.body).get("error_mask", "?")
                raise NoOutput(
                    f"job {job_name} has no completed instance (error_mask {mask}; "
                    f"{error_mask_text(mask)}): no output to fetch"
                ) from None
            raise
        reply = parse_reply(body, "query_completed_job")
        cj = reply.get("completed_job")
        if not isinstance(cj, dict):
            raise RpcError(f"query_completed_job: no completed_job for {job_name} in reply")
        return CompletedJob(
            exit_status=reply_int(cj.get("exit_status", 0), "exit_status"),
            elapsed_time=reply_float(cj.get("elapsed_time", 0), "elapsed_time"),
            cpu_time=reply_float(cj.get("cpu_time", 0), "cpu_time"),
            stderr=clean_stderr(cj.get("stderr_out")),
            error_mask=reply_int(cj.get("error_mask", 0), "error_mask"),
            canonical_resultid=reply_int(cj.get("canonical_resultid", 0), "canonical_resultid"),
            error_resultid=reply_int(cj.get("error_resultid", 0), "error_resultid"),
        )

    async def abort_jobs(self, project: Project, job_names: Sequence[str]) -> None:
        inner = "".join(el("job_name", j) for j in job_names)
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "abort_jobs",
            rpc_request("abort_jobs", project, inner),
        )
        parse_reply(body, "abort_jobs")

    async def estimate_batch(
        self,
        project: Project,
        app_name: str,
        jobs: Sequence[JobInput],
        params: JobParams = DEFAULT_PARAMS,
    ) -> float:
        """estimate_batch: BOINC's estimate of the seconds a batch would take (its FLOPs,
        ``params.rsc_fpops_est`` per job or the template's, over the project's FLOPS)."""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "estimate_batch",
            rpc_request("estimate_batch", project, estimate_batch_xml(app_name, jobs, params)),
        )
        return reply_float(parse_reply(body, "estimate_batch").get("seconds"), "estimate seconds")

    async def get_job_counts(self, project: Project) -> JobCounts:
        """server_status.php?counts=1 (no authenticator needed)."""
        body = await self._post(project, "server_status.php?counts=1", "job_counts", None)
        reply = parse_reply(body, "job_counts")
        fields = attrs.fields_dict(JobCounts)
        return JobCounts(
            **{k: reply_int(v, k) for k, v in reply.items() if k in fields and v is not None}
        )

    async def query_job(self, project: Project, job_id: int) -> tuple[JobInstance, ...]:
        """query_job: the instances of a job, by the job's id (:attr:`JobDetail.id`)."""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "query_job",
            rpc_request("query_job", project, el("job_id", job_id)),
        )
        reply = parse_reply(body, "query_job")
        instances = []
        for inst in as_list(reply.get("instance")):
            inst = inst if isinstance(inst, dict) else {}
            sizes = tuple(
                reply_int(f.get("size") if isinstance(f, dict) else None, "output size")
                for f in as_list(inst.get("outfile"))
            )
            instances.append(
                JobInstance(
                    name=str(inst.get("name") or "").strip(),
                    id=reply_int(inst.get("id") or 0, "instance id"),
                    state=str(inst.get("state") or "").strip(),
                    outfile_sizes=sizes,
                )
            )
        return tuple(instances)

    async def abort_batch(self, project: Project, batch_name: str | int) -> None:
        """abort_batch: cancel every unfinished job of the batch."""
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "abort_batch",
            rpc_request("abort_batch", project, batch_el(batch_name)),
        )
        parse_reply(body, "abort_batch")

    async def retire_batch(self, project: Project, batch_name: str | int) -> None:
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "retire_batch",
            rpc_request("retire_batch", project, batch_el(batch_name)),
        )
        parse_reply(body, "retire_batch")

    async def set_expire_time(self, project: Project, batch_name: str | int, expire: float) -> None:
        inner = batch_el(batch_name) + el("expire_time", f"{expire:f}")
        body = await self._post(
            project,
            "submit_rpc_handler.php",
            "set_expire_time",
            rpc_request("set_expire_time", project, inner),
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
            if gunzip and is_gzip(dest):
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
            if not job_name or "web page" not in str(exc) or COLLECTABLE.fullmatch(job_name):
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
        batch_id = reply_int(batches[found[0]].get("id") or 0, "batch id")
        outputs = (await self.get_templates(project, job_name=job_name)).output_names
        if not 0 <= index < len(outputs):
            raise NoOutput(f"get_output failed for {job_name}: no output {index}")
        member = f"{job_name}__file_{outputs[index]}"
        tmp = Path(part_path(dest))
        try:
            await self.download_batch_archive(project, batch_id, tmp, "tar")
            size, announced = untar_member(tmp, (member, member + ".gz"), dest)
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
        sign = signature(project, instance_name)
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
        sign = signature(project, batch_id)
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
        """:meth:`_download`, also giving the file name the server announced."""
        self.calls["get_output"] = self.calls.get("get_output", 0) + 1
        return await fetch(
            self.transport, self._slots, url, shown, what, dest, cookie, self.max_download_bytes
        )
