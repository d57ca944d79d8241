"""The real Ninf-G 5.0.0 client through ``ng_invoke_server.Slurm``, ``.SGE``, ``.PBS`` and
``.LSF``.

These share the live batch systems with the other batch-system tests (the ``batch_env``
fixture puts the module into their xdist group).  Handles per test are capped by the
system's slots: an executable ends only when its handle is destructed, so more jobs than
slots would deadlock the client.
"""

from __future__ import annotations

import pytest
import scenarios
from ng_backends import Backend, backend_for

KINDS = ["Slurm", "SGE", "PBS", "LSF"]


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, batch_env) -> Backend:
    return backend_for(request.param, batch_env)


class TestCommon(scenarios.CommonCases):
    pass
