"""Configuration shared by every server: TOML files, secret files, and typed settings
(attrs classes read through strict converters that name the key they refuse)."""

from __future__ import annotations

import argparse
import math
import os
import re
import tomllib
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs

from gahp_core._errors import GahpError
from gahp_core._logs import REDACTOR


class ConfigError(GahpError):
    """A configuration problem, reported at startup with the file at fault."""


def load_toml(path: str | Path, known_keys: Iterable[str]) -> dict[str, Any]:
    """Read a TOML file; a clear :class:`ConfigError` if unreadable, invalid or misspelt."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"configuration file {path}: {exc}") from None
    unknown = set(data) - set(known_keys)
    if unknown:
        raise ConfigError(f"configuration file {path}: unknown keys {sorted(unknown)}")
    return data


def read_secret_file(path: str | Path, what: str) -> str:
    """A file holding one secret token (an authenticator): its content, stripped.

    The secret is registered with the process-wide redactor: masked in every log line and
    every error text (:func:`gahp_core.error_text`) from then on."""
    try:
        text = Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {path}: {exc.strerror}") from None
    if not text or any(c.isspace() for c in text):
        raise ConfigError(f"{what} file {path} must hold one {what}")
    REDACTOR.add(text)
    return text


# ---- typed settings ---------------------------------------------------------------------------
#
# A server's or a driver's settings are an attrs class whose fields are made by
# :func:`setting`; :func:`load_settings` builds one from a table (a TOML table, the merged
# command line and environment), converting each key by its field's converter and refusing
# unknown keys. Every refusal is a ConfigError that names the key.

T = TypeVar("T")
V = TypeVar("V")
Converter = Callable[[Any, str], Any]
"""``convert(value, key)``: the value, typed; a :class:`ConfigError` naming ``key`` if wrong."""

_CONVERT = "gahp_core.setting"
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z")


def _shown(value: object) -> str:
    """A value as an operator wrote it (TOML-like), for an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int | float):
        return repr(value)
    return f"a {type(value).__name__}"


def strict_bool(value: object, key: str) -> bool:
    """A boolean: true/false, or (any case) "true"/"false", "yes"/"no", "on"/"off", "1"/"0"
    (also the integers 1 and 0); anything else is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise ConfigError(f"{key} must be true or false, not {_shown(value)}")


def _number(value: object, key: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key} must be {what}, not {_shown(value)}")
    return float(value)


def positive_number(value: object, key: str) -> float:
    """A number (int or float, not a boolean nor a string) above 0, as a float."""
    number = _number(value, key, "a positive number")
    if number <= 0:
        raise ConfigError(f"{key} must be a positive number, not {_shown(value)}")
    return number


def non_negative_number(value: object, key: str) -> float:
    """A number (int or float, not a boolean nor a string) of 0 or more, as a float."""
    number = _number(value, key, "a number of 0 or more")
    if number < 0:
        raise ConfigError(f"{key} must be a number of 0 or more, not {_shown(value)}")
    return number


def positive_int(value: object, key: str) -> int:
    """A whole number (an int, not a boolean) above 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{key} must be a whole number above 0, not {_shown(value)}")
    return value


def non_negative_int(value: object, key: str) -> int:
    """A whole number (an int, not a boolean) of 0 or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{key} must be a whole number of 0 or more, not {_shown(value)}")
    return value


def non_empty_string(value: object, key: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a non-empty string, not {_shown(value)}")
    return value


def path(value: object, key: str) -> Path:
    """A file or directory path (a non-empty string; ``~`` is expanded)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a path, not {_shown(value)}")
    return Path(value).expanduser()


def http_url(value: object, key: str) -> str:
    """An ``http://`` or ``https://`` URL naming a host, as given."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigError(f"{key} must start with http:// or https://: {_shown(value)}")
    if not urllib.parse.urlsplit(value).hostname:
        raise ConfigError(f"{key} names no host: {_shown(value)}")
    return value


def from_text(value: str) -> str | int | float:
    """A value given as text (an environment variable, ``KEY=VALUE`` on a command line):
    a number if it reads as one, else the text, for the converters to check."""
    stripped = value.strip()
    if _INT.match(stripped):
        return int(stripped)
    if _FLOAT.match(stripped):
        return float(stripped)
    return value


@overload
def setting(convert: Callable[[Any, str], V]) -> V | None: ...
@overload
def setting(convert: Callable[[Any, str], V], default: V) -> V: ...
def setting(convert: Callable[[Any, str], V], default: V | None = None) -> V | None:
    """A field of a settings class: read by ``convert(value, key)``; ``default`` when the
    key is absent (not converted). Typed as the converter's result (``| None`` without a
    default), so mypy checks the field's annotation against it."""
    return attrs.field(default=default, metadata={_CONVERT: convert})


def load_settings(
    cls: type[T],
    table: Mapping[str, Any],
    prefix: str = "",
    labels: Mapping[str, str] | None = None,
) -> T:
    """An instance of the settings class ``cls`` (fields made by :func:`setting`) from
    ``table``. A key is named ``prefix + key`` in messages (``labels[key]`` if given: where
    the value came from). An unknown key, or a value its converter refuses, is a
    :class:`ConfigError` naming the key."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'the settings'} must be a table")
    fields = {f.name: f for f in attrs.fields(cls) if _CONVERT in f.metadata}  # type: ignore[arg-type]
    _refuse_unknown(table, fields, prefix)
    labels = labels or {}
    values = {
        name: fields[name].metadata[_CONVERT](value, labels.get(name, prefix + name))
        for name, value in table.items()
    }
    return cls(**values)


def _refuse_unknown(table: Mapping[str, Any], fields: Mapping[str, Any], prefix: str) -> None:
    """A :class:`ConfigError` naming the keys of ``table`` that are not settings."""
    unknown = sorted(set(table) - set(fields))
    if unknown:
        names = ", ".join(f"{prefix}{k}" for k in unknown)
        raise ConfigError(
            f"unknown configuration key{'s' if len(unknown) > 1 else ''} {names}"
            f" (known: {', '.join(sorted(fields)) or 'none'})"
        )


def setting_names(cls: type) -> frozenset[str]:
    """The keys a settings class reads."""
    return frozenset(f.name for f in attrs.fields(cls) if _CONVERT in f.metadata)


# ---- a backend's settings from its options, the environment and a file ----------------------


def _env_name(prefix: str, key: str) -> str:
    return f"{prefix}_{key}".upper().replace("-", "_")


def add_settings_options(parser: argparse.ArgumentParser, cls: type, prefix: str) -> None:
    """Add ``--PREFIX-KEY VALUE`` for each key of the settings class ``cls`` and
    ``--PREFIX-config FILE``, in an argument group of their own: a backend's options,
    named apart from the core options and from other backends'. Read them back with
    :func:`settings_from`."""
    group = parser.add_argument_group(f"{prefix} settings")
    group.add_argument(
        f"--{prefix}-config",
        metavar="FILE",
        dest=f"{prefix}_config".replace("-", "_"),
        help=f"TOML file of {prefix} settings (default ${_env_name(prefix, 'config')})",
    )
    for key in sorted(setting_names(cls)):
        group.add_argument(
            f"--{prefix}-{key.replace('_', '-')}",
            metavar="VALUE",
            dest=f"{prefix}_{key}".replace("-", "_"),
            help=f"{key} (default ${_env_name(prefix, key)}, else the file's {key})",
        )


def settings_from(
    cls: type[T],
    options: argparse.Namespace | None,
    prefix: str,
    environ: Mapping[str, str] | None = None,
) -> T:
    """The settings class ``cls`` (fields made by :func:`setting`), each key taken from,
    in this order (the precedence HTCondor administrators expect, since HTCondor starts
    a GAHP without arguments):

    1. the option ``--PREFIX-KEY`` (see :func:`add_settings_options`), if given;
    2. the environment variable ``PREFIX_KEY`` (upper case), if set and not empty;
    3. the key in the TOML file named by ``--PREFIX-config`` or ``$PREFIX_CONFIG``;
    4. the field's default.

    Text from an option or a variable is read by :func:`from_text` (a number if it reads
    as one), then every value by its field's converter. A bad value, an unknown key in
    the file or an unreadable file is a :class:`ConfigError` naming where the value came
    from (``--kv-timeout``, ``KV_TIMEOUT``, ``configuration file F: timeout``).
    """
    env = os.environ if environ is None else environ
    attr = prefix.replace("-", "_")
    file = getattr(options, f"{attr}_config", None) or env.get(_env_name(prefix, "config"))
    names = setting_names(cls)
    data: dict[str, Any] = load_toml(file, names) if file else {}
    merged: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for key in sorted(names):
        option = getattr(options, f"{attr}_{key}", None)
        var = _env_name(prefix, key)
        if option is not None:
            merged[key] = from_text(option) if isinstance(option, str) else option
            labels[key] = f"--{prefix}-{key.replace('_', '-')}"
        elif env.get(var):
            merged[key], labels[key] = from_text(env[var]), var
        elif key in data:
            merged[key], labels[key] = data[key], f"configuration file {file}: {key}"
    return load_settings(cls, merged, labels=labels)
