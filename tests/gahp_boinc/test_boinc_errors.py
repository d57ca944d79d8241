"""gahp_boinc's exceptions derive from BoincError (the emulator's have their own root)."""

from __future__ import annotations

from exception_roots import exception_classes, strays

from gahp_boinc import (
    AccessDenied,
    BadAuthenticator,
    BoincError,
    NoOutput,
    NoSuchApp,
    NoSuchBatch,
    NoSuchJob,
    OutputError,
    RpcError,
    StagingError,
)


def test_every_boinc_exception_derives_from_boinc_error():
    assert len(exception_classes("gahp_boinc", exclude=("gahp_boinc.emulator",))) >= 5
    assert strays(BoincError, "gahp_boinc", exclude=("gahp_boinc.emulator",)) == []
    for cls in (RpcError, OutputError, StagingError):
        assert issubclass(cls, BoincError)
    for cls in (BadAuthenticator, AccessDenied, NoSuchApp, NoSuchBatch, NoSuchJob, NoOutput):
        assert issubclass(cls, RpcError)
        assert cls("x", code=-1, retryable=True).retryable
