"""The lock through which the tests share the live batch systems (tests/conftest.py): shared
holders run together, an exclusive holder (an outage test) runs alone."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from live_services import BatchLock

PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, {mode} | fcntl.LOCK_NB)
except BlockingIOError:
    print("busy")
else:
    print("got")
"""


def _other_process_gets(path: Path, mode: str) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(mode=mode), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return out.strip() == "got"


def test_shared_holders_together_an_exclusive_one_alone(tmp_path: Path) -> None:
    path = tmp_path / "batch.lock"
    lock = BatchLock(str(path))
    lock.hold(fcntl.LOCK_SH)
    assert _other_process_gets(path, "fcntl.LOCK_SH")
    assert not _other_process_gets(path, "fcntl.LOCK_EX")  # an outage test waits
    lock.hold(fcntl.LOCK_EX)
    assert not _other_process_gets(path, "fcntl.LOCK_SH")  # the others wait for the outage
    lock.release()
    assert _other_process_gets(path, "fcntl.LOCK_EX")


def test_a_lock_file_not_ours_alone_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError):
        BatchLock(str(tmp_path / "link")).hold(fcntl.LOCK_SH)
    loose = tmp_path / "loose"
    loose.write_text("")
    os.chmod(loose, 0o666)
    with pytest.raises(RuntimeError, match="writable by us only"):
        BatchLock(str(loose)).hold(fcntl.LOCK_SH)
