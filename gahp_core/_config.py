"""Configuration files shared by every server: TOML, checked for unknown keys."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
