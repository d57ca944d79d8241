"""gahp_lrms's exceptions derive from DriverError."""

from __future__ import annotations

from exception_roots import strays

from gahp_lrms import DriverError


def test_every_lrms_exception_derives_from_driver_error():
    assert strays(DriverError, "gahp_lrms") == []
