"""blahpd configuration: a TOML file when one is given, else the C blahp's ``blah.config``
(see :mod:`gahp_blah.blah_config`); defaults need no file at all.

The TOML file is ``--config``, else ``$BLAHPD_CONFIG``, else ``$BLAHPD_LOCATION/etc/
blahpd.toml`` when it exists; when there is one, no ``blah.config`` is read.

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
pass_submit_attributes = []                  # ad attributes passed as NAME='value'
pass_all_submit_attributes = false           # every string attribute passed so
```
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from gahp_blah.blah_config import (
    PACKAGE_SCRIPT_DIR,
    find_blah_config,
    libexec_default,
    translate,
)
from gahp_core import (
    ConfigError,
    load_settings,
    load_toml,
    non_empty_string,
    path,
    positive_number,
    setting,
    strict_bool,
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
    files: tuple[str, ...] = ()
    """The configuration files read, in order."""
    origins: Mapping[str, str] = attrs.field(factory=dict)
    """Where each setting that is not a default came from (``driver.slurm.bin_dir``: the
    file, line and text)."""
    warnings: tuple[str, ...] = ()
    """What the files ask for that blahpd does not do (logged at startup)."""
    supported_lrms: tuple[str, ...] = ()
    """blah.config's ``supported_lrms``: shown, filters nothing (as in the C blahp)."""
    exports: Mapping[str, str] = attrs.field(factory=dict)
    """blah.config's ``export NAME=value`` lines: set in blahpd's environment at startup."""


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
    pass_submit_attributes: tuple[str, ...] = setting(_attribute_names, ())
    """Attributes whose string value the site script sees as ``NAME='value'``
    (``VirtualOrganisation`` always, as in the C blahp)."""
    pass_all_submit_attributes: bool = setting(strict_bool, False)
    """Every attribute of the ad whose value is a string, so."""
    script_dirs: tuple[Path, ...] = ()
    """Where ``<lrms>_local_submit_attributes.sh`` is looked for, in order, when
    ``local_submit_attributes_dir`` is not set (blah.config: ``~/.blah``,
    ``blah_libexec_directory``, ``/etc/blahp``)."""

    def script_search(self) -> tuple[Path, ...]:
        if self.local_submit_attributes_dir is not None:
            return (self.local_submit_attributes_dir,)
        return self.script_dirs

    def passed_attributes(self) -> tuple[str, ...] | None:
        """The attributes passed to the site script by value (None: all of them)."""
        if self.pass_all_submit_attributes:
            return None
        names = self.pass_submit_attributes
        return names if "VirtualOrganisation" in names else (*names, "VirtualOrganisation")


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


def toml_file(options: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The TOML file in force: ``--config``, ``$BLAHPD_CONFIG``, else
    ``$BLAHPD_LOCATION/etc/blahpd.toml`` when it exists (HTCondor's remote_gahp sets
    BLAHPD_LOCATION)."""
    file = getattr(options, "config", None) or environ.get("BLAHPD_CONFIG")
    if file:
        return str(file)
    location = environ.get("BLAHPD_LOCATION")
    if location:
        candidate = os.path.join(location, "etc", "blahpd.toml")
        if os.path.isfile(candidate):
            return candidate
    return None


def _state_dir(options: argparse.Namespace, environ: Mapping[str, str]) -> tuple[Path, str] | None:
    if getattr(options, "state_dir", None):
        return path(options.state_dir, "--state-dir"), "--state-dir"
    if environ.get("BLAHPD_STATE_DIR"):
        return path(environ["BLAHPD_STATE_DIR"], "BLAHPD_STATE_DIR"), "$BLAHPD_STATE_DIR"
    return None


def load_config(
    options: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> BlahConfig:
    """The settings in force: a TOML file when one is given (see :func:`toml_file`), else the
    C blahp's ``blah.config`` files; ``--state-dir``/``$BLAHPD_STATE_DIR`` over either.
    A bad value or an unknown key is a :class:`ConfigError` naming the key and its file."""
    env = os.environ if environ is None else environ
    file = toml_file(options, env)
    state = _state_dir(options, env)
    if file is None:
        return _from_blah_config(env, state)
    data = load_toml(file, {"state_dir", "drivers", "default_gridtype", "driver", "site"})
    known = available_drivers()
    origins = {key: file for key in _settings_of(data)}
    if state is not None:
        origins["state_dir"] = state[1]
    try:
        if state is None and "state_dir" in data:
            state = (path(data["state_dir"], "state_dir"), file)
        gridtype = data.get("default_gridtype")
        return BlahConfig(
            state_dir=state[0] if state else default_state_dir(),
            drivers=_driver_names(data.get("drivers", known), "drivers", known),
            default_gridtype=non_empty_string(gridtype, "default_gridtype") if gridtype else None,
            driver_options=_driver_tables(data.get("driver", {}), known),
            site=load_settings(SiteConfig, data.get("site", {}), prefix="site."),
            files=(file,),
            origins=origins,
        )
    except ConfigError as exc:
        raise ConfigError(f"configuration file {file}: {exc}") from None


def _settings_of(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of a TOML table's leaves (``driver.slurm.bin_dir``)."""
    out: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += _settings_of(value, f"{prefix}{key}.")
        else:
            out.append(prefix + key)
    return out


def _from_blah_config(environ: Mapping[str, str], state: tuple[Path, str] | None) -> BlahConfig:
    found = find_blah_config(environ)
    t = translate(found)
    known = available_drivers()
    origins = dict(t.origins)
    if state is not None:
        origins["state_dir"] = state[1]
    libexec = t.libexec or libexec_default(environ)
    if t.libexec is None:
        origins["site.libexec"] = "the C blahp's default ($BLAHPD_LOCATION/libexec[/blahp])"
    home_dir = Path(os.path.expanduser("~")) / ".blah"
    dirs = tuple(dict.fromkeys((home_dir, libexec, PACKAGE_SCRIPT_DIR)))
    try:
        try:
            drivers = _driver_tables(t.table.get("driver", {}), known)
        except ConfigError as exc:
            raise ConfigError(_with_origin(str(exc), origins)) from None
        try:
            site = load_settings(SiteConfig, t.table.get("site", {}), prefix="site.")
        except ConfigError as exc:
            raise ConfigError(_with_origin(str(exc), origins)) from None
        return BlahConfig(
            state_dir=state[0] if state else default_state_dir(),
            drivers=tuple(known),  # supported_lrms filters nothing, as in the C blahp
            driver_options=drivers,
            site=attrs.evolve(site, script_dirs=dirs),
            files=found.files,
            origins=origins,
            warnings=t.warnings,
            supported_lrms=t.supported_lrms,
            exports=t.exports,
        )
    except ConfigError as exc:
        raise ConfigError(f"blah.config: {exc}") from None


def _with_origin(message: str, origins: Mapping[str, str]) -> str:
    """``message`` (naming a setting) with the blah.config line the setting came from."""
    for key, where in origins.items():
        if message.startswith(key + " ") or f" {key} " in message:
            return f"{message} (from {where})"
    return message
