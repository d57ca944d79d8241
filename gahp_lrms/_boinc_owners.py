"""Which process owns the BOINC jobs queued in a state directory.

A process owns the jobs it queues while it holds a lock (``flock``) on ``owners/<id>``;
jobs queued by a process that is gone (its lock free) are adopted by the next one, which
submits them. A process still running keeps its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from gahp_core import open_private, private_dir


class Owners:
    """This process's ownership lock and the locks of the dead owners it adopted from."""

    def __init__(self, owners_dir: Path) -> None:
        self.dir = owners_dir
        private_dir(self.dir)
        self.me = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        fd = self._lock(self.me, wait=True)
        assert fd is not None
        self.fd = fd
        self._adopted: dict[str, int] = {}  # owner id -> fd of its lock, held until recovered

    def _lock(self, owner: str, wait: bool = False) -> int | None:
        """An fd holding the lock of ``owner``, or None when its process holds it."""
        fd = open_private(self.dir / owner, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            os.close(fd)
            return None
        return fd

    def adopt(self, queued: Iterable[tuple[str, str]]) -> set[str]:
        """Of the queued ``(job, owner)``, the jobs whose owner is gone: now ours."""
        return {job for job, owner in queued if self._orphaned(owner)}

    def _orphaned(self, owner: str) -> bool:
        if owner == self.me:
            return False
        if not owner or owner in self._adopted:
            return True
        if not all(c.isalnum() or c == "-" for c in owner):
            return False
        fd = self._lock(owner)
        if fd is None:
            return False  # a live blahpd on this state directory submits it
        self._adopted[owner] = fd
        return True

    def forget_dead(self, min_age_s: float = 300.0) -> None:
        """Remove the lock files of processes gone long ago (not of one just starting)."""
        now = time.time()
        for path in self.dir.iterdir():
            owner = path.name
            if owner == self.me or owner in self._adopted:
                continue
            try:
                if now - path.stat().st_mtime < min_age_s:
                    continue
            except OSError:
                continue
            fd = self._lock(owner)
            if fd is not None:
                with contextlib.suppress(OSError):
                    path.unlink()
                os.close(fd)

    def release_adopted(self) -> None:
        """The orphans are recovered: drop the lock files of their dead owners."""
        for owner, fd in self._adopted.items():
            with contextlib.suppress(OSError):
                (self.dir / owner).unlink()
            os.close(fd)
        self._adopted.clear()
