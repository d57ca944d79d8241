"""boinc-gahp's settings (file, environment, command line) and the boinc driver's TLS option:
a boolean is strict, so ``insecure = "false"`` keeps TLS verification on."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest
from test_tls_ca_bundle import https_project, private_ca  # noqa: F401 - fixtures

from gahp_boinc._config import load_config  # private: unit test of the config loader
from gahp_core import ConfigError
from gahp_core.testing import GahpClient
from gahp_lrms import DriverError, get_driver

GAHP = [sys.executable, "-m", "gahp_boinc"]
OPTIONS = (
    "project_url",
    "authenticator_file",
    "timeout",
    "retries",
    "command_timeout",
    "ca_bundle",
    "insecure",
    "max_reply_bytes",
)


def options(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{**dict.fromkeys(OPTIONS), "config": None, **given})


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    for var in (
        "BOINC_GAHP_CONFIG",
        "BOINC_PROJECT_URL",
        "BOINC_AUTHENTICATOR_FILE",
        "BOINC_GAHP_TIMEOUT",
        "BOINC_GAHP_CA_BUNDLE",
        "BOINC_GAHP_INSECURE",
        "BOINC_GAHP_RETRIES",
        "BOINC_GAHP_COMMAND_TIMEOUT",
        "BOINC_GAHP_MAX_REPLY_BYTES",
    ):
        monkeypatch.delenv(var, raising=False)


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gahp.toml"
    path.write_text(text)
    return str(path)


def test_the_defaults():
    c = load_config(options())
    assert (c.timeout, c.verify, c.lease_seconds, c.retries, c.command_deadline) == (
        60.0,
        True,
        3600.0,
        4,
        290.0,
    )


@pytest.mark.parametrize("text", ['"false"', '"no"', '"off"', '"0"', "false", "0"])
def test_insecure_false_in_the_file_keeps_verification_on(text, tmp_path):
    assert load_config(options(config=config_file(tmp_path, f"insecure = {text}\n"))).verify
    assert not load_config(options(config=config_file(tmp_path, "insecure = true\n"))).verify


@pytest.mark.parametrize("text", ["false", "off", "0", "No"])
def test_insecure_false_in_the_environment_keeps_verification_on(text, monkeypatch):
    monkeypatch.setenv("BOINC_GAHP_INSECURE", text)
    assert load_config(options()).verify is True


def test_a_bad_value_is_refused_naming_where_it_was(tmp_path, monkeypatch):
    path = config_file(tmp_path, 'insecure = "maybe"\n')
    with pytest.raises(ConfigError, match=f"^configuration file {path}: insecure must be true"):
        load_config(options(config=path))
    path = config_file(tmp_path, 'timeout = "60"\n')
    with pytest.raises(ConfigError, match="timeout must be a positive number, not '60'$"):
        load_config(options(config=path))
    with pytest.raises(ConfigError, match="^--retries must be a whole number of 0 or more"):
        load_config(options(retries=-1))
    monkeypatch.setenv("BOINC_GAHP_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="^BOINC_GAHP_TIMEOUT must be a positive number"):
        load_config(options())
    monkeypatch.setenv("BOINC_GAHP_TIMEOUT", "12.5")
    assert load_config(options()).timeout == 12.5
    assert load_config(options(timeout=3.0)).timeout == 3.0  # the command line wins


def test_the_project_url_is_one_url_check(tmp_path):
    with pytest.raises(ConfigError, match="^--project-url must start with http:// or https://"):
        load_config(options(project_url="boinc.example.org"))
    path = config_file(tmp_path, 'project_url = "https:///p/"\n')
    with pytest.raises(ConfigError, match="project_url names no host"):
        load_config(options(config=path))


def test_boinc_gahp_with_a_bad_value_answers_the_reason(tmp_path):
    path = config_file(tmp_path, 'insecure = "sometimes"\n')
    c = GahpClient([*GAHP, "--config", path])
    res = c.call("BOINC_PING")
    assert len(res) == 1 and "insecure must be true or false, not 'sometimes'" in res[0], res
    assert c.quit() == 0
    err = c.stderr_text
    lines = [ln for ln in err.splitlines() if "cannot serve" in ln]
    assert len(lines) == 1 and "insecure must be true or false" in lines[0], err
    assert "Traceback" not in err, err


def test_driver_insecure_false_verifies_the_certificate(https_project, tmp_path):  # noqa: F811
    """The bug: ``insecure = "false"`` was true (a non-empty string) and turned TLS off."""
    url, emu = https_project
    auth = tmp_path / "auth"
    auth.write_text(emu.authenticator + "\n")
    config = {"project_url": url, "authenticator_file": str(auth), "retries": 0, "timeout": 5}

    async def ping(settings: dict[str, object], state: str) -> None:
        driver = get_driver("boinc", settings, tmp_path / state)
        try:
            await driver.ping()
        finally:
            await driver.aclose()

    with pytest.raises(DriverError, match="certificate verify failed"):
        asyncio.run(ping({**config, "insecure": "false"}, "verify"))
    asyncio.run(ping({**config, "insecure": "true"}, "insecure"))
    with pytest.raises(DriverError, match="insecure must be true or false, not 'maybe'"):
        get_driver("boinc", {**config, "insecure": "maybe"}, tmp_path / "bad")
