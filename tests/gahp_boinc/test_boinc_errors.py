"""gahp_boinc's exceptions derive from BoincError (the emulator's have their own root)."""

from __future__ import annotations

from exception_roots import exception_classes, strays

from gahp_boinc import BoincError
from gahp_boinc._outputs import OutputError
from gahp_boinc._replies import RpcError
from gahp_boinc._staging import StagingError


def test_every_boinc_exception_derives_from_boinc_error():
    assert len(exception_classes("gahp_boinc", exclude=("gahp_boinc.emulator",))) >= 5
    assert strays(BoincError, "gahp_boinc", exclude=("gahp_boinc.emulator",)) == []
    for cls in (RpcError, OutputError, StagingError):
        assert issubclass(cls, BoincError)
