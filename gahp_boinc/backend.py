"""The BOINC backend: the BOINC_* commands as a gahp_core plugin.

Every asynchronous command captures, when it arrives, the project selected at that
moment, so one process serves many projects and accounts in any interleaving.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Mapping, Sequence

import attrs

from gahp_boinc import __version__
from gahp_boinc._client import BoincClient
from gahp_boinc._config import BoincConfig, load_config
from gahp_boinc._errors import BoincError
from gahp_boinc._outputs import FetchRequest
from gahp_boinc._rpc import JobOptions, JobParams, Project
from gahp_boinc._submit import BoincJob, SubmitRequest
from gahp_core import (
    BackendContext,
    BadRequest,
    Command,
    ConfigError,
    Version,
    error_text,
    hookimpl,
    http_url,
    out_of_service,
)

log = logging.getLogger("gahp.boinc")

NULL = "NULL"


@hookimpl
def gahp_version() -> Version:
    return Version(__version__, "Python BOINC GAHP")


@hookimpl
def gahp_add_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("BOINC")
    g.add_argument(
        "--config", metavar="FILE", help="TOML configuration file (default $BOINC_GAHP_CONFIG)"
    )
    g.add_argument(
        "--project-url",
        help="default project URL, used until BOINC_SELECT_PROJECT (default $BOINC_PROJECT_URL)",
    )
    g.add_argument(
        "--authenticator-file",
        metavar="FILE",
        help="file holding the default project's authenticator (default $BOINC_AUTHENTICATOR_FILE)",
    )
    g.add_argument(
        "--timeout",
        type=float,
        help="seconds for an HTTP request, its whole reply included (default 60)",
    )
    g.add_argument(
        "--retries",
        type=int,
        help="retries of an idempotent RPC after a transport error or HTTP 502/503/504 (default 4)",
    )
    g.add_argument(
        "--command-timeout",
        type=float,
        help="seconds after which a command is answered with an error (default 290: "
        "HTCondor ignores results later than 300 s)",
    )
    g.add_argument(
        "--max-reply-bytes",
        type=int,
        help="largest RPC reply accepted, in bytes (default 67108864: 64 MiB)",
    )
    g.add_argument("--ca-bundle", metavar="FILE", help="CA certificates for https projects")
    g.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="do not verify TLS certificates (not for production)",
    )


def _bad(msg: str) -> BadRequest:
    return BadRequest(msg)


def _count(text: str, what: str) -> int:
    if not text.isdigit():
        raise _bad(f"{what} is not a count: {text!r}")
    return int(text)


def _number_or_null(text: str, what: str) -> float | None:
    if text == NULL:
        return None
    try:
        return float(text)
    except ValueError:
        raise _bad(f"{what} is not a number: {text!r}") from None


SUBMIT_BATCH_OPTIONS = ("priority", "allocation_priority")
SUBMIT_JOB_OPTIONS = (
    "target_host",
    "target_user",
    "min_quorum",
    "target_nresults",
    "max_error_results",
    "max_total_results",
    "max_success_results",
)
MAX_SUBMIT_OPTIONS = len(SUBMIT_BATCH_OPTIONS) + len(SUBMIT_JOB_OPTIONS)


def _submit_jobs(args: Sequence[str], njobs: int) -> tuple[list[BoincJob], int]:
    """BOINC_SUBMIT's ``njobs`` jobs from ``args[3:]`` (name, argument count, arguments,
    input count, inputs), and the index of the first argument after them."""
    i = 3
    jobs = []
    names = set()
    try:
        for _ in range(njobs):
            name = args[i]
            nargs = _count(args[i + 1], f"argument count of job {name}")
            job_args = tuple(args[i + 2 : i + 2 + nargs])
            if len(job_args) != nargs:
                raise IndexError
            i += 2 + nargs
            nfiles = _count(args[i], f"input file count of job {name}")
            files = [(args[i + 1 + 2 * k], args[i + 2 + 2 * k]) for k in range(nfiles)]
            i += 1 + 2 * nfiles
            if name in names:
                raise _bad(f"job name {name} appears twice")
            names.add(name)
            jobs.append(BoincJob(name=name, args=job_args, inputs=tuple(files)))
    except IndexError:
        raise _bad("BOINC_SUBMIT arguments end before the jobs it announces") from None
    return jobs, i


def _job_params(fixed: Sequence[str]) -> JobParams:
    """The six job parameters BOINC_SUBMIT may carry after its jobs (none: the defaults)."""
    if not fixed:
        return JobParams()
    if len(fixed) != 6:
        raise _bad(
            f"BOINC_SUBMIT has {len(fixed)} arguments after its jobs (0 or 6 expected, then "
            "NAME=VALUE options)"
        )
    vals = [_number_or_null(v, "job parameter") for v in fixed]
    return JobParams(
        rsc_fpops_est=vals[0],
        rsc_fpops_bound=vals[1],
        rsc_memory_bound=vals[2],
        rsc_disk_bound=vals[3],
        delay_bound=vals[4],
        app_version_num=int(vals[5]) if vals[5] is not None else None,
    )


def _option_values(fields: Sequence[str]) -> dict[str, int]:
    """BOINC_SUBMIT's ``NAME=VALUE`` options as integers, each known and given once."""
    values: dict[str, int] = {}
    for field in fields:
        name, _, text = field.partition("=")
        if name not in SUBMIT_BATCH_OPTIONS and name not in SUBMIT_JOB_OPTIONS:
            raise _bad(f"BOINC_SUBMIT option {name[:40]!r} is unknown")
        if name in values:
            raise _bad(f"BOINC_SUBMIT option {name} is given twice")
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()) or len(text) > 12:
            raise _bad(f"BOINC_SUBMIT option {name} is not an integer: {text[:40]!r}")
        values[name] = int(text)
    _check_option_values(values)
    return values


def _check_option_values(values: Mapping[str, int]) -> None:
    """Refuse an option value out of its range."""
    if values.get("allocation_priority", 0) not in (0, 1):
        raise _bad("BOINC_SUBMIT option allocation_priority is 0 or 1")
    for name in ("target_host", "target_user"):
        if values.get(name, 0) < 0:
            raise _bad(f"BOINC_SUBMIT option {name} is a database id (0 or more)")


def submit_options(fields: Sequence[str], params: JobParams) -> tuple[JobParams, JobOptions]:
    """The ``NAME=VALUE`` fields BOINC_SUBMIT may carry after its six job parameters (an
    extension: HTCondor's gridmanager sends none): the batch's ``priority`` and
    ``allocation_priority`` (1 or 0), and for every job of the batch ``target_host``,
    ``target_user`` and the replication values. Each an integer, each at most once."""
    if len(fields) > MAX_SUBMIT_OPTIONS:
        raise _bad(f"BOINC_SUBMIT has {len(fields)} options (at most {MAX_SUBMIT_OPTIONS})")
    values = _option_values(fields)
    params = attrs.evolve(
        params,
        priority=values.get("priority", params.priority),
        allocation_priority=bool(values.get("allocation_priority", params.allocation_priority)),
    )
    try:
        options = JobOptions(
            target_host=values.get("target_host", 0),
            target_user=values.get("target_user", 0),
            min_quorum=values.get("min_quorum"),
            target_nresults=values.get("target_nresults"),
            max_error_results=values.get("max_error_results"),
            max_total_results=values.get("max_total_results"),
            max_success_results=values.get("max_success_results"),
        )
    except ValueError as exc:
        raise _bad(f"BOINC_SUBMIT options: {exc}") from None
    return params, options


class BoincBackend:
    """State shared by the commands: the selected project and the :class:`BoincClient` (its
    connection pool, MD5 cache and submission state serve every project)."""

    def __init__(self, config: BoincConfig, context: BackendContext) -> None:
        self.config = config
        self.context = context
        self.project: Project | None = config.default_project()
        if self.project is not None:
            context.redact(self.project.authenticator)
        self.client = BoincClient(
            timeout=config.timeout,
            verify=config.verify,
            retries=config.retries,
            lease_seconds=config.lease_seconds,
            max_reply_bytes=config.max_reply_bytes,
            run_in_worker=context.run_in_worker,
        )
        context.on_shutdown(self.client.aclose)

    # ---- parsers: run when the request arrives ----------------------------------------------

    def _current(self) -> Project | None:
        return self.project

    def parse_simple(self, args: Sequence[str]) -> tuple[Project | None, tuple[str, ...]]:
        return self._current(), tuple(args)

    def parse_lease(self, args: Sequence[str]) -> tuple[Project | None, tuple[str, ...]]:
        _number_or_null(args[1], "lease time")
        if args[1] == NULL:
            raise _bad("lease time is required")
        return self._current(), tuple(args)

    def parse_submit(self, args: Sequence[str]) -> tuple[Project | None, SubmitRequest | None]:
        if len(args) < 3:
            raise _bad("BOINC_SUBMIT needs batch, app and job count")
        batch, app = args[0], args[1]
        jobs, i = _submit_jobs(args, _count(args[2], "job count"))
        rest = list(args[i:])
        n_fixed = next((k for k, v in enumerate(rest) if "=" in v), len(rest))
        params = _job_params(rest[:n_fixed])
        params, options = submit_options(rest[n_fixed:], params)
        if options != JobOptions():
            jobs = [attrs.evolve(job, options=options) for job in jobs]
        project = self._current()
        if project is None:
            return None, None
        return project, SubmitRequest(
            project=project, batch=batch, app=app, jobs=tuple(jobs), params=params
        )

    def parse_query(self, args: Sequence[str]) -> tuple[Project | None, tuple[str, ...]]:
        min_mod_time = args[0]
        try:
            float(min_mod_time)
        except ValueError:
            raise _bad(f"min_mod_time is not a number: {min_mod_time!r}") from None
        n = _count(args[1], "batch count")
        if len(args) != 2 + n:
            raise _bad(f"batch count {n} does not match the {len(args) - 2} batch names given")
        return self._current(), tuple(args)

    def parse_fetch(self, args: Sequence[str]) -> tuple[Project | None, FetchRequest | None]:
        job, iwd, stderr_file, mode = args[0], args[1], args[2], args[3].upper()
        if mode not in ("ALL", "SOME"):
            raise _bad(f"mode must be ALL or SOME, not {args[3]!r}")
        n = _count(args[4], "file spec count")
        if len(args) != 5 + 2 * n:
            raise _bad(f"file spec count {n} does not match the {len(args) - 5} names given")
        specs = tuple((args[5 + 2 * k], args[6 + 2 * k]) for k in range(n))
        project = self._current()
        if project is None:
            return None, None
        return project, FetchRequest(
            project=project,
            job=job,
            iwd=iwd,
            stderr_file=stderr_file,
            mode=mode,
            specs=specs,
            limits=self.config.archive_limits,
        )

    # ---- handlers: coroutines on the event loop ---------------------------------------------

    def select_project(self, args: Sequence[str]) -> tuple[str, ...]:
        url, auth = args
        try:
            url = http_url(url, "project URL")
        except ConfigError as exc:
            raise _bad(str(exc)) from None
        if not auth or auth == NULL:
            raise _bad("an authenticator is required")
        if not url.endswith("/"):
            url += "/"
        self.context.redact(auth)
        self.project = Project(url=url, authenticator=auth)
        log.info("selected project %s", url)
        return ()

    async def ping(self, parsed) -> tuple[str, ...]:
        project, _ = parsed
        await self.client.ping(project=_need(project))
        return (NULL,)

    async def submit(self, parsed) -> tuple[str, ...]:
        project, req = parsed
        _need(project)
        await self.client.submit_request(req)
        return (NULL,)

    async def query_batches(self, parsed) -> tuple[str, ...]:
        project, args = parsed
        min_mod_time, names = args[0], list(args[2:])
        states = await self.client.query_batch2(
            names, _with_slack(min_mod_time), project=_need(project)
        )
        fields = [NULL, states.server_time]
        for jobs in states.batches:
            fields.append(str(len(jobs)))
            for name, status in jobs:
                fields += (name, status)
        return tuple(fields)

    async def fetch_output(self, parsed) -> tuple[str, ...]:
        project, req = parsed
        _need(project)
        done = await self.client.fetch_request(req)
        return (NULL, str(done.exit_status), f"{done.elapsed_time:f}", f"{done.cpu_time:f}")

    async def abort_jobs(self, parsed) -> tuple[str, ...]:
        project, jobs = parsed
        await self.client.abort_jobs(jobs, project=_need(project))
        return (NULL,)

    async def retire_batch(self, parsed) -> tuple[str, ...]:
        project, (batch,) = parsed
        await self.client.retire_batch(batch, project=_need(project))
        return (NULL,)

    async def set_lease(self, parsed) -> tuple[str, ...]:
        project, (batch, when) = parsed
        await self.client.set_expire_time(batch, float(when), project=_need(project))
        return (NULL,)

    def commands(self) -> list[Command]:
        def cmd(name: str, handler, nargs, parse) -> Command:
            return Command(
                name=name,
                handler=_guard(handler, self.config.command_deadline),
                nargs=nargs,
                parse=parse,
            )

        return [
            Command("BOINC_SELECT_PROJECT", self.select_project, asynchronous=False, nargs=2),
            cmd("BOINC_PING", self.ping, 0, self.parse_simple),
            cmd("BOINC_SUBMIT", self.submit, (3, None), self.parse_submit),
            cmd("BOINC_QUERY_BATCHES", self.query_batches, (2, None), self.parse_query),
            cmd("BOINC_FETCH_OUTPUT", self.fetch_output, (5, None), self.parse_fetch),
            cmd("BOINC_ABORT_JOBS", self.abort_jobs, (1, None), self.parse_simple),
            cmd("BOINC_RETIRE_BATCH", self.retire_batch, 1, self.parse_simple),
            cmd("BOINC_SET_LEASE", self.set_lease, 2, self.parse_lease),
        ]


MOD_TIME_SLACK = 1.0
"""A project stores job mod_time in whole seconds while server_time has a fraction: a job
changed in the same second as the previous query's server_time would never be reported
again. Asking from one second earlier reports such a job (a repeated status is harmless)."""


def _with_slack(min_mod_time: str) -> str:
    t = float(min_mod_time)
    return "0" if t <= 0 else f"{max(0.0, t - MOD_TIME_SLACK):f}"


class NoProject(BoincError):
    """An asynchronous command arrived before any project was selected."""


def _need(project: Project | None) -> Project:
    if project is None:
        raise NoProject(
            "no project selected: send BOINC_SELECT_PROJECT first (or configure a default project)"
        )
    return project


COMMAND_DEADLINE = 290.0
"""HTCondor drops a result that comes more than 300 s after its request: answer before."""


def _guard(handler, deadline: float = COMMAND_DEADLINE):
    """Turn the expected failures into one-line error messages (the error result).

    The authenticator is masked in every message: a server may echo the download URL
    (``auth_str=...``) or the request in its error text. A command still running after
    ``deadline`` seconds is cancelled and answered with an error, while HTCondor listens.
    """

    async def run(parsed):
        project = parsed[0] if isinstance(parsed, tuple) and parsed else None
        auth = project.authenticator if isinstance(project, Project) else ""

        try:
            return await asyncio.wait_for(handler(parsed), deadline)
        except TimeoutError:
            raise _Reported(
                f"no answer from the project within {deadline:g} s (the command was cancelled)"
            ) from None
        except Exception as exc:
            if not isinstance(exc, (BoincError, OSError)):
                log.exception("unexpected failure")
            raise _Reported(error_text(exc, [auth], expected=BoincError)) from None

    run.__name__ = getattr(handler, "__name__", "handler")
    return run


class _Reported(BoincError):
    """An error already phrased for the client."""


@hookimpl
def gahp_commands(context: BackendContext) -> list[Command]:
    try:
        config = load_config(context.options)
    except ConfigError as exc:
        # Serve, answering every request with the reason (HTCondor shows it with the jobs).
        context.warn(f"boinc-gahp cannot serve until its configuration is fixed: {exc}")
        return out_of_service(BoincBackend(BoincConfig(), context).commands(), f"boinc-gahp: {exc}")
    return BoincBackend(config, context).commands()
