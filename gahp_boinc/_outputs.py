"""BOINC_FETCH_OUTPUT: stderr, output files and renames, written safely into place."""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import random
import shutil
import zipfile
from pathlib import Path

import attrs

from gahp_boinc._errors import OutputError, RpcError
from gahp_boinc._rpc import BoincRpc, CompletedJob, Project, part_path

log = logging.getLogger("gahp.boinc.outputs")


@attrs.frozen
class FetchRequest:
    """A parsed BOINC_FETCH_OUTPUT, with the project it was issued for."""

    project: Project
    job: str
    iwd: str
    stderr_file: str
    mode: str  # "ALL" or "SOME"
    specs: tuple[tuple[str, str], ...]


def resolve(iwd: Path, name: str) -> Path:
    """A destination: absolute as given, else relative to ``iwd``."""
    p = Path(name)
    return p if p.is_absolute() else iwd / p


def _discard(path: Path) -> bool:
    return str(path) == os.devnull


def safe_logical_name(name: str) -> str:
    """A logical output name from the server, refused if it could escape the directory."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise OutputError(f"unsafe output file name from the server: {name!r}")
    return name


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
    done = await rpc.query_completed_job(req.project, req.job)
    write_atomic(resolve(iwd, req.stderr_file), done.stderr.encode("utf-8", "replace"))
    if done.canonical_resultid == 0:
        # A failed job: its exit status and stderr are all there is.
        return done
    if req.mode == "SOME" and not req.specs:
        return done
    if output_names is None:
        output_names = (await rpc.get_templates(req.project, job_name=req.job)).output_names
    await _fetch_files(rpc, req, iwd, [safe_logical_name(n) for n in output_names])
    return done


async def _fetch_files(rpc: BoincRpc, req: FetchRequest, iwd: Path, names: list[str]) -> None:
    """Download the output files the request wants, of a job whose outputs are ``names``:
    each by itself, or (when the only output is a zip archive) unpacked from that archive."""
    specs = _without_stdio(req, set(names))
    if req.mode == "SOME" and not specs:
        return
    renames = {src: resolve(iwd, dst) for src, dst in specs}
    zipped = len(names) == 1 and names[0].lower().endswith(".zip")
    if not zipped:
        _check_known(req.job, renames, names)
    elif names[0] not in renames:
        await _fetch_zip(rpc, req, iwd, names[0], renames)
        return
    for i, name in enumerate(names):
        if req.mode == "SOME" and name not in renames:
            continue
        dest = renames.get(name, iwd / name)
        if _discard(dest):
            continue
        _require_directory(dest)
        await rpc.download_output(req.project, req.job, i, dest)


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
    rpc: BoincRpc, req: FetchRequest, iwd: Path, zip_name: str, renames: dict[str, Path]
) -> None:
    """The only output is a zip archive: unpack it into ``iwd``, then apply the renames."""
    tmp = iwd / f".{zip_name}.download-{os.getpid()}-{random.getrandbits(32):08x}"
    try:
        await rpc.download_output(req.project, req.job, 0, tmp)
        try:
            with zipfile.ZipFile(tmp) as zf:
                members = [m for m in zf.infolist() if not m.is_dir()]
                for m in members:
                    name = m.filename
                    target = (iwd / name).resolve()
                    if (
                        Path(name).is_absolute()
                        or ".." in Path(name).parts
                        or not _inside(target, iwd.resolve())
                    ):
                        raise OutputError(f"unsafe path in output archive: {name!r}")
                for m in members:
                    if req.mode == "SOME" and m.filename not in renames:
                        continue
                    dest = renames.get(m.filename, iwd / m.filename)
                    if _discard(dest):
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    part = dest.with_name(
                        f".{dest.name}.part-{os.getpid()}-{random.getrandbits(32):08x}"
                    )
                    try:
                        # A new file (never through a planted link), not world-writable.
                        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        with zf.open(m) as src, os.fdopen(fd, "wb") as out:
                            shutil.copyfileobj(src, out)
                        os.replace(part, dest)
                    finally:
                        if part.exists():
                            part.unlink()
        except zipfile.BadZipFile:
            raise RpcError(f"output archive {zip_name} of {req.job} is not a valid zip") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True
