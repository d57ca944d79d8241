"""The one rule for tests of a real service (Slurm, Grid Engine, HTCondor, the BOINC server):
without it they skip with the reason; under its ``GAHP_REQUIRE_*=1`` (CI) they fail."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(require: str, reason: str) -> NoReturn:
    """The service is not there: skip with ``reason``, or fail when ``$require`` is 1."""
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {reason}", pytrace=False)
    pytest.skip(reason)
