"""Fixtures for the job-driver tests (they live in lrms_helpers, importable by a unique name)."""

from lrms_helpers import *  # noqa: F403
from lrms_helpers import _no_injection  # noqa: F401 - an autouse fixture
