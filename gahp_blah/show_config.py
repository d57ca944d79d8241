"""``blahpd --show-config``: every setting in force and where it came from, in the manner of
``condor_config_val -v``; a configuration that cannot be used exits non-zero with the reason."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import attrs

from gahp_blah.config import BlahConfig, load_config
from gahp_blah.local_attributes import LocalAttributesError, find_site_script
from gahp_core import ConfigError
from gahp_lrms import DriverError, driver_config

DEFAULT = "<default>"


def _shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return " ".join(_shown(v) for v in value) or "(none)"
    return str(value)


def _setting(name: str, value: Any, where: str) -> Iterator[str]:
    yield f"{name} = {_shown(value)}"
    yield f" # at: {where}"


def render(config: BlahConfig) -> Iterator[str]:
    """The lines ``--show-config`` prints."""
    yield from _general(config)
    yield from _drivers(config)
    yield from _site(config)
    o = config.origins
    for name, value in config.exports.items():
        yield from _setting(f"export {name}", value, o[f"export {name}"])
    for warning in config.warnings:
        yield f"# WARNING: {warning}"


def _general(config: BlahConfig) -> Iterator[str]:
    """The files read, the state directory, the drivers and the default grid type."""
    o = config.origins
    files = ", ".join(config.files) or "none (defaults)"
    yield f"# configuration files read: {files}"
    if config.files and config.files[0].endswith(".toml"):
        yield "# a TOML file is in force: blah.config is not read"
    yield from _setting("state_dir", config.state_dir, o.get("state_dir", DEFAULT))
    yield from _setting("drivers", config.drivers, o.get("drivers", DEFAULT))
    if config.supported_lrms:
        yield from _setting(
            "supported_lrms (filters nothing, as in the C blahp)",
            config.supported_lrms,
            o["supported_lrms"],
        )
    yield from _setting(
        "default_gridtype", config.default_gridtype, o.get("default_gridtype", DEFAULT)
    )


def _drivers(config: BlahConfig) -> Iterator[str]:
    """Each driver's options (defaults included)."""
    for name in config.drivers:
        try:
            typed = driver_config(name, config.driver_options.get(name, {}))
        except DriverError as exc:  # pragma: no cover - checked when the config was loaded
            yield f"# driver {name}: {exc}"
            continue
        if typed is None:
            continue
        for field in attrs.fields(type(typed)):
            key = f"driver.{name}.{field.name}"
            yield from _setting(key, getattr(typed, field.name), config.origins.get(key, DEFAULT))


def _site(config: BlahConfig) -> Iterator[str]:
    """The site settings, where site scripts are looked for and each driver's one."""
    o = config.origins
    site = config.site
    for field in attrs.fields(type(site)):
        if field.name == "script_dirs":
            continue
        key = f"site.{field.name}"
        yield from _setting(key, getattr(site, field.name), o.get(key, DEFAULT))
    dirs = site.script_search()
    where = o.get("site.local_submit_attributes_dir") or o.get("site.libexec", DEFAULT)
    yield from _setting("site script directories (in order)", dirs, where)
    for name in config.drivers:
        try:
            script = find_site_script(dirs, name)
        except LocalAttributesError as exc:
            yield f"# {name}: {exc}"
            continue
        if script is not None:
            yield f"site script for {name} = {script}"


def show_config(options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the settings; 0, or 1 with the reason on ``err`` when they cannot be used."""
    try:
        config = load_config(options)
    except ConfigError as exc:
        print(f"blahpd: {exc}", file=err)
        return 1
    for line in render(config):
        print(line, file=out)
    from gahp_blah.backend import classad_problem

    problem = classad_problem()
    print(f"# ClassAd library: {problem or 'installed'}", file=out)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="blahpd --show-config")
    parser.add_argument("--show-config", action="store_true")
    parser.add_argument("--config")
    parser.add_argument("--state-dir")
    options, _rest = parser.parse_known_args(argv)
    return show_config(options, sys.stdout, sys.stderr)


__all__ = ["main", "render", "show_config"]
