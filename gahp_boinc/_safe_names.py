"""Names from a BOINC server used as local paths: checked before any use.

A server (or anyone on the path to an ``http://`` project) chooses the output names of a
job's templates and the member names of its zip outputs. They become paths only through
these checks: a plain name (or, in an archive, a relative path of plain names), and a file
read or written only where it resolves inside its directory, never through a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gahp_boinc._errors import UnsafeOutput

MAX_NAME_BYTES = 255
"""The longest file name component (NAME_MAX of Linux file systems), in UTF-8 bytes."""
MAX_PATH_BYTES = 1024
"""The longest relative path of an archive member, in UTF-8 bytes."""


def _bad_component(part: str) -> str | None:
    """What is wrong with one path component; None when it is a plain name."""
    if not part:
        return "an empty name"
    if part in (".", ".."):
        return f"{part!r} is not a file name"
    if "\\" in part:
        return "a backslash"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in part):
        return "a control character"
    try:
        size = len(part.encode("utf-8"))
    except UnicodeEncodeError:
        return "a name that is not valid Unicode"
    if size > MAX_NAME_BYTES:
        return f"a name longer than {MAX_NAME_BYTES} bytes"
    return None


def check_output_name(name: str, what: str = "output file name") -> str:
    """``name`` if it is a plain file name (one component), else :class:`UnsafeOutput`.

    Refused: empty, ``.``/``..``, absolute or holding ``/`` or ``\\``, NUL and other
    control characters, longer than :data:`MAX_NAME_BYTES`.
    """
    problem = "a slash" if "/" in name else _bad_component(name)
    if problem:
        raise UnsafeOutput(f"unsafe {what} from the server ({problem}): {name[:300]!r}")
    return name


def check_member_path(name: str, what: str = "archive member") -> str:
    """``name`` if it is a relative path of plain names (``dir/file``), else
    :class:`UnsafeOutput`: absolute, any ``..``, ``.`` or empty component, and the
    refusals of :func:`check_output_name` for each component."""
    problem: str | None = None
    if name.startswith("/"):
        problem = "an absolute path"
    elif len(name.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        problem = f"a path longer than {MAX_PATH_BYTES} bytes"
    else:
        problem = next(filter(None, map(_bad_component, name.split("/"))), None)
    if problem:
        raise UnsafeOutput(f"unsafe {what} from the server ({problem}): {name[:300]!r}")
    return name


def inside(path: Path | str, root: Path | str) -> bool:
    """Whether ``path`` resolves (through any link) inside the directory ``root``."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())


def open_inside(root: Path, rel: str) -> int | None:
    """A read-only descriptor on the regular file ``root/rel``, which must resolve inside
    ``root`` and is never a link (``O_NOFOLLOW``); None when there is no such file.
    :class:`UnsafeOutput` for a link, or a path leading out of ``root``."""
    path = root / rel
    if not inside(path.parent, root):
        raise UnsafeOutput(f"{path} is outside {root}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeOutput(f"{path} is a symbolic link: not followed") from None
        raise UnsafeOutput(f"cannot open {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeOutput(f"{path} is not a regular file")
    return fd
