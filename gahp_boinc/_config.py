"""Configuration of the BOINC GAHP: command line, environment, optional TOML file.

Precedence: command-line option, then environment variable, then the file. A default
project (URL + authenticator file) lets the GAHP run without BOINC_SELECT_PROJECT, as
the Condor-B design describes; BOINC_SELECT_PROJECT always overrides it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import attrs

from gahp_boinc._rpc import Project
from gahp_core import ConfigError, load_toml, read_secret_file


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

    def default_project(self) -> Project | None:
        if not self.project_url or not self.authenticator:
            return None
        url = self.project_url if self.project_url.endswith("/") else self.project_url + "/"
        return Project(url=url, authenticator=self.authenticator)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def load_config(options: argparse.Namespace) -> BoincConfig:
    """Merge the command line, the environment and the TOML file into a :class:`BoincConfig`."""
    env = os.environ
    path = getattr(options, "config", None) or env.get("BOINC_GAHP_CONFIG")
    data: dict[str, Any] = {}
    if path:
        data = load_toml(
            path,
            {
                "project_url",
                "authenticator_file",
                "timeout",
                "ca_bundle",
                "insecure",
                "lease_seconds",
                "retries",
                "command_timeout",
            },
        )

    def pick(opt: str, var: str, key: str) -> Any:
        value = getattr(options, opt, None)
        if value is not None:
            return value
        if env.get(var):
            return env[var]
        return data.get(key)

    url = pick("project_url", "BOINC_PROJECT_URL", "project_url")
    auth_file = pick("authenticator_file", "BOINC_AUTHENTICATOR_FILE", "authenticator_file")
    authenticator = read_secret_file(str(auth_file), "authenticator") if auth_file else None
    if url and not str(url).startswith(("http://", "https://")):
        raise ConfigError(f"project URL must start with http:// or https://: {url}")
    timeout = float(_or(pick("timeout", "BOINC_GAHP_TIMEOUT", "timeout"), 60.0))
    insecure = pick("insecure", "BOINC_GAHP_INSECURE", "insecure")
    ca_bundle = pick("ca_bundle", "BOINC_GAHP_CA_BUNDLE", "ca_bundle")
    verify: bool | str = True
    if insecure and str(insecure).lower() not in ("0", "false", "no"):
        verify = False
    elif ca_bundle:
        verify = str(ca_bundle)
    return BoincConfig(
        project_url=str(url) if url else None,
        authenticator=authenticator,
        timeout=timeout,
        verify=verify,
        lease_seconds=float(data.get("lease_seconds", 3600.0)),
        retries=max(0, int(_or(pick("retries", "BOINC_GAHP_RETRIES", "retries"), 4))),
        command_deadline=float(
            _or(pick("command_timeout", "BOINC_GAHP_COMMAND_TIMEOUT", "command_timeout"), 290.0)
        ),
    )
