"""gahp_core's exception root and the text of an error result."""

from __future__ import annotations

import pytest
from exception_roots import exception_classes, strays

import gahp_core
from gahp_core import (
    REDACTOR,
    BackendNotFound,
    BadRequest,
    ConfigError,
    GahpError,
    Refused,
    Unavailable,
    error_text,
    read_secret_file,
)
from gahp_core.testing import GahpTimeout

AUTH = "0123456789abcdef0123456789abcdef_s3cr3t"


@pytest.fixture
def redactor(monkeypatch):
    """The process-wide redactor, emptied for the test."""
    monkeypatch.setattr(REDACTOR, "_secrets", set())
    return REDACTOR


def test_every_core_exception_derives_from_gahp_error():
    assert len(exception_classes("gahp_core")) >= 8
    assert strays(GahpError, "gahp_core") == []
    assert gahp_core.GahpError is GahpError


def test_builtin_bases_are_kept():
    assert issubclass(GahpTimeout, TimeoutError)
    assert not issubclass(GahpTimeout, AssertionError)
    assert issubclass(BackendNotFound, LookupError)
    for cls in (BadRequest, Refused, Unavailable, ConfigError):
        assert issubclass(cls, GahpError)


def test_an_expected_failure_is_its_message(redactor):
    assert error_text(Refused("  no such job \n")) == "no such job"
    assert error_text(Refused("")) == "Refused"
    assert error_text(ValueError("bad"), expected=ValueError) == "bad"
    assert error_text(ValueError("bad"), expected=(KeyError, ValueError)) == "bad"


def test_local_and_internal_errors_say_so(redactor):
    exc = FileNotFoundError(2, "No such file or directory", "/x/in.txt")
    assert error_text(exc) == "local file error: [Errno 2] No such file or directory: '/x/in.txt'"
    assert error_text(KeyError("k")) == "internal error: KeyError: 'k'"
    assert error_text(RuntimeError()) == "internal error: RuntimeError:"


def test_an_authenticator_never_appears(redactor):
    url = f"https://project.example/get_output.php?auth_str={AUTH}&job=7"
    for exc, expected in (
        (Refused(f"HTTP 404 for {url}"), GahpError),
        (OSError(f"cannot open {AUTH}.tmp"), GahpError),
        (RuntimeError(f"{AUTH}: {AUTH}"), GahpError),
    ):
        text = error_text(exc, secrets=[AUTH], expected=expected)
        assert AUTH not in text and "s3cr3t" not in text, text
        assert "***" in text
    assert error_text(Refused(url), secrets=[AUTH]) == (
        "https://project.example/get_output.php?auth_str=***&job=7"
    )


def test_registered_secrets_are_masked_and_short_ones_are_not(redactor):
    assert AUTH in error_text(Refused(AUTH))
    redactor.add(AUTH)
    assert error_text(Refused(f"echo {AUTH}")) == "echo ***"
    assert error_text(Refused("a b"), secrets=["a"]) == "a b"  # too short to mask


def test_a_secret_read_from_a_file_is_registered(redactor, tmp_path):
    path = tmp_path / "authenticator"
    path.write_text(AUTH + "\n")
    assert read_secret_file(path, "authenticator") == AUTH
    assert error_text(Refused(f"bad {AUTH}")) == "bad ***"
