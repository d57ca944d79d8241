"""Assemble a server from plugins and run it: the part every console script shares."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

import pluggy

from gahp_core import __version__
from gahp_core._config import ConfigError
from gahp_core._dialect import Dialect
from gahp_core._errors import GahpError
from gahp_core._gahp_dialect import GahpDialect
from gahp_core._hooks import (
    BackendContext,
    BackendNotFound,
    BadBackend,
    HookFailed,
    call_hook,
    first_result,
    load_backend,
    plugin_manager,
)
from gahp_core._logs import REDACTOR, logs_to_file, setup_logging
from gahp_core._protocol import Version
from gahp_core._server import GahpServer, ServerOptions

log = logging.getLogger("gahp")


def add_core_options(parser: argparse.ArgumentParser, log_env: str = "GAHP_LOG") -> None:
    """The options every GAHP server takes."""
    g = parser.add_argument_group("server")
    g.add_argument(
        "--log",
        metavar="FILE",
        default=os.environ.get(log_env) or os.environ.get("GAHP_LOG"),
        help=f"log file ('-' for stderr; default ${log_env}, else warnings to stderr)",
    )
    g.add_argument(
        "--log-level",
        default=os.environ.get("GAHP_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default INFO)",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("GAHP_WORKERS", "8")),
        help="threads for blocking work (default 8)",
    )
    g.add_argument(
        "--max-in-flight",
        type=int,
        default=int(os.environ.get("GAHP_MAX_IN_FLIGHT", "0")),
        help="answer 'F Threads limit reached' above this many pending requests (0: no limit)",
    )
    g.add_argument(
        "--slow-handler",
        metavar="SECONDS",
        type=float,
        default=float(os.environ.get("GAHP_SLOW_HANDLER", "1.0")),
        help="log a warning when a handler holds the event loop longer (0: never; default 1)",
    )


CORE_OPTIONS = ("--log", "--log-level", "--workers", "--max-in-flight", "--slow-handler")
"""The options of every server (besides ``--version``, ``--help``): a backend's must differ."""


def add_backend_options(pm: pluggy.PluginManager, parser: argparse.ArgumentParser) -> None:
    """Let each backend add its options; one that clashes with another's is refused by name."""
    for impl in reversed(pm.hook.gahp_add_options.get_hookimpls()):
        try:
            impl.function(parser=parser)
        except argparse.ArgumentError as exc:
            raise BadBackend(
                f"backend {impl.plugin_name}: hook gahp_add_options: {exc}; the options every"
                f" server has ({', '.join(CORE_OPTIONS)}) are taken: prefix the backend's with"
                " its name"
            ) from exc
        except Exception as exc:
            raise HookFailed(impl.plugin_name, "gahp_add_options", exc) from exc


def build_server(pm: pluggy.PluginManager, options: argparse.Namespace) -> GahpServer:
    """Collect the dialect, the version and every plugin's commands into a server."""
    dialect = dialect_of(pm)
    version = first_result(pm, "gahp_version") or Version(__version__, "Python GAHP")
    server_options = ServerOptions(
        workers=max(1, options.workers),
        max_in_flight=max(0, options.max_in_flight),
        slow_handler=max(0.0, getattr(options, "slow_handler", ServerOptions.slow_handler)),
    )
    server = GahpServer(version, dialect, server_options)
    pm.register(dialect.builtins(), name="builtins")

    def warn(message: str) -> None:
        log.warning("%s", message)
        if not dialect.uses_stderr and logs_to_file():
            print(f"warning: {message}", file=sys.stderr, flush=True)

    context = BackendContext(
        options=options,
        logger=logging.getLogger("gahp.backend"),
        redact=REDACTOR.add,
        run_in_worker=server.run_in_worker,
        spawn=server.spawn,
        notify=server.notify,
        event_loop=server.event_loop,
        warn=warn,
    )
    builtin = pm.get_plugin("builtins")
    for name, group in call_hook(pm, "gahp_commands", context=context):
        commands = list(group or ())
        if not commands and pm.get_plugin(name) is not builtin:
            raise BadBackend(f"backend {name}: hook gahp_commands returned no command")
        server.add_commands(commands)
    for callback in context.shutdown_callbacks:
        server.on_shutdown(callback)
    return server


def dialect_of(pm: pluggy.PluginManager) -> Dialect:
    """The dialect the registered backend speaks."""
    return first_result(pm, "gahp_dialect") or GahpDialect()


def run(pm: pluggy.PluginManager, options: argparse.Namespace) -> int:
    """Build the server, speak the protocol on stdin/stdout, and exit promptly."""
    quiet_stderr = dialect_of(pm).uses_stderr
    if quiet_stderr and options.log in ("-", "stderr"):
        print("error: this server's stderr carries its protocol: log to a file", file=sys.stderr)
        return 2
    setup_logging(options.log, options.log_level, stderr_default=not quiet_stderr)
    try:
        server = build_server(pm, options)
    except Exception as exc:
        _report_startup_failure(exc, quiet_stderr)
        return 2
    log.info("starting: %s", server.version.banner())
    code = asyncio.run(server.serve())
    log.info("stopped")
    logging.shutdown()
    return code


def _report_startup_failure(exc: Exception, quiet_stderr: bool) -> None:
    """One clear line, never a traceback on stderr: HTCondor shows a GAHP's stderr to
    the administrator. The traceback goes to the log file, where there is one."""
    message = str(exc) if isinstance(exc, GahpError) else _startup_error(exc)
    phrased = isinstance(exc, ConfigError) or (isinstance(exc, HookFailed) and exc.phrased)
    if logs_to_file():
        log.error("cannot start: %s", message, exc_info=not phrased)
    elif isinstance(exc, HookFailed) and not phrased:
        message += " (--log FILE for the traceback)"
    if not quiet_stderr:
        print(f"error: cannot start: {message}", file=sys.stderr)


def _startup_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}:{where} (as user {_user()})"
    return f"{type(exc).__name__}: {exc}"


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def exit_now(code: int) -> None:
    """Exit at once, without waiting for worker threads still blocked in handlers."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main_for_backend(
    name: str,
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    log_env: str = "GAHP_LOG",
    module: str | None = None,
) -> None:
    """Entry point of a backend's own console script (e.g. ``boinc-gahp``); ``module``:
    the backend's plugin module, loaded without looking up the installed entry points."""
    pm = plugin_manager()
    try:
        load_backend(pm, name, module)
    except BackendNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    parser = argparse.ArgumentParser(prog=prog, description=f"GAHP server: {name} backend")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_core_options(parser, log_env)
    try:
        add_backend_options(pm, parser)
    except GahpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    options = parser.parse_args(argv)
    exit_now(run(pm, options))
