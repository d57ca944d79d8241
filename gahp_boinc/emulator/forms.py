"""Decoding of HTML form bodies the way PHP fills ``$_POST`` and ``$_FILES``."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import attrs


@attrs.frozen
class FilePart:
    """One uploaded file (a multipart part with a ``filename``)."""

    field: str
    filename: str
    data: bytes


@attrs.frozen
class Form:
    fields: dict[str, str]
    files: tuple[FilePart, ...] = ()


_PARAM = re.compile(r';\s*([A-Za-z0-9_*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')


def header_params(value: str) -> tuple[str, dict[str, str]]:
    """Split ``type; a=1; b="x"`` into ``("type", {"a": "1", "b": "x"})``."""
    main = value.split(";", 1)[0].strip().lower()
    params = {}
    for k, v in _PARAM.findall(value):
        v = v.strip()
        if v.startswith('"') and v.endswith('"') and len(v) >= 2:
            v = re.sub(r"\\(.)", r"\1", v[1:-1])
        params[k.lower()] = v
    return main, params


def _strip_newline(data: bytes) -> bytes:
    """``data`` less one trailing CRLF or LF."""
    if data.endswith(b"\r\n"):
        return data[:-2]
    if data.endswith(b"\n"):
        return data[:-1]
    return data


def _split_part(chunk: bytes) -> tuple[str, bytes] | None:
    """A part's header block and data, or None when it has no blank line after its headers."""
    chunk = chunk[2:] if chunk.startswith(b"\r\n") else chunk.removeprefix(b"\n")
    sep, skip = chunk.find(b"\r\n\r\n"), 4
    if sep < 0:
        sep, skip = chunk.find(b"\n\n"), 2
        if sep < 0:
            return None
    return chunk[:sep].decode("latin-1"), _strip_newline(chunk[sep + skip :])


def _disposition(head: str) -> str:
    """The value of the last Content-Disposition header in a part's header block."""
    disposition = ""
    for line in re.split(r"\r?\n", head):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-disposition":
            disposition = value
    return disposition


def parse_multipart(body: bytes, boundary: str) -> Form:
    """Parse a multipart/form-data body; malformed parts are skipped as PHP does."""
    delim = b"--" + boundary.encode("latin-1")
    fields: dict[str, str] = {}
    files: list[FilePart] = []
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        part = _split_part(chunk)
        if part is None:
            continue
        head, data = part
        _, params = header_params(_disposition(head))
        field = params.get("name")
        if field is None:
            continue
        if "filename" in params:
            files.append(FilePart(field, params["filename"], data))
        else:
            fields.setdefault(field, data.decode("utf-8", "replace"))
    return Form(fields, tuple(files))


def parse_form(content_type: str, body: bytes) -> Form:
    """Decode a POST body given its Content-Type (multipart or urlencoded)."""
    kind, params = header_params(content_type or "")
    if kind == "multipart/form-data" and params.get("boundary"):
        return parse_multipart(body, params["boundary"])
    if kind == "application/x-www-form-urlencoded":
        return Form(parse_query(body.decode("latin-1")))
    return Form({})


def parse_query(qs: str) -> dict[str, str]:
    """A query string as PHP's ``$_GET`` (last value wins)."""
    return {k: v[-1] for k, v in parse_qs(qs, keep_blank_values=True).items()}


def cookie_auth(header: str) -> str | None:
    """The ``auth`` cookie of a ``Cookie`` header (BOINC's login cookie), if any."""
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == "auth":
            return value
    return None
