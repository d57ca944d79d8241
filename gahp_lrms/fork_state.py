"""What a fork job's supervisor recorded (``state.json``), read into a typed record.

The supervisor (:mod:`gahp_lrms.fork_supervisor`) runs on the standard library alone and
writes plain JSON; the driver reads it here, once, into :class:`SupervisorState`."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from gahp_lrms.model import DriverError

__all__ = ["Phase", "SupervisorState"]


class Phase(enum.Enum):
    """Where the supervisor is with the job."""

    WAITING = "waiting"  # not started yet (held, or about to start)
    RUNNING = "running"
    FINISHED = "finished"
    REMOVED = "removed"  # removed before it started
    FAILED = "failed"  # the supervisor itself failed

    @property
    def final(self) -> bool:
        return self in (Phase.FINISHED, Phase.REMOVED, Phase.FAILED)


def _opt(kind: type, value: Any) -> Any:
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not {kind.__name__}")
    return value


@attrs.frozen
class SupervisorState:
    """One reading of ``state.json``."""

    phase: Phase
    supervisor_pid: int | None = None
    supervisor_start: int | None = None  # the supervisor's start time, in clock ticks
    hostname: str | None = None
    pgid: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    exit_reason: str | None = None
    wallclock_s: float | None = None
    user_cpu_s: float | None = None
    sys_cpu_s: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: object) -> SupervisorState:
        """The record of a decoded ``state.json``; DriverError names ``where`` when it is
        not one."""
        try:
            return cls(
                phase=Phase(data["phase"]),
                **{
                    field.name: _opt(_KINDS[field.name], data.get(field.name))
                    for field in attrs.fields(cls)
                    if field.name != "phase"
                },
            )
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise DriverError(f"cannot read {where}: not a supervisor state ({exc})") from exc


_KINDS: dict[str, type] = {
    "supervisor_pid": int,
    "supervisor_start": int,
    "hostname": str,
    "pgid": int,
    "started_at": float,
    "ended_at": float,
    "exit_code": int,
    "exit_signal": int,
    "exit_reason": str,
    "wallclock_s": float,
    "user_cpu_s": float,
    "sys_cpu_s": float,
}
