"""Downloads of a BOINC project's outputs to files: streamed to a temporary name and
renamed, decompressed or taken from an archive when need be."""

from __future__ import annotations

import contextlib
import os
import random
import re
from pathlib import Path

from gahp_boinc._errors import NoOutput, RpcError, rpc_error
from gahp_boinc._http import ERROR_BODY, READ_SIZE, HttpTimeout, HttpTransportError, Slots
from gahp_boinc._replies import decode_text
from gahp_boinc._transport import Reply, Transport

COLLECTABLE = re.compile(r"[\w\-. ]{1,255}")
"""Job names get_output3.php's get_file accepts (its is_valid_filename)."""


MAX_DOWNLOAD_BYTES = 4 * 1024**3
"""The largest output download written to disk (a file, a job's or batch's archive)."""


async def fetch(
    transport: Transport,
    slots: Slots,
    url: str,
    shown: str,
    what: str,
    dest: Path,
    cookie: str | None = None,
    max_bytes: int = MAX_DOWNLOAD_BYTES,
) -> tuple[int, str]:
    """GET a get_output*.php download into ``dest`` (through a temporary name, so an error
    body or an interrupted transfer never replaces a file): its byte count and the file
    name the server announced (its ``Content-Disposition``; '' when none). ``shown``: the
    URL as errors show it (no secret), ``what``: the file as they name it. A download over
    ``max_bytes`` (announced or not) is refused and nothing of it kept."""
    tmp = part_path(dest)
    placed = False
    try:
        async with slots.hold(url), transport.stream("GET", url, cookie) as resp:
            await _check_download(resp, shown, what)
            expected = resp.headers.get("content-length")
            if expected is not None and expected.isdigit() and int(expected) > max_bytes:
                raise RpcError(f"get_output: {what} is {expected} bytes, over {max_bytes}")
            size = await _write_body(resp, tmp, what, max_bytes)
            if expected is not None and expected.isdigit() and int(expected) != size:
                raise RpcError(f"get_output: {what} truncated ({size} of {expected} bytes)")
            announced = disposition_name(resp.headers.get("content-disposition", ""))
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


async def _check_download(resp: Reply, shown: str, what: str) -> None:
    """Refuse a reply that is not a file: an HTTP error, or the project's error text."""
    if resp.status_code != 200:
        raise RpcError(
            f"get_output: HTTP {resp.status_code} from {shown}",
            retryable=resp.status_code in (502, 503, 504),
            status=resp.status_code,
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


async def _write_body(resp: Reply, tmp: str, what: str, max_bytes: int) -> int:
    """Write the reply's body to the new file ``tmp`` in pieces, whatever the framing;
    its size (over ``max_bytes`` is an error)."""
    size = 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as fh:
        async for chunk in resp.aiter_bytes(READ_SIZE):
            size += len(chunk)
            if size > max_bytes:
                raise RpcError(f"get_output: {what} is over {max_bytes} bytes")
            fh.write(chunk)
    return size


def untar_member(archive: Path, members: tuple[str, ...], dest: Path) -> tuple[int, str]:
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


def disposition_name(header: str) -> str:
    """The file name of a ``Content-Disposition: attachment; filename=...`` header."""
    m = _DISPOSITION.search(header)
    return os.path.basename(m.group(1).strip()) if m else ""


GUNZIP_RATIO = 100
"""A gzipped output may inflate to this many times its size (at least 16 MiB)."""


def is_gzip(path: Path) -> bool:
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


def part_path(dest: Path) -> str:
    """A temporary name beside ``dest`` (``.NAME.part-PID-RANDOM``), for a file written
    whole and then renamed to ``dest`` (string operations: pathlib costs more)."""
    head, tail = os.path.split(os.fspath(dest))
    return os.path.join(head, f".{tail}.part-{os.getpid()}-{random.getrandbits(32):08x}")
