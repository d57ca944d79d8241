"""Logging for GAHP servers: to a file or stderr, never stdout, with secrets redacted."""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

REDACTED = "***"
MIN_SECRET = 4
"""Shorter secrets are not masked: they are too common in ordinary text."""


class Redactor(logging.Filter):
    """A logging filter that replaces every registered secret by ``***``."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add(self, secret: str) -> None:
        """Register a secret (ignored when shorter than 4 characters: too common to mask)."""
        if secret and len(secret) >= MIN_SECRET:
            with self._lock:
                self._secrets.add(secret)

    def redact(self, text: str) -> str:
        """Return ``text`` with every registered secret masked."""
        for secret in tuple(self._secrets):  # a snapshot: another thread may add one
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = self.redact(record.getMessage())
            record.msg, record.args = message, None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.redact(record.exc_text)
        return True


REDACTOR = Redactor()
"""The process-wide redactor: every log handler the server sets up masks the secrets
registered with ``REDACTOR.add(secret)`` (``read_secret_file`` registers what it reads)."""


def _file_handler(path: Path) -> logging.Handler:
    """A handler appending to ``path``: its directory made private when missing, else one
    nobody else controls; the file new or the user's own, never reached through a link."""
    from gahp_core._private_paths import check_parent, open_private, private_dir

    parent = path.parent
    if not os.path.lexists(parent):
        private_dir(parent)
    check_parent(parent)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    return logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8", errors="replace"))


def logs_to_file() -> bool:
    """Whether the log set up by :func:`setup_logging` is a file (not stderr, not nowhere)."""
    return any(
        isinstance(h, logging.StreamHandler) and h.stream not in (sys.stderr, sys.__stderr__)
        for h in logging.getLogger().handlers
    )


def _log_file_handler(path: str | os.PathLike[str], stderr_default: bool) -> logging.Handler | None:
    """A handler writing to the file ``path``, or None (said once on stderr) when it cannot."""
    try:
        return _file_handler(Path(path))
    except OSError as exc:
        # A GAHP that cannot write its log still serves: say so once and go on (always
        # when the file is unsafe: someone else may be waiting to read it).
        from gahp_core._private_paths import UnsafePath

        reason = exc.strerror or str(exc)
        if isinstance(exc, UnsafePath):
            print(
                f"warning: not logging to {path}: {exc}",
                file=sys.stderr,
                flush=True,
            )
        elif stderr_default:
            print(
                f"warning: cannot open log file {path}: {reason}; logging warnings to stderr",
                file=sys.stderr,
                flush=True,
            )
    return None


def setup_logging(
    path: str | os.PathLike[str] | None, level: str = "INFO", stderr_default: bool = True
) -> logging.Logger:
    """Configure the ``gahp`` logger hierarchy.

    With ``path`` logs go to that file; ``"-"`` or ``"stderr"`` means stderr; with no
    path, warnings go to stderr when ``stderr_default`` is set, else nowhere.
    Standard output is never used: it carries the protocol.
    """
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    fmt = logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    handler: logging.Handler | None = None
    if path in ("-", "stderr"):
        handler = logging.StreamHandler(sys.stderr)
    elif path:
        handler = _log_file_handler(path, stderr_default)
    if handler is None and stderr_default:
        handler = logging.StreamHandler(sys.stderr)
        level = "WARNING"
    elif handler is None:
        handler = logging.NullHandler()
    handler.setFormatter(fmt)
    handler.addFilter(REDACTOR)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # Libraries are chatty at DEBUG; their lines can carry URLs with secrets too.
    for noisy in ("httpx", "httpcore", "hpack", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    return logging.getLogger("gahp")
