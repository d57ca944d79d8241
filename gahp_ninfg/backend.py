"""The Ninf-G invoke-server backend: JOB_CREATE, JOB_STATUS, JOB_DESTROY on a job driver.

The Ninf-G dialect (:mod:`gahp_ninfg.dialect`, returned by the ``gahp_dialect`` hook
below) supplies QUERY_FEATURES and EXIT; this plugin adds the job requests and advertises
STAGING_AUTH_NUMBER (the auth number is written to a private file passed to the
executable as ``--authNumberFile=<path>``).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gahp_core import BackendContext, BadRequest, Command, Version, from_text, hookimpl
from gahp_lrms import DriverError, get_driver
from gahp_ninfg import __version__, condor
from gahp_ninfg.dialect import NinfgDialect
from gahp_ninfg.jobs import JobManager

log = logging.getLogger("gahp.ninfg")

FEATURES = ("STAGING_AUTH_NUMBER",)
DEFAULT_POLLING = {"fork": 1.0}
"""Seconds between status checks when the client leaves it to the server (0)."""


@hookimpl
def gahp_dialect() -> NinfgDialect:
    return NinfgDialect(features=FEATURES)


@hookimpl
def gahp_version() -> Version:
    return Version(__version__, "Python Ninf-G invoke server")


@hookimpl
def gahp_add_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("Ninf-G")
    g.add_argument(
        "--driver",
        default="fork",
        help="job driver: fork, slurm, pbs, sge, lsf, condor (default fork)",
    )
    g.add_argument(
        "--driver-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a job driver option (repeatable), e.g. slurm_conf=/etc/slurm/slurm.conf",
    )
    g.add_argument(
        "--ignored-argument", action="append", default=[], help=argparse.SUPPRESS
    )  # what the ng_invoke_server.* command line had that it does not know: logged


def _driver_options(items: Sequence[str]) -> dict[str, str | int | float]:
    """``KEY=VALUE`` items; a VALUE that reads as a number is one (the driver checks types)."""
    options = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise DriverError(f"driver option {item!r} is not KEY=VALUE")
        options[key.strip()] = from_text(value)
    return options


class NinfgBackend:
    """The job requests, bound to one job manager."""

    def __init__(self, manager: JobManager) -> None:
        self.manager = manager

    def job_create(self, args: Sequence) -> tuple[str, ...]:
        reqid = args[0]
        pairs = args[1] if len(args) > 1 else ()
        self.manager.create(reqid, pairs)
        return ()

    def job_status(self, args: Sequence[str]) -> tuple[str, ...]:
        return (self.manager.status(args[0]),)

    def job_destroy(self, args: Sequence[str]) -> tuple[str, ...]:
        self.manager.destroy(args[0])
        return ()

    def commands(self) -> list[Command]:
        def cmd(name: str, fn) -> Command:
            return Command(name, fn, asynchronous=False, nargs=1)

        return [
            cmd("JOB_CREATE", self.job_create),
            cmd("JOB_STATUS", self.job_status),
            cmd("JOB_DESTROY", self.job_destroy),
        ]


@hookimpl
def gahp_commands(context: BackendContext) -> list[Command]:
    name = context.options.driver
    for arg in context.options.ignored_argument:
        log.warning("ignoring unknown command-line argument %r", arg)
    state = Path(tempfile.mkdtemp(prefix=f"ng-invoke-{name}-"))
    try:
        driver = get_driver(
            name,
            _driver_options(context.options.driver_option),
            state / "lrms",
            run_in_worker=context.run_in_worker,
        )
    except DriverError as exc:
        shutil.rmtree(state, ignore_errors=True)
        raise BadRequest(str(exc)) from None
    manager = JobManager(
        driver,
        context.run_in_worker,
        context.spawn,
        context.notify,
        DEFAULT_POLLING.get(name, 3.0),
        state / "jobs",
        **(condor.MANAGER_OPTIONS if name == "condor" else {}),
    )

    async def shutdown() -> None:
        """Cancel every job, then remove everything this server wrote (job specs hold
        the jobs' environments)."""
        try:
            await manager.shutdown()
        finally:
            shutil.rmtree(state, ignore_errors=True)

    context.on_shutdown(shutdown)
    return NinfgBackend(manager).commands()
