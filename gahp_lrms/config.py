"""The options of each job driver (a ``[driver.NAME]`` table of blahpd.toml, ``--driver-option``
of the Ninf-G invoke servers, the ``config`` of :func:`gahp_lrms.get_driver`), typed.

Each driver's options are an attrs class read by :func:`gahp_core.load_settings`: an unknown
key, or a value of the wrong type (a string where a number goes, ``"maybe"`` for a boolean),
is refused naming the key. Defaults are those documented in docs/operators.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from gahp_core import (
    ConfigError,
    http_url,
    non_empty_string,
    non_negative_int,
    non_negative_number,
    path,
    positive_int,
    positive_number,
    setting,
    strict_bool,
)

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_STALE_LIMIT",
    "DEFAULT_TIMEOUT",
    "BoincDriverConfig",
    "CommandConfig",
    "CondorConfig",
    "DriverConfig",
    "ForkConfig",
    "LsfConfig",
    "PbsConfig",
    "RegistryConfig",
    "SgeConfig",
    "SlurmConfig",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds allowed to one batch-system command unless the driver's config says otherwise."""
DEFAULT_INTERVAL = 5.0
"""Seconds a bulk query's answer is current (HTCondor polls each job every 60 s or more)."""
DEFAULT_STALE_LIMIT = 1800.0
"""Seconds a last known state is answered while the batch system does not answer."""

FLAVORS = ("auto", "pbspro", "torque")


def _flavor(value: object, key: str) -> str:
    word = non_empty_string(value, key).strip().lower()
    if word not in FLAVORS:
        raise ConfigError(f"{key} must be one of {', '.join(FLAVORS)}, not {value!r}")
    return word


def _port(value: object, key: str) -> str:
    """A TCP port: a number, or its digits as a string."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ConfigError(f"{key} must be a port number, not {value!r}")
    return str(value)


@attrs.frozen
class DriverConfig:
    """A driver without options."""


@attrs.frozen
class RegistryConfig(DriverConfig):
    """The status registry's options (see :class:`gahp_lrms.registry.DriverRegistry`)."""

    status_registry: bool = setting(strict_bool, True)
    """Answer status from one bulk query per interval (false: each job on its own)."""
    status_interval: float = setting(non_negative_number, DEFAULT_INTERVAL)
    """Seconds a state may be old."""
    stale_limit_s: float = setting(non_negative_number, DEFAULT_STALE_LIMIT)
    """Seconds the last known states are answered while the batch system does not answer."""


def _exported(**values: object) -> dict[str, str]:
    """The variables among ``values`` that are set, as strings."""
    return {name: str(value) for name, value in values.items() if value}


@attrs.frozen
class CommandConfig(RegistryConfig):
    """Options of every driver run through command-line tools (Slurm, PBS, SGE, LSF)."""

    def environment(self) -> dict[str, str]:
        """The environment variables the options give the batch system's commands."""
        return {}

    bin_dir: Path | None = setting(path)
    """Where the commands are (default: PATH, or what the system's own settings say)."""
    command_timeout: float = setting(positive_number, DEFAULT_TIMEOUT)
    submit_timeout: float = setting(positive_number, 60.0)
    cancel_wait_s: float = setting(non_negative_number, 10.0)
    """How long ``cancel`` waits for a running job to end."""


@attrs.frozen
class _SlurmCommands(CommandConfig):
    """Options of the drivers that run Slurm's commands: ``slurm_conf`` (exported as
    SLURM_CONF)."""

    slurm_conf: Path | None = setting(path)

    def environment(self) -> dict[str, str]:
        return _exported(SLURM_CONF=self.slurm_conf)


@attrs.frozen
class SlurmConfig(_SlurmCommands):
    """``slurm``: ``slurm_conf`` (exported as SLURM_CONF) and ``suspend_running`` (hold a
    running job by suspending it)."""

    suspend_running: bool = setting(strict_bool, True)


@attrs.frozen
class PbsConfig(_SlurmCommands):
    """``pbs``: ``flavor`` (auto, pbspro, torque), and for Torque-style wrappers of Slurm
    ``slurm_conf`` and ``slurm_status`` (ask Slurm for exit codes)."""

    flavor: str = setting(_flavor, "auto")
    slurm_status: bool = setting(strict_bool, True)


@attrs.frozen
class SgeConfig(CommandConfig):
    """``sge``: the cell (exported as SGE_ROOT, SGE_CELL, SGE_QMASTER_PORT), the parallel
    environment, ``suspend_running`` and ``accounting_wait_s``."""

    sge_root: Path | None = setting(path)
    sge_cell: str | None = setting(non_empty_string)
    sge_qmaster_port: str | None = setting(_port)
    parallel_environment: str | None = setting(non_empty_string)
    suspend_running: bool = setting(strict_bool, True)
    accounting_wait_s: float = setting(non_negative_number, 60.0)

    def environment(self) -> dict[str, str]:
        return _exported(
            SGE_ROOT=self.sge_root, SGE_CELL=self.sge_cell, SGE_QMASTER_PORT=self.sge_qmaster_port
        )


@attrs.frozen
class LsfConfig(CommandConfig):
    """``lsf``: ``lsf_envdir`` (exported as LSF_ENVDIR)."""

    lsf_envdir: Path | None = setting(path)

    def environment(self) -> dict[str, str]:
        return _exported(LSF_ENVDIR=self.lsf_envdir)


def _attribute_name(value: object, key: str) -> str:
    """A ClassAd attribute name."""
    word = non_empty_string(value, key).strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,99}", word):
        raise ConfigError(f"{key} must be a ClassAd attribute name, not {value!r}")
    return word


def _one_line(value: object, key: str) -> str:
    """A non-empty string of one line."""
    text = non_empty_string(value, key)
    if any(c in text for c in "\r\n\0"):
        raise ConfigError(f"{key} must be one line")
    return text


@attrs.frozen
class CondorConfig(RegistryConfig):
    """``condor``: which pool and schedd (``condor_config``, ``collector``, ``schedd_name``;
    none: the pool of ``$CONDOR_CONFIG``), timeouts, how a job's queue is written
    (``queue_attribute``, ``queue_requirements``) and ``inherit_environment``."""

    condor_config: Path | None = setting(path)
    """The HTCondor configuration the bindings read (exported to them as CONDOR_CONFIG)."""
    collector: str | None = setting(_one_line)
    """A remote pool's collector (``host[:port]``): the schedd is located through it."""
    schedd_name: str | None = setting(_one_line)
    """The schedd's name (default: the pool's only, or the local, schedd)."""
    schedd_timeout: float = setting(positive_number, DEFAULT_TIMEOUT)
    submit_timeout: float = setting(positive_number, 60.0)
    cancel_wait_s: float = setting(non_negative_number, 10.0)
    """How long ``cancel`` waits for a removed job to leave the queue."""
    queue_attribute: str = setting(_attribute_name, "BatchQueue")
    """The job attribute a job's queue (BLAH ``Queue``) is written to."""
    queue_requirements: str | None = setting(_one_line)
    """A ClassAd expression ANDed to the job's requirements, ``{queue}`` standing for the
    queue as a ClassAd string (e.g. ``TARGET.Partition == {queue}``)."""
    inherit_environment: bool = setting(strict_bool, False)
    """The job gets the server's environment too (off: only its own; HTCondor shows a job's
    environment to every user of the pool)."""
    python: str | None = setting(non_empty_string)
    """Interpreter for the bindings' helper process (default: this one)."""


@attrs.frozen
class ForkConfig(DriverConfig):
    """``fork``: the supervisor's interpreter, the kill grace and the start timeout."""

    python: str | None = setting(non_empty_string)
    """Interpreter for the supervisor (default: this one)."""
    kill_grace_s: float = setting(non_negative_number, 2.0)
    start_timeout_s: float = setting(positive_number, 15.0)
    keep_finished_s: float = setting(non_negative_number, 7 * 86400.0)
    """Seconds a finished job is remembered: its directory when its final status is never
    asked for; once answered, the directory goes at once and only a small record of the
    final status stays this long (a client asking again gets the same answer)."""


@attrs.frozen
class BoincDriverConfig(RegistryConfig):
    """``boinc``: the default project, the HTTP client, batching and leases."""

    project_url: str | None = setting(http_url)
    """The default project (a job may name its own)."""
    authenticator_file: Path | None = setting(path)
    timeout: float = setting(positive_number, 60.0)
    retries: int = setting(non_negative_int, 4)
    ca_bundle: Path | None = setting(path)
    insecure: bool = setting(strict_bool, False)
    lease_seconds: float = setting(positive_number, 7 * 24 * 3600.0)
    rpc_timeout: float = setting(positive_number, 280.0)
    batch_window_s: float = setting(non_negative_number, 1.0)
    batch_max_jobs: int = setting(positive_int, 1000)
    submit_attempts: int = setting(positive_int, 3)
    output_archive_max_bytes: int = setting(positive_int, 4 << 30)
    """Bytes a zip output may unpack to (its members' total), declared or written."""
    output_archive_max_members: int = setting(positive_int, 10_000)
    """Entries a zip output may hold."""
    output_archive_max_ratio: int = setting(positive_int, 100)
    """Bytes a zip output may unpack to per byte of its own, beyond 16 MiB."""
