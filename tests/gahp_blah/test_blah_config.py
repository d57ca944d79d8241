"""blahpd.toml, typed: the top level, [site] and every [driver.NAME] table are checked at
startup; a wrong type or an unknown key is refused naming the key, and blahpd answers every
request with that reason (one line on stderr, no traceback)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pytest

from gahp_blah.config import load_config
from gahp_core import ConfigError
from gahp_core.testing import GahpClient

BLAHPD = [sys.executable, "-m", "gahp_blah"]


def load(tmp_path: Path, text: str):
    path = tmp_path / "blahpd.toml"
    path.write_text(text)
    return load_config(argparse.Namespace(config=str(path), state_dir=None))


def refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "blahpd.toml"
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    assert str(info.value) == f"configuration file {path}: {message}"


def test_good_values_are_typed(tmp_path):
    c = load(
        tmp_path,
        f'state_dir = "{tmp_path}/s"\ndrivers = ["fork", "slurm"]\n'
        '[driver.slurm]\nsuspend_running = "false"\ncommand_timeout = 5\n'
        "[site]\nlocal_submit_attributes_timeout = 2\n",
    )
    assert c.state_dir == tmp_path / "s" and c.drivers == ("fork", "slurm")
    assert c.site.local_submit_attributes_timeout == 2.0
    assert c.driver_options["slurm"]["suspend_running"] == "false"  # read as false by the driver


def test_driver_tables_are_checked_at_startup(tmp_path):
    refused(
        tmp_path,
        '[driver.boinc]\ninsecure = "maybe"\n',
        "driver.boinc.insecure must be true or false, not 'maybe'",
    )
    refused(
        tmp_path,
        '[driver.slurm]\ncommand_timeout = "30"\n',
        "driver.slurm.command_timeout must be a positive number, not '30'",
    )
    refused(
        tmp_path,
        '[driver.sge]\nparalel_environment = "smp"\n',
        "unknown configuration key driver.sge.paralel_environment (known: accounting_wait_s,"
        " bin_dir, cancel_wait_s, command_timeout, parallel_environment, sge_cell,"
        " sge_qmaster_port, sge_root, stale_limit_s, status_interval, status_registry,"
        " submit_timeout, suspend_running)",
    )
    refused(
        tmp_path,
        '[driver.boinc]\nproject_url = "boinc.example.org/p/"\n',
        "driver.boinc.project_url must start with http:// or https://: 'boinc.example.org/p/'",
    )


def test_the_top_level_and_site_are_checked(tmp_path):
    refused(tmp_path, "state_dir = 7\n", "state_dir must be a path, not 7")
    refused(tmp_path, 'drivers = "slurm"\n', "drivers must be a list of driver names, not 'slurm'")
    refused(
        tmp_path, "default_gridtype = 3\n", "default_gridtype must be a non-empty string, not 3"
    )
    refused(
        tmp_path,
        '[site]\nlocal_submit_attributes_timeout = "30"\n',
        "site.local_submit_attributes_timeout must be a positive number, not '30'",
    )
    refused(
        tmp_path,
        "[site]\nlocal_submit_attributes_setup_args = [1]\n",
        "site.local_submit_attributes_setup_args must be a list of attribute names, not [1]",
    )


def test_blahpd_with_a_bad_option_answers_the_reason_naming_the_key(tmp_path):
    conf = tmp_path / "blahpd.toml"
    conf.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[driver.slurm]\nsuspend_running = "sometimes"\n'
    )
    c = GahpClient([*BLAHPD, "--config", str(conf)])
    assert c.banner.startswith("$GahpVersion:")
    key = "driver.slurm.suspend_running must be true or false, not 'sometimes'"
    # every request, even one for another driver: nothing is served on a bad configuration
    res = c.call("BLAH_PING", "fork")
    assert res[0] == "1" and key in res[1] and str(conf) in res[1], res
    res = c.call("BLAH_JOB_SUBMIT", '[Cmd="/bin/true"; gridtype="fork"; Iwd="/tmp"]')
    assert len(res) == 3 and res[0] == "1" and key in res[1], res
    assert c.quit() == 0
    time.sleep(0.1)
    err = c.stderr_text
    lines = [ln for ln in err.splitlines() if "cannot serve" in ln]
    assert len(lines) == 1 and key in lines[0], err
    assert "Traceback" not in err, err
