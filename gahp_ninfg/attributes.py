"""JOB_CREATE attributes into a job request (pure).

User options from the client configuration arrive first, so for single-valued attributes
the first occurrence wins; ``argument``, ``environment``, ``rsl_extensions`` and
``condor_option`` (the Condor invoke server's submit commands) repeat.
Unknown attributes are ignored, as the Ninf-G servers do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import attrs

from gahp_ninfg.errors import NinfgError

REPEATED = frozenset({"argument", "environment", "rsl_extensions", "condor_option"})
BACKENDS = ("NORMAL", "MPI", "BLACS")


class AttributeProblem(NinfgError, ValueError):
    """A missing or malformed attribute: the job fails with this message."""


@attrs.frozen
class JobRequest:
    """What a JOB_CREATE asks for."""

    executable: str
    arguments: tuple[str, ...] = ()
    environment: Mapping[str, str] = attrs.field(factory=dict)
    count: int = 1
    backend: str = "NORMAL"
    staging: bool = False
    auth_number: str | None = None
    work_directory: str | None = None
    redirect: bool = False
    stdout_file: str | None = None
    stderr_file: str | None = None
    tmp_dir: str | None = None
    status_polling: float = 0.0
    max_wall_minutes: int | None = None
    queue: str | None = None
    project: str | None = None
    host_count: int | None = None
    max_memory_mb: int | None = None
    condor_options: tuple[str, ...] = ()
    """``condor_option`` values as sent (checked by the Condor invoke server)."""


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "yes", "1", "on"):
        return True
    if v in ("false", "no", "0", "off", ""):
        return False
    raise AttributeProblem(f"{name} must be true or false, not {value!r}")


def _int(name: str, value: str, minimum: int = 0) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise AttributeProblem(f"{name} must be a whole number, not {value!r}") from None
    if n < minimum:
        raise AttributeProblem(f"{name} must be at least {minimum}, not {n}")
    return n


def _environment(items: Sequence[str], base: Mapping[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        name = name.strip()
        if (
            not name
            or not (name[0].isalpha() or name[0] == "_")
            or not all(c.isalnum() or c == "_" for c in name)
        ):
            raise AttributeProblem(f"bad environment variable {item!r}")
        # NAME alone: the variable without a value of its own; pass the server's if it has one
        env[name] = value if eq else base.get(name, "")
    return env


@attrs.frozen
class _Attributes:
    """A JOB_CREATE's attributes: the first value of each single-valued one, every value of
    a repeated one (in order)."""

    single: dict[str, str]
    repeated: dict[str, list[str]]

    @classmethod
    def collect(cls, pairs: Sequence[tuple[str, str]]) -> _Attributes:
        """Gather ``pairs`` (the user options come first, so theirs win)."""
        single: dict[str, str] = {}
        repeated: dict[str, list[str]] = {k: [] for k in REPEATED}
        for name, value in pairs:
            if name in REPEATED:
                repeated[name].append(value)
            elif name not in single:
                single[name] = value
        return cls(single, repeated)

    def get(self, name: str, default: str = "") -> str:
        """The value as sent, ``default`` when absent."""
        return self.single.get(name, default)

    def text(self, name: str) -> str | None:
        """The value stripped; None when absent or blank."""
        return self.single.get(name, "").strip() or None

    def integer(self, name: str, minimum: int = 1) -> int | None:
        """The value as a whole number of at least ``minimum``; None when absent or blank."""
        value = self.single.get(name, "").strip()
        return _int(name, value, minimum) if value else None


def parse_attributes(
    pairs: Sequence[tuple[str, str]], base_env: Mapping[str, str] | None = None
) -> JobRequest:
    """Build a :class:`JobRequest`; raise :class:`AttributeProblem` saying what is wrong."""
    attributes = _Attributes.collect(pairs)
    exe = attributes.text("executable_path")
    if exe is None:
        raise AttributeProblem("executable_path is missing")
    backend = _backend(attributes.get("backend", "NORMAL"))
    staging = _bool("staging", attributes.get("staging", "false"))
    work = attributes.text("work_directory")
    if work is None and not staging:
        work = os.path.dirname(exe) or None
    redirect = _bool("redirect_enable", attributes.get("redirect_enable", "false"))
    status_polling = _polling(attributes.get("status_polling", "0"))
    wall = attributes.integer("max_wall_time") or attributes.integer("max_time")
    return JobRequest(
        executable=exe,
        arguments=tuple(attributes.repeated["argument"]),
        environment=_environment(attributes.repeated["environment"], base_env or os.environ),
        count=_int("count", attributes.get("count", "1") or "1", 1),
        backend=backend,
        staging=staging,
        auth_number=attributes.text("auth_number"),
        work_directory=work,
        redirect=redirect,
        stdout_file=attributes.text("stdout_file") if redirect else None,
        stderr_file=attributes.text("stderr_file") if redirect else None,
        tmp_dir=attributes.text("tmp_dir"),
        status_polling=status_polling,
        max_wall_minutes=wall,
        queue=attributes.text("queue_name"),
        project=attributes.text("project"),
        host_count=attributes.integer("host_count"),
        max_memory_mb=attributes.integer("max_memory"),
        condor_options=tuple(attributes.repeated["condor_option"]),
    )


def _backend(value: str) -> str:
    """``backend``, upper-case (NORMAL when blank), one of :data:`BACKENDS`."""
    backend = value.strip().upper() or "NORMAL"
    if backend not in BACKENDS:
        raise AttributeProblem(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    return backend


def _polling(value: str) -> float:
    """``status_polling`` in seconds (0 when blank or negative)."""
    polling = value.strip() or "0"
    try:
        return max(0.0, float(polling))
    except ValueError:
        raise AttributeProblem(f"status_polling must be a number, not {polling!r}") from None
