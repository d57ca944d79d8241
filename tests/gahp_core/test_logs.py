import logging
import os

import pytest

from gahp_core import REDACTOR
from gahp_core._logs import setup_logging  # private: white-box test of logging


def test_secrets_are_redacted_in_log_files(tmp_path):
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    path = tmp_path / "gahp.log"
    log = setup_logging(path, "DEBUG")
    REDACTOR.add("s3cr3t-authenticator")
    log.info("selected project with %s", "s3cr3t-authenticator")
    try:
        raise ValueError("bad s3cr3t-authenticator")
    except ValueError:
        log.exception("failed")
    for h in root.handlers:
        h.flush()
        h.close()
    root.handlers[:], root.level = saved[0], saved[1]
    text = path.read_text()
    assert "s3cr3t" not in text
    assert "selected project with ***" in text
    assert "bad ***" in text
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def _restoring_handlers(fn):
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        return fn()
    finally:
        for h in root.handlers:
            h.close()
        root.handlers[:], root.level = saved[0], saved[1]


@pytest.mark.parametrize("quiet", [False, True])
def test_a_log_path_that_is_a_link_is_not_used_and_stderr_says_so(tmp_path, capsys, quiet):
    target = tmp_path / "theirs.log"
    target.write_text("")
    (tmp_path / "gahp.log").symlink_to(target)

    def run():
        log = setup_logging(tmp_path / "gahp.log", "DEBUG", stderr_default=not quiet)
        log.warning("a line that must not reach their file")

    _restoring_handlers(run)
    assert target.read_text() == ""
    assert f"not logging to {tmp_path / 'gahp.log'}" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_log_file_or_directory_of_another_user_is_not_used(tmp_path, capsys):
    theirs = tmp_path / "theirs.log"
    theirs.write_text("")
    os.chown(theirs, 65534, 65534)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # others may write and it is not sticky: they could swap the log

    def run():
        setup_logging(theirs, "INFO").warning("hello")
        setup_logging(shared / "gahp.log", "INFO").warning("hello")

    _restoring_handlers(run)
    err = capsys.readouterr().err
    assert "belongs to another user" in err and "other users may write" in err
    assert theirs.read_text() == "" and not (shared / "gahp.log").exists()
