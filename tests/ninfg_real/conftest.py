"""Fixtures of the real-client tests: the Ninf-G bundle, the sample built once per session,
the invoke-server wrappers, and one :class:`Backend` per batch system.

Without the bundle the tests skip (fail under ``GAHP_REQUIRE_NINFG=1``).  A batch system
that is down skips its cases (fail under its ``GAHP_REQUIRE_*``).  LSF refuses root's jobs:
run as root, the LSF cases run the client as the LSF test user (``live_services.LSF_USER``),
in a directory of its own, with an interpreter it may run (the GAHPs' venv).  So do the
Condor cases as the owner of the HTCondor pool (``.ci/htcondor-pool-up.sh``): a pool that
does not run as root runs every job as that user, who must reach the scratch directories.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from live_services import unavailable
from ng_backends import Backend, _run
from ngkit import (
    NgClient,
    Result,
    build_sample,
    find_ng_dir,
    give_tree,
    write_invoke_servers,
)


@pytest.fixture(scope="session")
def ng_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NG_DIR of the bundle (unpacked by ``.ci/ninfg-up.sh`` or here)."""
    if not shutil.which("gcc") or not shutil.which("make"):
        unavailable("GAHP_REQUIRE_NINFG", "gcc/make missing (run `bash .ci/ninfg-up.sh`)")
    found, reason = find_ng_dir(tmp_path_factory.getbasetemp().parent / "ninfg-bundle")
    if found is None:
        unavailable("GAHP_REQUIRE_NINFG", reason)
    return found


@pytest.fixture(scope="session")
def ng_sample(ng_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built pi sample: the Executable, its NRF file and ``ng_test_client``."""
    return build_sample(ng_dir, tmp_path_factory.getbasetemp().parent / "ninfg-build")


@pytest.fixture(scope="session")
def ng_servers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_invoke_servers(tmp_path_factory.mktemp("ng-servers"))


# ---------------------------------------------------------------------- batch systems
@pytest.fixture
def make_client(
    ng_dir: Path, ng_sample: Path, ng_servers: Path, tmp_path: Path
) -> Iterator[Callable[[Backend], NgClient]]:
    """``make_client(backend)``: an :class:`NgClient`; afterwards every client is killed
    and every job its executables recorded is removed from the batch system."""
    made: list[tuple[NgClient, Backend]] = []
    areas: list[Path] = []

    def make(backend: Backend, name: str = "run") -> NgClient:
        if backend.run_as is None:
            client = NgClient(
                ng_dir, ng_sample, ng_servers, backend.kind, tmp_path / name, backend.env
            )
        else:
            area = user_area(ng_dir, ng_sample, backend)
            areas.append(area)
            client = NgClient(
                ng_dir,
                area / "sample",
                area / "servers",
                backend.kind,
                area / name,
                backend.env,
                run_as=backend.run_as,
                python=backend.python,
            )
        made.append((client, backend))
        return client

    yield make
    for client, backend in made:
        client.kill_group()
        for record in Result(client.rundir, 0, "", "").records():
            if not backend.job_gone(record):
                backend.remove(backend.job_of(record))
    for area in areas:
        shutil.rmtree(area, ignore_errors=True)


def user_area(ng_dir: Path, sample: Path, backend: Backend) -> Path:
    """A directory of ``backend.run_as``'s own, outside root's private temporary tree, with
    a copy of the built sample and the invoke-server wrappers: where its client runs."""
    assert backend.run_as is not None
    probe = _run(
        [
            "runuser",
            "-u",
            backend.run_as,
            "--",
            "test",
            "-x",
            str(ng_dir / "test-kit" / "ng-is-tap"),
        ]
    )
    if probe.returncode != 0:
        unavailable(
            "GAHP_REQUIRE_NINFG",
            f"{backend.run_as} cannot reach the Ninf-G bundle at"
            f" {ng_dir} (unpack it with `bash .ci/ninfg-up.sh`)",
        )
    area = Path(tempfile.mkdtemp(prefix=f"gahp-ng-{backend.run_as}-"))
    area.chmod(0o755)
    shutil.copytree(sample, area / "sample", symlinks=True)
    write_invoke_servers(area / "servers", backend.python)
    give_tree(area, backend.run_as)
    return area
