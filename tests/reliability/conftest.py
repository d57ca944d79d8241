"""Fixtures of the reliability tests: an emulator, a boinc-gahp on it, input files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from relkit import BOINC_GAHP

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorServer]:
    srv = EmulatorServer(state_dir=tmp_path / "emu", job_delay=0.05, volunteers=2, inline_apps=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def gahp_log(tmp_path: Path) -> Path:
    return tmp_path / "gahp.log"


@pytest.fixture
def gahp(gahp_log: Path) -> Iterator[GahpClient]:
    c = GahpClient([*BOINC_GAHP, "--log", str(gahp_log), "--log-level", "DEBUG", "--timeout", "3"])
    yield c
    c.close()


@pytest.fixture
def input_file(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    p = d / "a.txt"
    p.write_text("alpha\n")
    return p
