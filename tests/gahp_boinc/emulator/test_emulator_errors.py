"""The emulator's exceptions derive from EmulatorError, apart from the GAHP's."""

from __future__ import annotations

from exception_roots import exception_classes, strays

from gahp_boinc import BoincError
from gahp_boinc.emulator import EmulatorError


def test_every_emulator_exception_derives_from_emulator_error():
    classes = exception_classes("gahp_boinc.emulator")
    assert len(classes) >= 2
    assert strays(EmulatorError, "gahp_boinc.emulator") == []
    assert not any(issubclass(cls, BoincError) for cls in classes)
