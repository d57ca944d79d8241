"""blahpd configuration: an optional TOML file; defaults need no file at all.

```toml
state_dir = "/var/lib/gahp-blah"      # default: $XDG_STATE_HOME/gahp-blah
drivers = ["fork", "slurm", "pbs"]    # which gridtypes are accepted (default: all known)
default_gridtype = "slurm"            # for submit ads without gridtype (default: none)

[driver.slurm]                        # options of one driver
slurm_conf = "/etc/slurm/slurm.conf"

[site]                                # site batch directives (HTCondor-CE)
local_submit_attributes_dir = "/etc/blahp"   # runs <dir>/<lrms>_local_submit_attributes.sh
local_submit_attributes_timeout = 30         # seconds (default 30)
local_submit_attributes_setup_args = []      # more ad attributes unwound like CERequirements
```
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from gahp_core import (
    ConfigError,
    load_settings,
    load_toml,
    non_empty_string,
    path,
    positive_number,
    setting,
)
from gahp_lrms import DriverError, available_drivers, driver_config


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gahp-blah"


@attrs.frozen
class BlahConfig:
    """Settings of one blahpd process."""

    state_dir: Path = attrs.field(factory=default_state_dir)
    drivers: tuple[str, ...] = attrs.field(factory=lambda: tuple(available_drivers()))
    default_gridtype: str | None = None
    driver_options: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    """Each ``[driver.NAME]`` table as written (checked by the driver's settings class)."""
    site: SiteConfig = attrs.field(factory=lambda: SiteConfig())


def _attribute_names(value: object, key: str) -> tuple[str, ...]:
    """A list of ClassAd attribute names, or blah.config's form: names separated by spaces."""
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(a, str) and a for a in value):
        raise ConfigError(f"{key} must be a list of attribute names, not {value!r}")
    return tuple(value)


@attrs.frozen
class SiteConfig:
    """``[site]``: the local submit attributes hook (see :mod:`gahp_blah.local_attributes`)."""

    local_submit_attributes_dir: Path | None = setting(path)
    local_submit_attributes_timeout: float = setting(positive_number, 30.0)
    local_submit_attributes_setup_args: tuple[str, ...] = setting(_attribute_names, ())


def _driver_names(value: object, key: str, known: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise ConfigError(f"{key} must be a list of driver names, not {value!r}")
    bad = sorted(set(value) - set(known))
    if bad:
        raise ConfigError(f"{key}: unknown drivers {bad} (known: {', '.join(known)})")
    return tuple(value)


def _driver_tables(value: object, known: list[str]) -> dict[str, Mapping[str, Any]]:
    """The ``[driver.NAME]`` tables, each checked by its driver's settings class."""
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError("[driver.NAME] sections must be tables")
    misspelt = sorted(set(value) - set(known))
    if misspelt:
        raise ConfigError(
            f"unknown driver sections {', '.join(f'[driver.{n}]' for n in misspelt)}"
            f" (known: {', '.join(known)})"
        )
    for name, table in value.items():
        try:
            driver_config(name, table, prefix=f"driver.{name}.")
        except DriverError as exc:
            raise ConfigError(str(exc)) from None
    return value


def load_config(options: argparse.Namespace) -> BlahConfig:
    """Merge ``--config``/``$BLAHPD_CONFIG`` and ``--state-dir``/``$BLAHPD_STATE_DIR``.
    A bad value or an unknown key anywhere is a :class:`ConfigError` naming the key."""
    file = getattr(options, "config", None) or os.environ.get("BLAHPD_CONFIG")
    data: dict[str, Any] = {}
    if file:
        data = load_toml(file, {"state_dir", "drivers", "default_gridtype", "driver", "site"})
    state: Path | None = None
    if getattr(options, "state_dir", None):
        state = path(options.state_dir, "--state-dir")
    elif os.environ.get("BLAHPD_STATE_DIR"):
        state = path(os.environ["BLAHPD_STATE_DIR"], "BLAHPD_STATE_DIR")
    known = available_drivers()
    try:
        if state is None and "state_dir" in data:
            state = path(data["state_dir"], "state_dir")
        gridtype = data.get("default_gridtype")
        return BlahConfig(
            state_dir=state or default_state_dir(),
            drivers=_driver_names(data.get("drivers", known), "drivers", known),
            default_gridtype=non_empty_string(gridtype, "default_gridtype") if gridtype else None,
            driver_options=_driver_tables(data.get("driver", {}), known),
            site=load_settings(SiteConfig, data.get("site", {}), prefix="site."),
        )
    except ConfigError as exc:
        raise ConfigError(f"configuration file {file}: {exc}") from None
