"""BOINC_FETCH_OUTPUT: stderr, output files and renames, written safely into place.

The server's output names are checked (:mod:`gahp_boinc._safe_names`) before any use, and
a zip output is unpacked within :class:`ArchiveLimits`: nothing of a refused archive is
left behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import random
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import attrs

from gahp_boinc._downloads import part_path
from gahp_boinc._errors import OutputError, RpcError, UnsafeOutput
from gahp_boinc._rpc import BoincRpc, CompletedJob, Project
from gahp_boinc._safe_names import check_member_path, check_output_name, inside

log = logging.getLogger("gahp.boinc.outputs")


@attrs.frozen
class ArchiveLimits:
    """Bounds on unpacking a zip output: the bytes written for its members, in all and
    against the archive's own size, and its number of entries. Both the sizes its headers
    declare and the bytes actually written count."""

    max_bytes: int = 4 << 30
    """Total uncompressed bytes of the members unpacked (default 4 GiB)."""
    max_members: int = 10_000
    """Entries (files and directories) in the archive."""
    max_ratio: int = 100
    """Uncompressed bytes per byte of the archive, beyond ``ratio_floor`` (a zip bomb
    inflates a thousandfold; real outputs rarely a hundredfold)."""
    ratio_floor: int = 16 << 20
    """Bytes any archive may unpack to whatever its ratio (16 MiB)."""

    def cap(self, archive_size: int) -> tuple[int, str]:
        """The most bytes an archive of ``archive_size`` bytes may unpack to, and that
        limit in words."""
        by_ratio = max(self.ratio_floor, self.max_ratio * archive_size)
        if by_ratio < self.max_bytes:
            return by_ratio, f"{self.max_ratio} times its own {archive_size} bytes"
        return self.max_bytes, f"{self.max_bytes} bytes"


@attrs.frozen
class FetchRequest:
    """A parsed BOINC_FETCH_OUTPUT, with the project it was issued for."""

    project: Project
    job: str
    iwd: str
    stderr_file: str
    mode: str  # "ALL" or "SOME"
    specs: tuple[tuple[str, str], ...]
    limits: ArchiveLimits = ArchiveLimits()


def resolve(iwd: Path, name: str) -> Path:
    """A destination: absolute as given, else relative to ``iwd``."""
    p = Path(name)
    return p if p.is_absolute() else iwd / p


def _discard(path: Path) -> bool:
    return str(path) == os.devnull


def safe_logical_name(name: str) -> str:
    """A logical output name from the server, refused (:class:`UnsafeOutput`) unless it is
    a plain file name."""
    return check_output_name(name)


def write_atomic(dest: Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` through a temporary file and a rename."""
    if _discard(dest):
        return
    _require_directory(dest)
    tmp = part_path(dest)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def stdio_pairs(specs: tuple[tuple[str, str], ...], stderr_file: str) -> int:
    """How many trailing pairs are HTCondor's own ``(basename(Out), Out)`` and
    ``(basename(Err), Err)``, which a 9.x gridmanager appends whenever ``output`` is set.

    They are recognised by the last pair's destination being the stderr file itself: the
    gridmanager appends the Err pair (or, when Err equals Out, only the Out pair) with
    exactly that destination, and the Out pair just before it.
    """
    if not specs or specs[-1][1] != stderr_file:
        return 0
    if len(specs) >= 2:
        src, dst = specs[-2]
        if dst != stderr_file and src == posixpath.basename(dst):
            return 2
    return 1


async def fetch_output(
    rpc: BoincRpc, req: FetchRequest, output_names: tuple[str, ...] | None = None
) -> CompletedJob:
    """Fetch what BOINC_FETCH_OUTPUT asks for; return the job's outcome.

    ``output_names``: the job's output names when known (remembered from its submission),
    else they are asked from the server (get_templates).
    """
    iwd = Path(req.iwd)
    if not os.path.isdir(req.iwd or "."):
        raise OutputError(f"output directory {iwd} does not exist")
    names = [safe_logical_name(n) for n in output_names] if output_names is not None else None
    done = await rpc.query_completed_job(req.project, req.job)
    write_atomic(resolve(iwd, req.stderr_file), done.stderr.encode("utf-8", "replace"))
    if done.canonical_resultid == 0:
        # A failed job: its exit status and stderr are all there is.
        return done
    if req.mode == "SOME" and not req.specs:
        return done
    if names is None:
        templates = await rpc.get_templates(req.project, job_name=req.job)
        names = [safe_logical_name(n) for n in templates.output_names]
    await _fetch_files(rpc, req, iwd, names, done.canonical_resultid)
    return done


async def _fetch_files(
    rpc: BoincRpc, req: FetchRequest, iwd: Path, names: list[str], result_id: int
) -> None:
    """Download the output files the request wants, of a job whose outputs are ``names``
    (of its canonical instance ``result_id``): each by itself, or (when the only output is
    a zip archive) unpacked from that archive."""
    specs = _without_stdio(req, set(names))
    if req.mode == "SOME" and not specs:
        return
    renames = {src: resolve(iwd, dst) for src, dst in specs}
    zipped = len(names) == 1 and names[0].lower().endswith(".zip")
    if not zipped:
        _check_known(req.job, renames, names)
    elif names[0] not in renames:
        await _fetch_zip(rpc, req, iwd, names[0], renames, result_id)
        return
    for i, name in enumerate(names):
        dest = _destination(req, iwd, renames, name)
        if dest is not None:
            _require_directory(dest)
            await rpc.download_output(req.project, req.job, i, dest, result_id)


def _destination(req: FetchRequest, iwd: Path, renames: dict[str, Path], name: str) -> Path | None:
    """Where output ``name`` goes, or None when it is not wanted (or goes to /dev/null)."""
    if req.mode == "SOME" and name not in renames:
        return None
    dest = renames.get(name, iwd / name)
    return None if _discard(dest) else dest


def _check_known(job: str, renames: dict[str, Path], names: list[str]) -> None:
    """Refuse a request naming a file that is not one of the job's outputs."""
    unknown = set(renames) - set(names)
    if unknown:
        raise OutputError(
            f"job {job} has no output file named {', '.join(sorted(unknown))} "
            f"(outputs: {', '.join(names) or 'none'})"
        )


def _require_directory(dest: Path) -> None:
    """Refuse a destination whose directory does not exist."""
    if not os.path.isdir(os.path.dirname(dest) or "."):
        raise OutputError(f"directory {dest.parent} does not exist")


def _without_stdio(req: FetchRequest, names: set[str]) -> tuple[tuple[str, str], ...]:
    """The requested pairs minus HTCondor's appended Out/Err pairs that name no output.

    A BOINC job has no standard output, and its stderr is already written to the stderr
    file, so those pairs are satisfied as they are; a pair naming a real output is kept.
    """
    n = stdio_pairs(req.specs, req.stderr_file)
    head, tail = req.specs[: len(req.specs) - n], req.specs[len(req.specs) - n :]
    kept = tuple(pair for pair in tail if pair[0] in names)
    for src, dst in tail:
        if src not in names:
            log.info("%s: %s is the job's stdout or stderr, not a BOINC output", req.job, dst)
    return head + kept


async def _fetch_zip(
    rpc: BoincRpc,
    req: FetchRequest,
    iwd: Path,
    zip_name: str,
    renames: dict[str, Path],
    result_id: int,
) -> None:
    """The only output is a zip archive: unpack it into ``iwd``, then apply the renames."""
    tmp = iwd / f".{zip_name}.download-{os.getpid()}-{random.getrandbits(32):08x}"
    try:
        await rpc.download_output(req.project, req.job, 0, tmp, result_id)
        what = f"output archive {zip_name} of {req.job}"
        _check_entry_count(tmp, what, req.limits)
        try:
            with zipfile.ZipFile(tmp) as zf:
                _unpack(zf, what, req, iwd, renames, tmp.stat().st_size)
        except zipfile.BadZipFile as exc:
            raise RpcError(f"{what} is not a valid zip: {exc}") from None
        except OSError as exc:  # e.g. a member named as a directory another one needs
            raise OutputError(f"{what} cannot be unpacked: {exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _check_entry_count(path: Path, what: str, limits: ArchiveLimits) -> None:
    """Refuse an archive whose end record declares more entries than the limit, before its
    central directory is read into memory."""
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        tail_start = max(0, size - (_EOCD.size + 0xFFFF + _ZIP64_LOCATOR.size + _ZIP64_EOCD.size))
        fh.seek(tail_start)
        tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        return  # not a zip: zipfile says so
    entries = _EOCD.unpack_from(tail, at)[4]
    loc = at - _ZIP64_LOCATOR.size
    if entries == 0xFFFF and loc >= 0 and tail[loc : loc + 4] == b"PK\x06\x07":
        offset = _ZIP64_LOCATOR.unpack_from(tail, loc)[2]
        with open(path, "rb") as fh:
            fh.seek(offset)
            record = fh.read(_ZIP64_EOCD.size)
        if len(record) == _ZIP64_EOCD.size and record[:4] == b"PK\x06\x06":
            entries = _ZIP64_EOCD.unpack(record)[6]
    if entries > limits.max_members:
        raise UnsafeOutput(
            f"{what} has {entries} entries, more than the limit of {limits.max_members}"
        )


def _unpack(
    zf: zipfile.ZipFile,
    what: str,
    req: FetchRequest,
    iwd: Path,
    renames: dict[str, Path],
    archive_size: int,
) -> None:
    """Unpack the members ``req`` asks for, each through a temporary file beside its
    destination, renamed into place only once every member is written within the limits;
    on any refusal nothing is left (temporary files, directories made for members)."""
    limits = req.limits
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise UnsafeOutput(
            f"{what} has {len(infos)} entries, more than the limit of {limits.max_members}"
        )
    chosen = _chosen_members(infos, what, req, iwd, renames)
    cap, words = limits.cap(archive_size)
    declared = sum(m.file_size for m, _ in chosen)
    if declared > cap:
        raise UnsafeOutput(f"{what} declares {declared} bytes, more than the limit of {words}")
    _write_members(zf, chosen, what, cap, words)


def _chosen_members(
    infos: list[zipfile.ZipInfo],
    what: str,
    req: FetchRequest,
    iwd: Path,
    renames: dict[str, Path],
) -> list[tuple[zipfile.ZipInfo, Path]]:
    """The members to unpack and their destinations; any member that is a link or leads
    out of ``iwd`` refuses the whole archive."""
    root = iwd.resolve()
    chosen: list[tuple[zipfile.ZipInfo, Path]] = []
    for m in infos:
        check_member_path(m.filename.removesuffix("/") if m.is_dir() else m.filename, what)
        if stat.S_ISLNK(m.external_attr >> 16):
            raise UnsafeOutput(f"{what}: member {m.filename!r} is a symbolic link")
        if not inside(iwd / m.filename, root):
            raise UnsafeOutput(f"{what}: member {m.filename!r} leads out of {iwd}")
        if m.is_dir() or (req.mode == "SOME" and m.filename not in renames):
            continue
        dest = renames.get(m.filename, iwd / m.filename)
        if not _discard(dest):
            chosen.append((m, dest))
    return chosen


def _write_members(
    zf: zipfile.ZipFile,
    chosen: list[tuple[zipfile.ZipInfo, Path]],
    what: str,
    cap: int,
    words: str,
) -> None:
    """Write the chosen members through temporary files, then rename them all into place;
    on any failure remove the temporary files and the directories made for them."""
    made: list[Path] = []  # directories made for members, deepest last
    parts: list[tuple[str, Path]] = []
    try:
        written = 0
        for m, dest in chosen:
            _make_parents(dest.parent, made)
            part = part_path(dest)
            parts.append((part, dest))
            written += _copy_member(zf, m, part, what, cap - written, words)
        for part, dest in parts:
            os.replace(part, dest)
        parts.clear()
    except BaseException:
        for part, _ in parts:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise


def _make_parents(directory: Path, made: list[Path]) -> None:
    """``mkdir -p directory``, noting each directory made in ``made``."""
    missing: list[Path] = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
        made.append(d)


def _copy_member(
    zf: zipfile.ZipFile, m: zipfile.ZipInfo, part: str, what: str, budget: int, limit: str
) -> int:
    """Write member ``m`` to the new file ``part`` (never through a planted link, not
    world-writable); its size. Refused once it passes ``budget`` (what is left of the
    archive's ``limit``) or its declared size, or when its data is corrupt."""
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    size = 0
    with os.fdopen(fd, "wb") as out:
        try:
            with zf.open(m) as src:
                while chunk := src.read(1 << 16):
                    size += len(chunk)
                    if size > budget:
                        raise UnsafeOutput(f"{what} unpacks to more than the limit of {limit}")
                    if size > m.file_size:
                        raise UnsafeOutput(
                            f"{what}: member {m.filename!r} holds more than the "
                            f"{m.file_size} bytes its header declares"
                        )
                    out.write(chunk)
        except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
            raise UnsafeOutput(
                f"{what}: member {m.filename!r} does not match its header ({exc})"
            ) from None
    return size
