"""blahpd configuration: an optional TOML file; defaults need no file at all.

```toml
state_dir = "/var/lib/gahp-blah"      # default: $XDG_STATE_HOME/gahp-blah
drivers = ["fork", "slurm", "pbs"]    # which gridtypes are accepted (default: all known)
default_gridtype = "slurm"            # for submit ads without gridtype (default: none)

[driver.slurm]                        # options of one driver
slurm_conf = "/etc/slurm/slurm.conf"
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


def load_config(options: argparse.Namespace) -> BlahConfig:
    """Merge ``--config``/``$BLAHPD_CONFIG`` and ``--state-dir``/``$BLAHPD_STATE_DIR``."""
    path = getattr(options, "config", None) or os.environ.get("BLAHPD_CONFIG")
    data: dict[str, Any] = {}
    if path:
        data = load_toml(path, {"state_dir", "drivers", "default_gridtype", "driver"})
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
    )
