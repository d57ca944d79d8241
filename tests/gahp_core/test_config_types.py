"""The shared converters of typed settings, and load_settings: each refusal names the key."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest

from gahp_core import (
    ConfigError,
    from_text,
    http_url,
    load_settings,
    non_empty_string,
    non_negative_int,
    non_negative_number,
    path,
    positive_int,
    positive_number,
    setting,
    setting_names,
    strict_bool,
)


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        ("true", True),
        ("False", False),
        ("YES", True),
        ("no", False),
        ("on", True),
        ("Off", False),
        ("1", True),
        ("0", False),
        (" true ", True),
    ],
)
def test_strict_bool_accepts_the_usual_spellings(value, expected):
    assert strict_bool(value, "k") is expected


@pytest.mark.parametrize("value", ["maybe", "", "tru", "2", 2, -1, 0.0, 1.0, None, [], {}])
def test_strict_bool_refuses_anything_else_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"^insecure must be true or false, not "):
        strict_bool(value, "insecure")


def test_strict_bool_shows_the_value_as_written():
    with pytest.raises(ConfigError, match=r"not 'maybe'$"):
        strict_bool("maybe", "k")
    with pytest.raises(ConfigError, match=r"not a list$"):
        strict_bool([], "k")


@pytest.mark.parametrize("value", [1, 2.5, 1e-3, 10**6])
def test_positive_number(value):
    assert positive_number(value, "k") == float(value)
    assert isinstance(positive_number(value, "k"), float)


@pytest.mark.parametrize("value", [0, -1, -0.5, "30", True, False, None, math.nan, math.inf])
def test_positive_number_refuses_strings_bools_and_non_positive(value):
    with pytest.raises(ConfigError, match=r"^command_timeout must be a positive number, not "):
        positive_number(value, "command_timeout")


def test_non_negative_number_takes_zero():
    assert non_negative_number(0, "k") == 0.0
    for bad in (-1, "0", True):
        with pytest.raises(ConfigError, match="^batch_window_s must be a number of 0 or more"):
            non_negative_number(bad, "batch_window_s")


def test_whole_numbers():
    assert positive_int(3, "k") == 3 and non_negative_int(0, "k") == 0
    for bad in (0, -2, 2.0, "3", True):
        with pytest.raises(ConfigError, match="^submit_attempts must be a whole number above 0"):
            positive_int(bad, "submit_attempts")
    for bad in (-1, 1.5, "1", False):
        with pytest.raises(ConfigError, match="^retries must be a whole number of 0 or more"):
            non_negative_int(bad, "retries")


def test_path_and_string():
    assert path("/etc/x", "k") == Path("/etc/x")
    assert path("~/x", "k") == Path.home() / "x"
    assert path(Path("/a"), "k") == Path("/a")
    for bad in ("", "  ", 3, None):
        with pytest.raises(ConfigError, match="^bin_dir must be a path, not "):
            path(bad, "bin_dir")
    assert non_empty_string("pe", "k") == "pe"
    for bad in ("", 1, None):
        with pytest.raises(ConfigError, match="^sge_cell must be a non-empty string"):
            non_empty_string(bad, "sge_cell")


def test_http_url():
    assert http_url("https://h.example/p/", "k") == "https://h.example/p/"
    assert http_url("http://127.0.0.1:8080/p", "k") == "http://127.0.0.1:8080/p"
    with pytest.raises(
        ConfigError, match=r"^project URL must start with http:// or https://: 'ftp://x'$"
    ):
        http_url("ftp://x", "project URL")
    with pytest.raises(ConfigError, match="^project_url names no host: 'http:///p'"):
        http_url("http:///p", "project_url")
    with pytest.raises(ConfigError, match="^project_url must start with"):
        http_url(3, "project_url")


def test_from_text_reads_numbers_only():
    assert from_text("60") == 60 and isinstance(from_text("60"), int)
    assert from_text("2.5") == 2.5 and from_text("1e3") == 1000.0
    for text in ("false", "/etc/slurm.conf", "", "1.2.3", "inf", "nan", "0x10"):
        assert from_text(text) == text


@attrs.frozen
class Example:
    flag: bool = setting(strict_bool, True)
    wait: float = setting(positive_number, 5.0)
    name: str | None = setting(non_empty_string)
    derived: int = 0  # not a setting: not read from a table


def test_load_settings_converts_and_keeps_defaults():
    assert load_settings(Example, {}) == Example()
    got = load_settings(Example, {"flag": "false", "wait": 2})
    assert got.flag is False and got.wait == 2.0 and got.name is None
    assert setting_names(Example) == {"flag", "wait", "name"}


def test_load_settings_names_the_key_with_its_prefix_or_label():
    with pytest.raises(ConfigError, match=r"^driver\.x\.flag must be true or false, not 'no way'$"):
        load_settings(Example, {"flag": "no way"}, prefix="driver.x.")
    with pytest.raises(ConfigError, match=r"^EXAMPLE_WAIT must be a positive number, not '5'$"):
        load_settings(Example, {"wait": "5"}, labels={"wait": "EXAMPLE_WAIT"})


def test_load_settings_refuses_unknown_keys_naming_them():
    with pytest.raises(
        ConfigError,
        match=r"^unknown configuration keys driver\.x\.derived, driver\.x\.flga "
        r"\(known: flag, name, wait\)$",
    ):
        load_settings(Example, {"flga": True, "derived": 1}, prefix="driver.x.")
    with pytest.raises(ConfigError, match=r"^site must be a table$"):
        load_settings(Example, ["flag"], prefix="site.")  # type: ignore[arg-type]


def test_mypy_checks_a_settings_field_against_its_converter(tmp_path: Path) -> None:
    """setting() is typed as its converter's result: a field annotated otherwise is a mypy
    error, a field without a default is Optional."""
    mypy_api = pytest.importorskip("mypy.api")
    module = tmp_path / "settings_check.py"
    module.write_text(
        "import attrs\n"
        "from gahp_core import positive_int, positive_number, setting\n"
        "@attrs.frozen\n"
        "class Good:\n"
        "    a: int = setting(positive_int, 3)\n"
        "    b: float | None = setting(positive_number)\n"
        "@attrs.frozen\n"
        "class Bad:\n"
        "    a: str = setting(positive_int, 3)\n"
        "    b: float = setting(positive_number)\n"
    )
    out, _err, status = mypy_api.run(
        [
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            "",
            str(module),
        ]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    assert [line.split(":")[1] for line in errors] == ["9", "10"], out
