"""BLAH_PING of the boinc driver: the configured project, or "up" when jobs name theirs."""

from __future__ import annotations

import asyncio
import socket

import pytest

from gahp_boinc.emulator import EmulatorServer
from gahp_lrms import DriverError, get_driver


def test_no_configured_project_is_up(tmp_path):
    """Jobs carry their own project (+remote_BoincProjectUrl): nothing to ping, and a failed
    ping would make HTCondor 25 mark the resource down and never submit them."""
    asyncio.run(get_driver("boinc", {}, tmp_path).ping())


def test_the_configured_project_is_pinged(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "emu", port=0) as emu:
        auth = tmp_path / "auth"
        auth.write_text(emu.authenticator + "\n")
        config = {"project_url": emu.url, "authenticator_file": str(auth)}
        asyncio.run(get_driver("boinc", config, tmp_path / "ok").ping())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    down = {
        "project_url": f"http://127.0.0.1:{closed}/p/",
        "authenticator_file": str(auth),
        "retries": 0,
        "timeout": 2,
    }
    with pytest.raises(DriverError):
        asyncio.run(get_driver("boinc", down, tmp_path / "down").ping())


def test_a_half_configured_project_is_a_clear_error(tmp_path):
    with pytest.raises(DriverError, match="no BOINC project"):
        asyncio.run(
            get_driver("boinc", {"authenticator_file": str(tmp_path / "a")}, tmp_path).ping()
        )
