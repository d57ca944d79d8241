"""gahp_blah's exceptions derive from BlahError; error results are phrased and masked."""

from __future__ import annotations

import asyncio

import pytest
from exception_roots import strays

from gahp_blah import BlahError
from gahp_blah.arguments import SyntaxProblem
from gahp_blah.backend import Failure, _errors  # private: unit test of the error wrapper
from gahp_blah.jobids import BadJobId, parse_job_id
from gahp_core import REDACTOR
from gahp_lrms import DriverError

AUTH = "0123456789abcdef0123456789abcdef_s3cr3t"


def test_every_blah_exception_derives_from_blah_error():
    assert strays(BlahError, "gahp_blah") == []
    assert issubclass(BadJobId, ValueError) and issubclass(SyntaxProblem, ValueError)


def _result_text(exc: BaseException) -> str:
    async def handler(args):
        raise exc

    with pytest.raises(Failure) as info:
        asyncio.run(_errors(handler)(()))
    return str(info.value)


@pytest.fixture
def redactor(monkeypatch):
    monkeypatch.setattr(REDACTOR, "_secrets", set())
    return REDACTOR


def test_failures_are_phrased_for_the_client(redactor):
    assert _result_text(DriverError("sbatch: error: invalid partition")) == (
        "sbatch: error: invalid partition"
    )
    with pytest.raises(BadJobId) as bad:
        parse_job_id("nonsense")
    assert _result_text(bad.value) == str(bad.value)
    assert _result_text(Failure("proxy file /x is not a readable file")) == (
        "proxy file /x is not a readable file"
    )
    assert _result_text(PermissionError(13, "Permission denied", "/x")) == (
        "local file error: [Errno 13] Permission denied: '/x'"
    )
    assert _result_text(KeyError("spec")) == "internal error: KeyError: 'spec'"


def test_an_authenticator_never_reaches_the_client(redactor):
    redactor.add(AUTH)
    for exc in (
        DriverError(f"HTTP 500 from https://p.example/job_file.php?auth_str={AUTH}"),
        Failure(f"no project for {AUTH}"),
        OSError(f"cannot write {AUTH}"),
        RuntimeError(f"unexpected {AUTH}"),
    ):
        text = _result_text(exc)
        assert AUTH not in text and "***" in text, text
