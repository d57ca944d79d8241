"""Building the BOINC RPCs' requests: XML bodies, upload chunks, signed URLs (no I/O
but a file's size)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gahp_boinc._errors import RpcError
from gahp_boinc._inputs import input_xml
from gahp_boinc._transport import MAX_BYTES_PER_UPLOAD

if TYPE_CHECKING:
    from gahp_boinc._records import JobInput, JobParams, Project

MAX_FILES_PER_UPLOAD = 20
"""PHP's default max_file_uploads on the project server."""


def el(tag: str, value: object) -> str:
    """``<tag>value</tag>`` and a newline, the value escaped."""
    return f"<{tag}>{xml_escape(str(value))}</{tag}>\n"


def xml_escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as entities (as ``xml.sax.saxutils.escape``, whose import
    brings urllib.request and the email package)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def batch_el(batch: str | int) -> str:
    """A batch by id (an int: ids are unique, names need not be) or by name."""
    if isinstance(batch, int) and not isinstance(batch, bool):
        return el("batch_id", batch)
    return el("batch_name", batch)


def rpc_request(command: str, project: Project | None, body: str = "") -> str:
    """A submit_rpc_handler.php / job_file.php request (with the project's authenticator
    when given)."""
    auth = el("authenticator", project.authenticator) if project is not None else ""
    return f"<{command}>\n{auth}{body}</{command}>\n"


def submit_batch_xml(
    batch_id: int, app_name: str, jobs: Sequence[JobInput], params: JobParams
) -> str:
    """The ``<batch>`` of a submit_batch request."""
    job_params = "".join(
        el(k, f"{v:f}")
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
        el("batch_id", batch_id),
        el("app_name", app_name),
        el("app_version_num", params.app_version_num or 0),
        f"<job_params>\n{job_params}</job_params>\n",
    ]
    if params.allocation_priority:
        parts.append("<allocation_priority>1</allocation_priority>\n")
    elif params.priority is not None:
        parts.append(el("priority", int(params.priority)))
    for job in jobs:
        parts.append("<job>\n" + el("name", job.name) + el("command_line", job.command_line))
        parts.append(job.options.xml())
        parts.extend(input_xml(src) for src in job.inputs)
        parts.append("</job>\n")
    parts.append("</batch>\n")
    return "".join(parts)


def estimate_batch_xml(app_name: str, jobs: Sequence[JobInput], params: JobParams) -> str:
    """The ``<batch>`` of an estimate_batch request."""
    fpops = (
        el("rsc_fpops_est", f"{params.rsc_fpops_est:f}") if params.rsc_fpops_est is not None else ""
    )
    parts = ["<batch>\n", el("app_name", app_name)]
    for job in jobs:
        parts.append(
            "<job>\n" + el("name", job.name) + fpops + el("command_line", job.command_line)
        )
        parts.append("</job>\n")
    parts.append("</batch>\n")
    return "".join(parts)


def upload_chunks(
    files: Sequence[tuple[str, Path]],
) -> Iterator[list[tuple[str, Path]]]:
    """``files`` in groups an upload_files request may carry: at most
    :data:`MAX_FILES_PER_UPLOAD` files and :data:`MAX_BYTES_PER_UPLOAD` bytes (a single
    larger file alone)."""
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


def signature(project: Project, what: object) -> str:
    """get_output.php's ``auth_str`` for ``what`` (an instance name, a batch id): the MD5
    of the authenticator and it, so the authenticator is not in the URL."""
    return hashlib.md5(f"{project.authenticator}{what}".encode(), usedforsecurity=False).hexdigest()


def auth_cookie(project: Project) -> str:
    """The ``Cookie`` header value that logs the account in (BOINC's ``auth`` cookie): the
    way to authenticate get_output2.php and get_output3.php without a secret in the URL."""
    auth = project.authenticator
    if not auth or any(not 0x21 <= ord(c) <= 0x7E or c in ';,"\\' for c in auth):
        raise RpcError("the authenticator holds characters a cookie cannot carry")
    return f"auth={auth}"
