"""Private directories and files on a host shared with other users.

Every directory a GAHP keeps state in, and every file it writes there, must be one that
no other user can have made, replaced or redirected: owned by the effective user, not
writable by group or others, and reached without following a symbolic link. A path that
fails is refused with :class:`UnsafePath`, whose message names the path, its owner and
its mode.

* :func:`private_dir` makes a directory (mode 0700) or checks the one there.
* :func:`open_private` opens a file without following a link: a new one exclusively
  (``O_EXCL``), a reused one checked with ``fstat``.
* :func:`write_private` replaces a file through a fresh ``mkstemp`` file (random name,
  mode 0600) and a rename.
* :func:`check_parent` accepts a directory a file may be created in: private, or owned
  by root (or the user) and sticky when others may write it (``/tmp``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
import tempfile
from pathlib import Path

from gahp_core._errors import GahpError

__all__ = [
    "UnsafePath",
    "check_parent",
    "check_private",
    "open_private",
    "private_dir",
    "write_private",
]

_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH


class UnsafePath(GahpError, PermissionError):
    """A path another user could control: not the effective user's, writable by group or
    others, a symbolic link, or not the kind of file expected."""


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _describe(st: os.stat_result) -> str:
    return f"owner {_owner(st.st_uid)}, mode {stat.filemode(st.st_mode)}"


def _refuse(path: str | os.PathLike[str], st: os.stat_result, why: str) -> UnsafePath:
    me = _owner(os.geteuid())
    return UnsafePath(
        f"refusing {os.fspath(path)}: {why} ({_describe(st)}; this process runs as {me})"
    )


def check_private(path: str | os.PathLike[str], st: os.stat_result, *, directory: bool) -> None:
    """Raise :class:`UnsafePath` unless ``st`` (from ``lstat`` or ``fstat`` of ``path``) is a
    directory (``directory``) or a regular file, owned by the effective user and not
    writable by group or others."""
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, st, "it is a symbolic link")
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        raise _refuse(path, st, f"it is not a {'directory' if directory else 'regular file'}")
    if st.st_uid != os.geteuid():
        raise _refuse(path, st, "it belongs to another user")
    if st.st_mode & _SHARED_WRITE:
        raise _refuse(path, st, "other users may write to it")


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make directory ``path`` with mode 0700 (missing parents too), or check the one that
    is there: a real directory (not a link), the effective user's, not writable by group
    or others. Returns ``path``; :class:`UnsafePath` when it is not safe to use."""
    p = Path(path)
    try:
        os.mkdir(p, 0o700)
    except FileNotFoundError:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(p, 0o700)
    except FileExistsError:
        pass
    check_private(p, os.lstat(p), directory=True)
    return p


def check_parent(path: str | os.PathLike[str]) -> None:
    """Raise :class:`UnsafePath` unless a file may safely be created in directory ``path``:
    it (and, for a link, what it points to) belongs to the effective user or root, and it
    is either not writable by group or others, or sticky (as ``/tmp``: nobody can replace
    another's file there)."""
    me = os.geteuid()
    st = os.lstat(path)
    checked = [st]
    if stat.S_ISLNK(st.st_mode):
        checked.append(os.stat(path))
    for s in checked:
        if s.st_uid not in (me, 0):
            raise _refuse(path, s, "it belongs to another user")
    target = checked[-1]
    if not stat.S_ISDIR(target.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fspath(path))
    if target.st_mode & _SHARED_WRITE and not target.st_mode & stat.S_ISVTX:
        raise _refuse(path, target, "other users may write to it")


def open_private(
    path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, exclusive: bool = False
) -> int:
    """A file descriptor of ``path`` opened with ``flags`` without following a link: with
    ``exclusive`` the file is created (mode 0600) and must not exist; else it is checked
    with ``fstat`` (a regular file, the effective user's, not writable by group or
    others). The caller closes it."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if exclusive:
        flags |= os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, 0o600)  # no wait on a FIFO put there
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EACCES, errno.EPERM):
            # A link, or a file the kernel keeps us from (someone else's in a sticky
            # directory): say which.
            try:
                st = os.lstat(path)
            except OSError:
                raise exc from None
            check_private(path, st, directory=False)
        raise
    try:
        if not exclusive:
            check_private(path, os.fstat(fd), directory=False)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(
    path: str | os.PathLike[str], data: bytes, *, durable: bool = True, mode: int = 0o600
) -> None:
    """Replace ``path`` with ``data``: written to a new file of a random name (``mkstemp``:
    exclusive, mode 0600) in the same directory, on disk (``durable``), set to ``mode``,
    then renamed over ``path``. Readers see the old file or the new one, never a part,
    and nobody else can have opened the new one."""
    head, name = os.path.split(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=head or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if mode != 0o600:
                os.fchmod(fh.fileno(), mode)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
