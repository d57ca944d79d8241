import logging

from gahp_core import REDACTOR
from gahp_core._logs import setup_logging


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
