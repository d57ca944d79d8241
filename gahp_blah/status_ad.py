"""The result ClassAd of BLAH_JOB_STATUS (pure)."""

from __future__ import annotations

from gahp_lrms import JobInfo


def quote(text: str) -> str:
    """A ClassAd string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def status_ad(native_id: str, info: JobInfo) -> str:
    """``[ BatchJobId = "..."; JobStatus = N; ... ]`` with what is known of the job."""
    attrs: list[tuple[str, str]] = [
        ("BatchJobId", quote(native_id)),
        ("JobStatus", str(int(info.status))),
    ]
    if info.exit_signal is not None:
        attrs += [("ExitBySignal", "true"), ("ExitSignal", str(info.exit_signal))]
    elif info.exit_code is not None:
        attrs += [("ExitBySignal", "false"), ("ExitCode", str(info.exit_code))]
    if info.exit_reason:
        attrs.append(("ExitReason", quote(info.exit_reason)))
    for name, value in (
        ("RemoteWallClockTime", info.wallclock_s),
        ("RemoteUserCpu", info.user_cpu_s),
        ("RemoteSysCpu", info.sys_cpu_s),
    ):
        if value is not None:
            attrs.append((name, _number(value)))
    if info.worker_node:
        attrs.append(("WorkerNode", quote(info.worker_node)))
    if info.hold_reason:
        attrs.append(("HoldReason", quote(info.hold_reason)))
    return "[ " + " ".join(f"{k} = {v};" for k, v in attrs) + " ]"
