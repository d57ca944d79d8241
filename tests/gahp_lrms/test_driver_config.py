"""Each driver's options, typed (gahp_lrms.config): strict booleans, numbers that are numbers,
unknown keys refused naming the key, and the defaults the operator guides document."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest
from lrms_helpers import sync_driver

from gahp_lrms import DriverError, driver_config, get_driver
from gahp_lrms.base import CommandDriver
from gahp_lrms.config import (
    BoincDriverConfig,
    CommandConfig,
    CondorConfig,
    ForkConfig,
    LsfConfig,
    PbsConfig,
    SgeConfig,
    SlurmConfig,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {
    "fork": ForkConfig,
    "slurm": SlurmConfig,
    "pbs": PbsConfig,
    "sge": SgeConfig,
    "lsf": LsfConfig,
    "boinc": BoincDriverConfig,
    "condor": CondorConfig,
}


def base(name: str, tmp_path: Path) -> dict[str, Any]:
    """Options that let the driver be built here without its batch system."""
    if name in ("fork", "boinc", "condor"):
        return {}
    return {"bin_dir": str(tmp_path / "bin")}  # never run


def test_every_driver_reads_its_options_through_its_config_class(tmp_path):
    for name, cls in CONFIGS.items():
        drv = get_driver(name, base(name, tmp_path), tmp_path / name)
        assert type(getattr(drv, "blocking", drv)).config_class is cls
        assert isinstance(drv.settings, cls)


@pytest.mark.parametrize("name", ["slurm", "sge"])
@pytest.mark.parametrize(
    "value, expected",
    [("false", False), ("no", False), (False, False), ("true", True), (True, True), ("on", True)],
)
def test_suspend_running_is_a_strict_boolean(name, value, expected, tmp_path):
    drv = sync_driver(name, {**base(name, tmp_path), "suspend_running": value}, tmp_path)
    assert drv.suspend_running is expected  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["slurm", "sge"])
def test_suspend_running_refuses_a_word_it_does_not_know(name, tmp_path):
    message = f"^{name} driver: suspend_running must be true or false, not 'sometimes'$"
    with pytest.raises(DriverError, match=message):
        sync_driver(name, {**base(name, tmp_path), "suspend_running": "sometimes"}, tmp_path)


@pytest.mark.parametrize("value", ["false", "no", "off", "0", False, 0])
def test_insecure_false_keeps_tls_verification_on(value, tmp_path):
    drv = sync_driver("boinc", {"insecure": value}, tmp_path)
    assert drv.settings.insecure is False  # type: ignore[attr-defined]


def test_pbs_slurm_status_and_status_registry_are_strict(tmp_path):
    drv = sync_driver("pbs", {**base("pbs", tmp_path), "slurm_status": "false"}, tmp_path)
    assert drv.settings.slurm_status is False  # type: ignore[attr-defined]
    assert drv._slurm is None  # type: ignore[attr-defined]
    with pytest.raises(DriverError, match="^pbs driver: slurm_status must be true or false"):
        sync_driver("pbs", {**base("pbs", tmp_path), "slurm_status": "yes please"}, tmp_path)
    with pytest.raises(DriverError, match="^pbs driver: flavor must be one of auto, pbspro"):
        sync_driver("pbs", {**base("pbs", tmp_path), "flavor": "openpbs"}, tmp_path)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_an_unknown_key_is_refused_with_its_name(name, tmp_path):
    with pytest.raises(
        DriverError, match=f"^{name} driver: unknown configuration key partiton \\(known: "
    ):
        sync_driver(name, {**base(name, tmp_path), "partiton": "short"}, tmp_path)


NUMBERS = {
    "fork": "kill_grace_s",
    "slurm": "command_timeout",
    "pbs": "submit_timeout",
    "sge": "accounting_wait_s",
    "lsf": "cancel_wait_s",
    "boinc": "batch_max_jobs",
}


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_a_string_where_a_number_goes_is_refused(name, tmp_path):
    key = NUMBERS[name]
    with pytest.raises(DriverError, match=f"^{name} driver: {key} must be .*, not '30'$"):
        sync_driver(name, {**base(name, tmp_path), key: "30"}, tmp_path)
    with pytest.raises(DriverError, match=f"^{name} driver: {key} must be .*, not true$"):
        sync_driver(name, {**base(name, tmp_path), key: True}, tmp_path)


def test_numbers_out_of_range_are_refused(tmp_path):
    slurm = base("slurm", tmp_path)
    with pytest.raises(DriverError, match="command_timeout must be a positive number, not 0$"):
        sync_driver("slurm", {**slurm, "command_timeout": 0}, tmp_path)
    with pytest.raises(DriverError, match="submit_attempts must be a whole number above 0"):
        sync_driver("boinc", {"submit_attempts": 0}, tmp_path)
    with pytest.raises(DriverError, match="retries must be a whole number of 0 or more"):
        sync_driver("boinc", {"retries": 2.5}, tmp_path)
    assert sync_driver("boinc", {"batch_window_s": 0}, tmp_path).batch_window_s == 0  # type: ignore[attr-defined]


def test_the_boinc_project_url_is_checked_at_once(tmp_path):
    with pytest.raises(DriverError, match="^boinc driver: project_url must start with http"):
        sync_driver("boinc", {"project_url": "boinc.example.org/p/"}, tmp_path)


def test_driver_config_checks_without_building_the_driver(tmp_path):
    got = driver_config("slurm", {"suspend_running": "off", "command_timeout": 5})
    assert got == SlurmConfig(suspend_running=False, command_timeout=5.0)
    with pytest.raises(
        DriverError, match=r"^driver\.boinc\.insecure must be true or false, not 'maybe'$"
    ):
        driver_config("boinc", {"insecure": "maybe"}, prefix="driver.boinc.")
    with pytest.raises(DriverError, match="no job driver named 'nope'"):
        driver_config("nope", {})
    assert not (tmp_path / "boinc").exists()


class Legacy(CommandDriver):
    """A third-party driver that reads one more key itself (``config_keys``)."""

    name = "legacy"
    system = "Legacy"
    job_id = re.compile(r"\d+\Z")
    config_keys: ClassVar[frozenset[str]] = CommandDriver.common_keys | {"queue"}

    def submit(self, spec: Any) -> str:
        raise NotImplementedError

    cancel = hold = resume = ping = submit  # type: ignore[assignment]


def test_a_driver_with_its_own_keys_keeps_them_and_its_typed_ones(tmp_path):
    drv = Legacy({"queue": "q1", "command_timeout": 7}, tmp_path)
    assert drv.config["queue"] == "q1" and drv.timeout == 7.0
    assert Legacy.known_keys() == CommandDriver.common_keys | {"queue"}
    with pytest.raises(DriverError, match="legacy driver: command_timeout must be a positive"):
        Legacy({"command_timeout": "7"}, tmp_path)


# ---- the documented defaults --------------------------------------------------------------

GUIDES = sorted((ROOT / "docs" / "operators").glob("*.md"))


def _scalar(text: str) -> float | bool | None:
    text = text.strip().strip("`")
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text)
    except ValueError:
        return None


def documented_defaults() -> list[tuple[str, str, str, float | bool]]:
    """(guide, driver, key, default) from the option tables (``| `key` | default |``) and
    the commented-out lines of ``[driver.NAME]`` blocks (``# key = default``)."""
    found = []
    for guide in GUIDES:
        text = guide.read_text()
        driver = {"sge.md": "sge", "pbs.md": "pbs", "lsf.md": "lsf"}.get(guide.name)
        if driver:
            for row in re.findall(r"^\| (`\w+`(?:, `\w+`)*) \| ([^|]+) \|", text, re.M):
                keys = re.findall(r"`(\w+)`", row[0])
                defaults = [d.strip() for d in row[1].split(",")]
                if len(keys) == len(defaults):
                    for key, default in zip(keys, defaults, strict=True):
                        if (value := _scalar(default)) is not None:
                            found.append((guide.name, driver, key, value))
        for name, body in re.findall(
            r"^```toml\n\[driver\.(\w+)\][^\n]*\n(.*?)^```", text, re.M | re.S
        ):
            for key, default in re.findall(r"^# (\w+) = (\S+)", body, re.M):
                if (value := _scalar(default)) is not None:
                    found.append((guide.name, name, key, value))
    return found


def test_the_guides_document_defaults():
    assert len(documented_defaults()) >= 20


@pytest.mark.parametrize("guide, driver, key, default", documented_defaults(), ids=lambda v: str(v))
def test_each_documented_default_is_the_config_class_default(guide, driver, key, default):
    fields = {f.name: f.default for f in attrs.fields(CONFIGS[driver])}
    assert key in fields, f"{guide}: {driver} has no option {key}"
    assert fields[key] == default, f"{guide}: {driver}.{key} defaults to {fields[key]}"


def test_command_drivers_share_the_command_options():
    for cls in (SlurmConfig, PbsConfig, SgeConfig, LsfConfig):
        assert issubclass(cls, CommandConfig)
