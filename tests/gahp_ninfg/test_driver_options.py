"""``--driver-option KEY=VALUE``: the text of a number is a number, so the driver's typed
options take it; a wrong value is refused at startup naming the key."""

from __future__ import annotations

import pytest

from gahp_lrms import DriverError, get_driver
from gahp_lrms.base import ThreadedDriver
from gahp_ninfg.backend import _driver_options  # private: unit test of the option parser


def test_numbers_given_as_text_are_numbers(tmp_path):
    options = _driver_options(
        [
            "command_timeout=60",
            "status_interval=2.5",
            f"bin_dir={tmp_path}",
            "suspend_running=false",
        ]
    )
    assert options == {
        "command_timeout": 60,
        "status_interval": 2.5,
        "bin_dir": str(tmp_path),
        "suspend_running": "false",
    }
    drv = get_driver("slurm", options, tmp_path / "state")
    assert isinstance(drv, ThreadedDriver)
    assert drv.blocking.timeout == 60.0 and drv.blocking.suspend_running is False  # type: ignore[attr-defined]


def test_a_wrong_value_is_refused_naming_the_key(tmp_path):
    with pytest.raises(DriverError, match="^slurm driver: command_timeout must be a positive"):
        get_driver("slurm", _driver_options(["command_timeout=soon"]), tmp_path)
    with pytest.raises(DriverError, match="is not KEY=VALUE"):
        _driver_options(["command_timeout"])
