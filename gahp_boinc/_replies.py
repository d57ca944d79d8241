"""Reading BOINC server replies tolerantly (pure functions, no I/O).

The reference server declares ISO-8859-1 over UTF-8 text, writes error messages without
XML escaping, emits the malformed ``<aborted J>`` element in abort_jobs replies, and on
PHP 8 answers some requests with HTTP 500 and a truncated body. Everything here turns
such bytes into data or a clear :class:`RpcError`, never an unhandled exception.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any
from xml.parsers.expat import ExpatError

from gahp_boinc._errors import BoincError, RpcError, rpc_error

if TYPE_CHECKING:
    from gahp_boinc._transport import Reply

_DECL = re.compile(rb"^\s*<\?xml[^>]*\?>\s*")
_ABORTED = re.compile(rb"<aborted [^>]*>")
_ERROR_BLOCK = re.compile(
    rb"<error>\s*<error_num>\s*(-?\d+)\s*</error_num>\s*<error_msg>(.*?)</error_msg>", re.S
)
_TAG_VALUE = re.compile(rb"<(\w+)>([^<]*)</\1>")


def decode_text(raw: bytes) -> str:
    """Decode reply text: UTF-8 whatever the declaration says, Latin-1 if it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def top_level_error(body: bytes, command: str) -> RpcError | None:
    """The ``<error>`` of a reply when it stands at the top level (or alone) with a non-zero code.

    An ``<error>`` nested deeper (query_batch puts one in each failed ``<job>``) is data.
    """
    stripped = _DECL.sub(b"", body, count=1).lstrip()
    open_tag = f"<{command}>".encode()
    inner = stripped[len(open_tag) :].lstrip() if stripped.startswith(open_tag) else stripped
    if not inner.startswith(b"<error>"):
        return None
    m = _ERROR_BLOCK.match(inner)
    if not m:
        return RpcError(f"{command}: unreadable error reply")
    code = int(m.group(1))
    if code == 0:
        return None
    message = decode_text(m.group(2)).strip() or "unknown error"
    return rpc_error(message, message, code=code)


def parse_reply(body: bytes, command: str) -> dict[str, Any]:
    """Parse a submit RPC reply into the dict under ``<command>`` (empty dict for ``<x/>``).

    Raises :class:`RpcError` for a server-reported error or a body that is not a reply.
    """
    err = top_level_error(body, command)
    if err is not None:
        raise err
    text = _ABORTED.sub(b"", _DECL.sub(b"", body, count=1))
    doc = plain_tree(text)
    if doc is None:
        doc = _xmltodict_tree(body, text, command)
    if not isinstance(doc, dict) or command not in doc:
        if isinstance(doc, dict) and "success" in doc:  # retire_batch, set_expire_time
            return doc
        found = next(iter(doc), "nothing") if isinstance(doc, dict) else "nothing"
        raise RpcError(f"{command}: unexpected reply <{found}>")
    return doc[command] or {}


def _xmltodict_tree(body: bytes, text: bytes, command: str) -> Any:
    """xmltodict's reading of a reply, for whatever :func:`plain_tree` leaves."""
    import xmltodict

    try:
        return xmltodict.parse(decode_text(text), force_list=_LISTS)
    except (ExpatError, ValueError) as exc:  # ValueError: an entity declaration
        snippet = decode_text(body[:200]).strip().replace("\n", " ")
        raise RpcError(f"{command}: malformed reply from server ({exc}): {snippet}") from None


_LISTS = ("job", "file", "file_info", "file_ref", "batch", "phys_name", "instance", "outfile")


class _NotPlain(BoincError):
    """A reply :func:`plain_tree` leaves to xmltodict (never leaves this module)."""


def plain_tree(text: bytes) -> dict[str, Any] | None:
    """What ``xmltodict.parse(text, force_list=_LISTS)`` makes of a plain reply, read by
    ElementTree's C parser (about four times faster, and xmltodict is not even imported);
    None for anything else (attributes, namespaces, text beside elements, a DOCTYPE, a
    parse error), which xmltodict then reads with its own errors and rules."""
    if b"<!DOCTYPE" in text or b"<!ENTITY" in text:
        return None
    try:
        root = ET.fromstring(decode_text(text))
        return {root.tag: _plain_value(root)}
    except (ET.ParseError, _NotPlain):
        return None


def _plain_value(el: ET.Element) -> Any:
    if el.attrib or el.tag[:1] == "{":
        raise _NotPlain
    if not len(el):
        return (el.text or "").strip() or None
    if el.text and el.text.strip():
        raise _NotPlain
    out: dict[str, Any] = {}
    for child in el:
        if child.tail and child.tail.strip():
            raise _NotPlain
        tag, value = child.tag, _plain_value(child)
        if tag in _LISTS:
            out.setdefault(tag, []).append(value)
        elif tag in out:
            known = out[tag]
            if isinstance(known, list):
                known.append(value)
            else:
                out[tag] = [known, value]
        else:
            out[tag] = value
    return out


_JOB_NAME = re.compile(rb"<job_name>(.*?)</job_name>", re.S)


def _escape_job_name(m: re.Match[bytes]) -> bytes:
    """The server writes job names as they are: ``&`` or ``<`` in one broke the XML."""
    name = m.group(1).replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;")
    return b"<job_name>" + name + b"</job_name>"


def parse_query_batch2(body: bytes) -> tuple[str, list[list[tuple[str, str]]]]:
    """query_batch2: the server time and, per requested batch in order, its (job, status) pairs.

    The reply interleaves ``<batch_size>`` and ``<job>`` elements, so it is read in
    document order (streaming: large batches stay cheap).
    """
    import xmltodict

    err = top_level_error(body, "query_batch2")
    if err is not None:
        raise err
    server_time = ""
    batches: list[list[tuple[str, str]]] = []
    sizes: list[int] = []

    def item(path: list[tuple[str, Any]], value: Any) -> bool:
        nonlocal server_time
        tag = path[-1][0]
        if tag == "server_time":
            server_time = (value or "").strip()
        elif tag == "batch_size":
            sizes.append(int((value or "0").strip()))
            batches.append([])
        elif tag == "job":
            if not batches:
                raise RpcError("query_batch2: job before batch_size in reply")
            v = value or {}
            batches[-1].append(((v.get("job_name") or "").strip(), (v.get("status") or "").strip()))
        return True

    text = _JOB_NAME.sub(_escape_job_name, _DECL.sub(b"", body, count=1))
    try:
        xmltodict.parse(decode_text(text), item_depth=2, item_callback=item)
    except ExpatError as exc:
        raise RpcError(f"query_batch2: malformed reply from server ({exc})") from None
    except ValueError as exc:
        raise RpcError(f"query_batch2: malformed reply from server ({exc})") from None
    if not server_time:
        raise RpcError("query_batch2: reply without server_time")
    for size, jobs in zip(sizes, batches, strict=True):
        if size != len(jobs):
            raise RpcError(f"query_batch2: batch_size {size} but {len(jobs)} jobs in reply")
    return server_time, batches


_JOB_FIELDS = ("name", "status", "exit_status", "error", "canonical_instance_id", "cpu_time")


def parse_query_batch_jobs(body: bytes) -> list[dict[str, str]]:
    """query_batch (with get_job_details): per ``<job>``, its text fields in ``_JOB_FIELDS``
    (empty string when absent). A failed job's ``<error>`` is data, not an RPC failure."""
    return query_batch_jobs(parse_reply(body, "query_batch"))


def query_batch_jobs(reply: dict[str, Any], with_id: bool = False) -> list[dict[str, str]]:
    """The jobs of a parsed query_batch reply, as :func:`parse_query_batch_jobs` gives them
    (and with ``with_id`` their ``id`` too)."""
    fields = ("id", *_JOB_FIELDS) if with_id else _JOB_FIELDS
    jobs = []
    for job in as_list(reply.get("job")):
        job = job if isinstance(job, dict) else {}
        jobs.append({k: _text(job.get(k)) for k in fields})
    return jobs


def _text(value: Any) -> str:
    if isinstance(value, list):  # a repeated element (one <error> per error-mask bit)
        return ", ".join(t for t in (_text(v) for v in value) if t)
    if isinstance(value, dict):  # an element with attributes or children: its text only
        value = value.get("#text")
    return str(value).strip() if value is not None else ""


def partial_fields(body: bytes) -> dict[str, str]:
    """Simple ``<tag>value</tag>`` pairs from a truncated body (best effort)."""
    return {m.group(1).decode(): decode_text(m.group(2)).strip() for m in _TAG_VALUE.finditer(body)}


def clean_stderr(text: str | None) -> str:
    """The stderr text of query_completed_job: HTML-unescaped and stripped of padding."""
    if not text:
        return ""
    return html.unescape(text).strip() + "\n"


def as_list(value: Any) -> list[Any]:
    """xmltodict gives one element as a value and several as a list: always a list."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def status_error(reply: Reply, command: str, url: str) -> RpcError | None:
    """The error an RPC's reply that is not HTTP 200 stands for (None for a 200): the
    server's own error message when it gave one (BOINC's PHP 8 servers answer some with
    HTTP 500), else the status, with its ``status``, ``retry_after`` (a 503's Retry-After)
    and ``body``; 502, 503 and 504 are retryable."""
    status = reply.status_code
    if status == 200:
        return None
    if 300 <= status < 400:
        where = reply.headers.get("location", "?")
        return RpcError(f"{command}: {url} redirects to {where}; use that project URL")
    body = reply.content
    err = top_level_error(body, command)
    if err is not None:
        return err.reworded(f"{command}: HTTP {status}: {err}")
    snippet = decode_text(body[:160]).strip().replace("\n", " ")
    retry_after = None
    if status == 503 and (ra := reply.headers.get("retry-after", "")).strip().isdigit():
        retry_after = float(ra)
    return RpcError(
        f"{command}: HTTP {status} {reply.reason_phrase} from {url}"
        + (f": {snippet}" if snippet and status != 500 else ""),
        retryable=status in (502, 503, 504),
        status=status,
        retry_after=retry_after,
        body=body,
    )


def plain_query_batch2(body: bytes) -> tuple[str, list[list[tuple[str, str]]]] | None:
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


def reply_int(value: Any, what: str) -> int:
    """``value`` (a reply's field) as an int; an :class:`RpcError` naming ``what`` if it
    is not one."""
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        raise RpcError(f"bad {what} in reply: {value!r}") from None


def reply_float(value: Any, what: str) -> float:
    """``value`` (a reply's field) as a float; an :class:`RpcError` naming ``what`` if it
    is not one."""
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


def error_mask_text(mask: str) -> str:
    """A workunit's error mask (``error_mask``) in words."""
    try:
        m = int(mask)
    except ValueError:
        return "job failed"
    names = [text for bit, text in _MASK_BITS.items() if m & bit]
    return ", ".join(names) if names else "job not finished"
