"""Configuration of the BOINC GAHP: command line, environment, optional TOML file.

Precedence: command-line option, then environment variable, then the file. A default
project (URL + authenticator file) lets the GAHP run without BOINC_SELECT_PROJECT, as
the Condor-B design describes; BOINC_SELECT_PROJECT always overrides it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from gahp_boinc._outputs import ArchiveLimits
from gahp_boinc._rpc import MAX_REPLY_BYTES, Project
from gahp_core import (
    from_text,
    http_url,
    load_settings,
    load_toml,
    non_negative_int,
    path,
    positive_int,
    positive_number,
    read_secret_file,
    setting,
    setting_names,
    strict_bool,
)


@attrs.frozen
class BoincConfig:
    """Settings of one boinc-gahp process."""

    project_url: str | None = None
    authenticator: str | None = attrs.field(default=None, repr=False)
    timeout: float = 60.0
    verify: bool | str = True
    lease_seconds: float = 3600.0
    retries: int = 4
    command_deadline: float = 290.0
    archive_limits: ArchiveLimits = ArchiveLimits()
    max_reply_bytes: int = MAX_REPLY_BYTES

    def default_project(self) -> Project | None:
        if not self.project_url or not self.authenticator:
            return None
        url = self.project_url if self.project_url.endswith("/") else self.project_url + "/"
        return Project(url=url, authenticator=self.authenticator)


@attrs.frozen
class BoincSettings:
    """What the file, the environment and the command line set, typed: the file's keys."""

    project_url: str | None = setting(http_url)
    authenticator_file: Path | None = setting(path)
    timeout: float = setting(positive_number, 60.0)
    """Seconds per HTTP request, its whole reply included (longer only for a body arriving
    at 16 KiB/s or more)."""
    ca_bundle: Path | None = setting(path)
    insecure: bool = setting(strict_bool, False)
    """Do not verify TLS certificates."""
    lease_seconds: float = setting(positive_number, 3600.0)
    retries: int = setting(non_negative_int, 4)
    command_timeout: float = setting(positive_number, 290.0)
    output_archive_max_bytes: int = setting(positive_int, 4 << 30)
    """Bytes a zip output may unpack to (its members' total), declared or written."""
    output_archive_max_members: int = setting(positive_int, 10_000)
    """Entries a zip output may hold."""
    output_archive_max_ratio: int = setting(positive_int, 100)
    """Bytes a zip output may unpack to per byte of its own, beyond 16 MiB."""
    max_reply_bytes: int = setting(positive_int, MAX_REPLY_BYTES)
    """The largest RPC reply accepted (downloads are streamed to disk and have no limit)."""


_ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "project_url": ("BOINC_PROJECT_URL", str),
    "authenticator_file": ("BOINC_AUTHENTICATOR_FILE", str),
    "timeout": ("BOINC_GAHP_TIMEOUT", from_text),
    "ca_bundle": ("BOINC_GAHP_CA_BUNDLE", str),
    "insecure": ("BOINC_GAHP_INSECURE", from_text),
    "retries": ("BOINC_GAHP_RETRIES", from_text),
    "command_timeout": ("BOINC_GAHP_COMMAND_TIMEOUT", from_text),
    "output_archive_max_bytes": ("BOINC_GAHP_OUTPUT_ARCHIVE_MAX_BYTES", from_text),
    "output_archive_max_members": ("BOINC_GAHP_OUTPUT_ARCHIVE_MAX_MEMBERS", from_text),
    "output_archive_max_ratio": ("BOINC_GAHP_OUTPUT_ARCHIVE_MAX_RATIO", from_text),
    "max_reply_bytes": ("BOINC_GAHP_MAX_REPLY_BYTES", from_text),
}
"""The environment variable of each key that has one, and how its text is read (each but
lease_seconds and the output_archive limits also has a command-line option,
``--project-url`` & co.)."""


def load_settings_from(options: argparse.Namespace) -> BoincSettings:
    """The settings: each key from its command-line option, else its environment variable,
    else the file. A bad value is a :class:`~gahp_core.ConfigError` naming where it was."""
    env = os.environ
    file = getattr(options, "config", None) or env.get("BOINC_GAHP_CONFIG")
    data: dict[str, Any] = load_toml(file, setting_names(BoincSettings)) if file else {}
    merged: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for key in setting_names(BoincSettings):
        var, read = _ENV.get(key, ("", str))
        option = getattr(options, key, None) if var else None
        if option is not None:
            merged[key], labels[key] = option, f"--{key.replace('_', '-')}"
        elif var and env.get(var):
            merged[key], labels[key] = read(env[var]), var
        elif key in data:
            merged[key], labels[key] = data[key], f"configuration file {file}: {key}"
    return load_settings(BoincSettings, merged, labels=labels)


def load_config(options: argparse.Namespace) -> BoincConfig:
    """Merge the command line, the environment and the TOML file into a :class:`BoincConfig`."""
    settings = load_settings_from(options)
    verify: bool | str = True
    if settings.insecure:
        verify = False
    elif settings.ca_bundle:
        verify = str(settings.ca_bundle)
    auth_file = settings.authenticator_file
    return BoincConfig(
        project_url=settings.project_url,
        authenticator=read_secret_file(auth_file, "authenticator") if auth_file else None,
        timeout=settings.timeout,
        verify=verify,
        lease_seconds=settings.lease_seconds,
        retries=settings.retries,
        command_deadline=settings.command_timeout,
        archive_limits=ArchiveLimits(
            max_bytes=settings.output_archive_max_bytes,
            max_members=settings.output_archive_max_members,
            max_ratio=settings.output_archive_max_ratio,
        ),
        max_reply_bytes=settings.max_reply_bytes,
    )
