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

from gahp_core import ConfigError, load_toml
from gahp_lrms import available_drivers


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
    site: SiteConfig = attrs.field(factory=lambda: SiteConfig())


@attrs.frozen
class SiteConfig:
    """``[site]``: the local submit attributes hook (see :mod:`gahp_blah.local_attributes`)."""

    local_submit_attributes_dir: Path | None = None
    local_submit_attributes_timeout: float = 30.0
    local_submit_attributes_setup_args: tuple[str, ...] = ()


_SITE_KEYS = {
    "local_submit_attributes_dir",
    "local_submit_attributes_timeout",
    "local_submit_attributes_setup_args",
}


def _site_config(data: Any, path: str) -> SiteConfig:
    if not isinstance(data, dict):
        raise ConfigError("[site] must be a table")
    unknown = sorted(set(data) - _SITE_KEYS)
    if unknown:
        raise ConfigError(f"configuration file {path}: unknown keys in [site]: {unknown}")
    directory = data.get("local_submit_attributes_dir")
    if directory is not None and (not isinstance(directory, str) or not directory):
        raise ConfigError("site.local_submit_attributes_dir must be a directory path")
    timeout = data.get("local_submit_attributes_timeout", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError("site.local_submit_attributes_timeout must be a positive number")
    args = data.get("local_submit_attributes_setup_args", [])
    if isinstance(args, str):
        args = args.split()  # blah.config's form: names separated by spaces
    if not isinstance(args, list) or not all(isinstance(a, str) and a for a in args):
        raise ConfigError("site.local_submit_attributes_setup_args must be attribute names")
    return SiteConfig(
        local_submit_attributes_dir=Path(directory).expanduser() if directory else None,
        local_submit_attributes_timeout=float(timeout),
        local_submit_attributes_setup_args=tuple(args),
    )


def load_config(options: argparse.Namespace) -> BlahConfig:
    """Merge ``--config``/``$BLAHPD_CONFIG`` and ``--state-dir``/``$BLAHPD_STATE_DIR``."""
    path = getattr(options, "config", None) or os.environ.get("BLAHPD_CONFIG")
    data: dict[str, Any] = {}
    if path:
        data = load_toml(path, {"state_dir", "drivers", "default_gridtype", "driver", "site"})
    state = (
        getattr(options, "state_dir", None)
        or os.environ.get("BLAHPD_STATE_DIR")
        or data.get("state_dir")
    )
    known = available_drivers()
    drivers = data.get("drivers", known)
    if not isinstance(drivers, list) or not all(isinstance(d, str) for d in drivers):
        raise ConfigError("drivers must be a list of driver names")
    bad = sorted(set(drivers) - set(known))
    if bad:
        raise ConfigError(f"unknown drivers {bad} (known: {', '.join(known)})")
    opts = data.get("driver", {})
    if not isinstance(opts, dict) or not all(isinstance(v, dict) for v in opts.values()):
        raise ConfigError("[driver.NAME] sections must be tables")
    misspelt = sorted(set(opts) - set(known))
    if misspelt:
        raise ConfigError(
            f"configuration file {path}: unknown driver sections "
            f"{', '.join(f'[driver.{n}]' for n in misspelt)} (known: {', '.join(known)})"
        )
    return BlahConfig(
        state_dir=Path(state).expanduser() if state else default_state_dir(),
        drivers=tuple(drivers),
        default_gridtype=data.get("default_gridtype"),
        driver_options=opts,
        site=_site_config(data.get("site", {}), str(path)),
    )
