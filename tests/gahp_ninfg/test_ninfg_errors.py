"""gahp_ninfg's exceptions derive from NinfgError."""

from __future__ import annotations

from exception_roots import strays

from gahp_ninfg import NinfgError
from gahp_ninfg.attributes import AttributeProblem


def test_every_ninfg_exception_derives_from_ninfg_error():
    assert strays(NinfgError, "gahp_ninfg") == []
    assert issubclass(AttributeProblem, NinfgError)
    assert issubclass(AttributeProblem, ValueError)  # still raised where values are parsed
