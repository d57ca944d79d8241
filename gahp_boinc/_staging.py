"""Content-addressed input staging: MD5 physical names, and BOINC command lines."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

from gahp_boinc._errors import StagingError

_EXT_OK = re.compile(r"^\.[A-Za-z0-9_\-. ]*$")
_ARG_PLAIN = re.compile(r"^[A-Za-z0-9_\-.,:/=+@%]+$")
_UNPASSABLE = frozenset("'\"\n\r\\$`")


def physical_name(md5_hex: str, local_name: str) -> str:
    """MD5 of the content plus the local name's extension (from its last dot), as BOINC does."""
    base = os.path.basename(local_name)
    dot = base.rfind(".")
    ext = base[dot:] if dot > 0 else ""
    if ext and not _EXT_OK.match(ext):
        ext = ""  # the server rejects other characters in names
    return md5_hex + ext


def md5_file(path: Path, bufsize: int = 1 << 20) -> str:
    """Lowercase hex MD5 of a file, read in blocks."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while block := fh.read(bufsize):
            h.update(block)
    return h.hexdigest()


class Md5Cache:
    """MD5 of files, remembered by (path, device, inode, size, mtime) so each is read once."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self._entries: OrderedDict[tuple, str] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.bytes_hashed = 0

    def digest(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = md5_file(path)
        with self._lock:
            self.bytes_hashed += st.st_size
            self._entries[key] = value
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def digest_many(self, paths: Sequence[Path]) -> list[str]:
        """Digests of several files (for one worker-pool task)."""
        return [self.digest(p) for p in paths]


def check_input(path: Path) -> None:
    """A clear error unless ``path`` is a readable regular file."""
    try:
        st = path.stat()
    except OSError as exc:
        raise StagingError(f"input file {path}: {exc.strerror or exc}") from None
    if not path.is_file():
        raise StagingError(f"input file {path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise StagingError(f"input file {path} is not readable")
    del st


def command_line(args: Iterable[str]) -> str:
    """Join job arguments into the command line BOINC's job creator splits again.

    The creator groups words only with single quotes and the server wraps the line in
    double quotes, so an argument needing quotes is single-quoted, and one holding a
    quote character (or a line break) cannot be passed faithfully: that is an error.
    """
    out = []
    for arg in args:
        if _ARG_PLAIN.match(arg):
            out.append(arg)
            continue
        if any(c in arg for c in _UNPASSABLE):
            raise StagingError(
                f"argument {arg!r} cannot be passed to a BOINC job: the project's job "
                "creator does not support quotes, backslashes, $, ` or line breaks"
            )
        out.append(f"'{arg}'")
    return " ".join(out)
