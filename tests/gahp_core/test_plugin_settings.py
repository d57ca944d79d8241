"""A backend's settings from its own options, the environment and a TOML file."""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
import pytest

from gahp_core import (
    ConfigError,
    add_core_options,
    add_settings_options,
    http_url,
    non_empty_string,
    positive_int,
    positive_number,
    setting,
    settings_from,
    strict_bool,
)


@attrs.frozen
class KvSettings:
    url: str = setting(http_url, "http://127.0.0.1:1/")
    timeout: float = setting(positive_number, 30.0)
    dry_run: bool = setting(strict_bool, False)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_core_options(parser)
    add_settings_options(parser, KvSettings, "kv")
    return parser.parse_args(argv)


def test_defaults_with_nothing_given():
    assert settings_from(KvSettings, parse(), "kv", environ={}) == KvSettings()


def test_option_over_environment_over_file_over_default(tmp_path: Path):
    conf = tmp_path / "kv.toml"
    conf.write_text('url = "https://file.example/"\ntimeout = 5\ndry_run = true\n')
    env = {"KV_CONFIG": str(conf), "KV_TIMEOUT": "7.5"}
    got = settings_from(KvSettings, parse("--kv-url", "https://cli.example/"), "kv", environ=env)
    assert got == KvSettings(url="https://cli.example/", timeout=7.5, dry_run=True)
    got = settings_from(KvSettings, parse("--kv-config", str(conf)), "kv", environ={})
    assert got == KvSettings(url="https://file.example/", timeout=5.0, dry_run=True)


def test_each_refusal_names_where_the_value_came_from(tmp_path: Path):
    with pytest.raises(ConfigError, match="^--kv-timeout must be a positive number, not -1$"):
        settings_from(KvSettings, parse("--kv-timeout", "-1"), "kv", environ={})
    with pytest.raises(ConfigError, match="^KV_DRY_RUN must be true or false, not 'maybe'$"):
        settings_from(KvSettings, parse(), "kv", environ={"KV_DRY_RUN": "maybe"})
    conf = tmp_path / "kv.toml"
    conf.write_text('url = "ftp://x"\n')
    with pytest.raises(ConfigError, match=f"^configuration file {conf}: url must start with"):
        settings_from(KvSettings, parse(), "kv", environ={"KV_CONFIG": str(conf)})
    conf.write_text("timout = 1\n")
    with pytest.raises(ConfigError, match=r"unknown keys \['timout'\]"):
        settings_from(KvSettings, parse(), "kv", environ={"KV_CONFIG": str(conf)})


def test_a_backends_options_never_clash_with_the_core_ones():
    @attrs.frozen
    class Clashing:
        log: str = setting(non_empty_string, "")  # named like a core option
        workers: int = setting(positive_int, 1)

    parser = argparse.ArgumentParser()
    add_core_options(parser)
    add_settings_options(parser, Clashing, "kv")
    options = parser.parse_args(["--log", "core.log", "--kv-log", "kv.log", "--kv-workers", "3"])
    assert options.log == "core.log"
    assert settings_from(Clashing, options, "kv", environ={}) == Clashing("kv.log", 3)
