"""``boinc-emulator``: run an emulated BOINC project until SIGTERM or SIGINT.

Prints ``URL <project url>`` and ``AUTHENTICATOR <authenticator>`` (then one
``USER <name> <authenticator>`` line per ``--add-user``) on stdout, flushed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from gahp_core import __version__

from .apps import APPS
from .faults import FAULT_KINDS, parse_fault_spec
from .server import EmulatorServer


def build_parser() -> argparse.ArgumentParser:
    apps = "; ".join(
        f"{a.name}: {len(a.inputs)} input(s) -> {', '.join(a.outputs)}" for a in APPS.values()
    )
    p = argparse.ArgumentParser(
        prog="boinc-emulator",
        description="An emulated BOINC 8.3 project (remote job submission RPCs) on loopback, "
        "with a simulated volunteer that runs jobs locally.",
        epilog=f"Applications: {apps}. Fault kinds: {', '.join(FAULT_KINDS)}.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument(
        "--state-dir",
        help="directory for the database and files (kept across "
        "restarts); default: a temporary directory removed at exit",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    p.add_argument("--project-path", default="/boinctest/", help="URL path of the project")
    p.add_argument(
        "--job-delay",
        type=float,
        default=0.5,
        metavar="S",
        help="seconds a job stays UNSENT, then at least IN_PROGRESS (default 0.5)",
    )
    p.add_argument(
        "--volunteers", type=int, default=2, metavar="N", help="jobs run concurrently (default 2)"
    )
    p.add_argument(
        "--quorum",
        type=int,
        default=1,
        metavar="N",
        help="instances per job that must agree (min_quorum = target_nresults)",
    )
    p.add_argument(
        "--paused",
        action="store_true",
        help="start with the volunteer paused (SIGUSR1 pauses, SIGUSR2 resumes)",
    )
    p.add_argument(
        "--inline-apps",
        action="store_true",
        help="run apps inside the emulator instead of as programs (faster)",
    )
    p.add_argument(
        "--completed-job-mode",
        choices=("crash", "full"),
        default="crash",
        help="query_completed_job without canonical result: 'crash' = HTTP 500 with a"
        " truncated body like BOINC 8.3 on PHP 8 (default), 'full' = answer",
    )
    p.add_argument(
        "--mod-time-resolution",
        type=float,
        default=1.0,
        metavar="S",
        help="granularity of job mod_time (MySQL TIMESTAMP: 1 s, the default)",
    )
    p.add_argument(
        "--expire",
        action="store_true",
        help="abort and retire batches past their expire_time, as a project that "
        "runs BOINC's html/ops/expire_batches (master, not 8.3) from cron; default: "
        "never, as a plainly created project",
    )
    p.add_argument(
        "--no-expire", action="store_true", help="the default (kept for old command lines)"
    )
    p.add_argument(
        "--add-user",
        action="append",
        default=[],
        metavar="NAME[:nosubmit][:AUTHENTICATOR]",
        help="create another user, optionally with a given authenticator (repeatable)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[,count=N][,rpc=NAME][,seconds=S]",
        help="inject a fault into the next matching requests (repeatable)",
    )
    p.add_argument(
        "--allow-remote", action="store_true", help="allow binding a non-loopback address"
    )
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="log requests on stderr (authenticators are masked)",
    )
    return p


def _server(args: argparse.Namespace) -> EmulatorServer:
    """The emulator the command line describes (ValueError for a bad setting)."""
    return EmulatorServer(
        state_dir=args.state_dir,
        host=args.host,
        port=args.port,
        job_delay=args.job_delay,
        volunteers=args.volunteers,
        quorum=args.quorum,
        project_path=args.project_path,
        allow_remote=args.allow_remote,
        inline_apps=args.inline_apps,
        paused=args.paused,
        completed_job_mode=args.completed_job_mode,
        mod_time_resolution=args.mod_time_resolution,
        expire_batches=args.expire and not args.no_expire,
        log=sys.stderr if args.verbose else None,
    )


def _handle_signals(srv: EmulatorServer, stop: threading.Event) -> None:
    """SIGUSR1/SIGUSR2 pause and resume the volunteer; SIGTERM and SIGINT set ``stop``."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signum == getattr(signal, "SIGUSR1", None):
            srv.pause_volunteer()
        elif signum == getattr(signal, "SIGUSR2", None):
            srv.resume_volunteer()
        else:
            stop.set()

    for name in ("SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), on_signal)


def _user_lines(srv: EmulatorServer, specs: Sequence[str]) -> list[str]:
    """Create the ``--add-user`` users; one ``USER name authenticator`` line each."""
    lines = []
    for spec in specs:
        name, *flags = spec.split(":")
        auth = next((f for f in flags if f and f != "nosubmit"), None)
        lines.append(
            f"USER {name} {srv.add_user(name, 'nosubmit' not in flags, authenticator=auth)}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        faults = [parse_fault_spec(s) for s in args.fault]
        srv = _server(args)
    except ValueError as e:
        print(f"boinc-emulator: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    _handle_signals(srv, stop)
    try:
        srv.start()
    except OSError as e:
        print(f"boinc-emulator: cannot serve on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    try:
        for f in faults:
            srv.inject_fault(f.kind, f.count, f.rpc, f.seconds)
        lines = [f"URL {srv.url}", f"AUTHENTICATOR {srv.authenticator}"]
        print("\n".join(lines + _user_lines(srv, args.add_user)), flush=True)
        print(
            f"boinc-emulator: serving {srv.url} (state in {srv.state_dir}); "
            "stop with Ctrl-C or SIGTERM",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
