"""The BLAH backend: BLAH_* commands over gahp_lrms job drivers, as a gahp_core plugin.

Handlers are coroutines on the server's event loop: they await the job driver (whose
blocking work, if any, runs in the core's bounded worker pool: see :mod:`gahp_lrms.base`)
and run their own blocking work (the site's submit hook, proxy files) there too. Every
failure is an error result with the field count HTCondor checks: 4 for submit, 5 for
status, 3 for the others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import attrs

from gahp_blah import __version__
from gahp_blah.config import BlahConfig, load_config
from gahp_blah.errors import BlahError
from gahp_blah.jobids import JobId, make_job_id, parse_job_id
from gahp_blah.local_attributes import find_site_script, run_hook, shell_variables, unwind
from gahp_blah.status_ad import status_ad
from gahp_blah.submit_ad import SubmitAd, parse_submit_ad
from gahp_core import (
    BackendContext,
    Command,
    ConfigError,
    UnsafePath,
    Version,
    check_parent,
    error_text,
    hookimpl,
    open_private,
    out_of_service,
    private_dir,
    write_private,
)
from gahp_lrms import Driver, DriverError, JobSpec, get_driver
from gahp_lrms.base import RunInWorker

log = logging.getLogger("gahp.blah")

OK = ("0", "No error")
_MAX_PROXY = 1 << 20
"""Bytes a proxy file may hold (a proxy chain is a few KiB)."""
_MAX_PROXY_RECORD = 8192
T = TypeVar("T")


@hookimpl
def gahp_version() -> Version:
    # "new_esc_format" as in the C blahp's banner. HTCondor's gridmanager does not read it:
    # it sends both Args/Env and Arguments/Environment; submit_ad prefers the V2 ones.
    return Version(__version__, "Python BLAH (new_esc_format)")


@hookimpl
def gahp_add_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("BLAH")
    g.add_argument("--config", metavar="FILE", help="TOML configuration (default $BLAHPD_CONFIG)")
    g.add_argument(
        "--show-config",
        action="store_true",
        help="print every setting in force and where it came from, then exit",
    )
    g.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where job state is kept across restarts "
        "(default $BLAHPD_STATE_DIR, else $XDG_STATE_HOME/gahp-blah)",
    )


class Failure(BlahError):
    """A request that failed; the message is the error string of the result."""


EXPECTED = (BlahError, DriverError)
"""Failures phrased for the client (blahpd's own, a driver's): their message is the error
string as it stands."""


class BlahBackend:
    """Drivers by gridtype, created on first use; ``run_in_worker`` runs blocking work (the
    server's bounded worker pool; by default :func:`asyncio.to_thread`)."""

    def __init__(self, config: BlahConfig, run_in_worker: RunInWorker | None = None) -> None:
        self.config = config
        self._run: RunInWorker = run_in_worker or asyncio.to_thread
        self._drivers: dict[str, Driver] = {}
        self._making: dict[str, asyncio.Future[Driver]] = {}
        self.missing: str | None = None
        """Why no job can be submitted (the ClassAd library is not installed), or None."""

    async def driver(self, lrms: str) -> Driver:
        """The driver of ``lrms``, made on first use (in a worker: a driver's set-up may
        read files or run a command); requests meanwhile wait for the same one."""
        drv = self._drivers.get(lrms)
        if drv is not None:
            return drv
        if lrms not in self.config.drivers:
            raise Failure(
                f"batch system {lrms!r} is not supported here "
                f"(enabled: {', '.join(self.config.drivers)})"
            )
        making = self._making.get(lrms)
        if making is None:
            making = self._making[lrms] = asyncio.ensure_future(self._make(lrms))
        try:
            return await asyncio.shield(making)
        finally:
            if making.done():
                self._making.pop(lrms, None)

    async def _make(self, lrms: str) -> Driver:
        options = self.config.driver_options.get(lrms, {})
        drv: Driver = await self._run(
            lambda: get_driver(lrms, options, self.config.state_dir / lrms, run_in_worker=self._run)
        )
        self._drivers[lrms] = drv
        return drv

    async def aclose(self) -> None:
        """At shutdown: let each driver made end its waits and release what it holds."""
        for drv in list(self._drivers.values()):
            try:
                await drv.aclose()
            except Exception:
                log.exception("closing the %s driver failed", drv.name)

    async def _job(self, text: str) -> tuple[JobId, Driver]:
        jid = parse_job_id(text)
        return jid, await self.driver(jid.lrms)

    # ---- handlers (on the event loop) -------------------------------------------------------

    async def submit(self, args: Sequence[str]) -> tuple[str, ...]:
        if self.missing is not None:
            raise Failure(self.missing)
        site = self.config.site
        wanted = (*site.local_submit_attributes_setup_args, "CERequirements")
        ad = parse_submit_ad(
            args[0],
            self.config.default_gridtype,
            expressions=wanted,
            strings=site.passed_attributes(),
        )
        drv = await self.driver(ad.gridtype)
        spec = await self._run(self._with_site_directives, ad)
        native = await drv.submit(spec)
        jid = make_job_id(ad.gridtype, native)
        if ad.proxy:
            await self._run(self._remember_proxy, jid, ad.proxy)
        log.info("submitted %s", jid)
        if ad.unknown:
            log.info("job %s: attributes not used by blahpd: %s", jid, ", ".join(ad.unknown))
        return (*OK, str(jid))

    def _with_site_directives(self, ad: SubmitAd) -> JobSpec:
        """The job with what the site's ``<lrms>_local_submit_attributes.sh`` printed (when
        there is one) as its directives; CERequirements last, so its values win."""
        site = self.config.site
        script = find_site_script(site.script_search(), ad.gridtype)
        if script is None:
            return ad.spec
        pairs: list[tuple[str, str]] = list(ad.strings)
        for _name, text in ad.expressions:
            pairs += unwind(text)
        lines = run_hook(
            script,
            shell_variables(pairs),
            mpinodes=ad.node_number,
            cwd=ad.spec.workdir,
            timeout=site.local_submit_attributes_timeout,
        )
        try:
            return attrs.evolve(ad.spec, directives=lines)
        except (TypeError, ValueError) as exc:
            raise Failure(f"site script {script} printed an unusable line: {exc}") from None

    async def status(self, args: Sequence[str]) -> tuple[str, ...]:
        jid, drv = await self._job(args[0])
        info = await drv.status(jid.native)
        reply = (*OK, str(int(info.status)), status_ad(jid.native, info))
        if info.finished:
            # Its final status is answered: the client will not ask again. Drop what is
            # kept of it (a fork job's spec holds its environment; the proxy record).
            await self._forget(jid, drv)
        return reply

    async def _forget(self, jid: JobId, drv: Driver) -> None:
        try:
            await drv.reported(jid.native)
            await self._run(self._forget_proxy, jid)
        except (DriverError, OSError) as exc:
            log.warning("cannot drop what is kept of finished job %s: %s", jid, exc)

    async def cancel(self, args: Sequence[str]) -> tuple[str, ...]:
        jid, drv = await self._job(args[0])
        await drv.cancel(jid.native)
        return OK

    async def hold(self, args: Sequence[str]) -> tuple[str, ...]:
        jid, drv = await self._job(args[0])
        await drv.hold(jid.native)
        return OK

    async def resume(self, args: Sequence[str]) -> tuple[str, ...]:
        jid, drv = await self._job(args[0])
        await drv.resume(jid.native)
        return OK

    async def refresh_proxy(self, args: Sequence[str]) -> tuple[str, ...]:
        jid, drv = await self._job(args[0])
        new = Path(args[1])
        if not await self._run(_readable_file, new):
            raise Failure(f"proxy file {new} is not a readable file")
        info = await drv.status(jid.native)
        if info.finished:
            # A renewal racing the job's end: nothing to do, and no error (an error result
            # makes the gridmanager hold a job that completed), as the C blahp answers.
            return ("0", "No proxy to renew - job finished")
        await self._run(self._renew_proxy, jid, new)
        return OK

    def _renew_proxy(self, jid: JobId, new: Path) -> None:
        old = self._recorded_proxy(jid)
        if old is not None and old.resolve() != new.resolve():
            _replace_proxy(new, old)

    async def ping(self, args: Sequence[str]) -> tuple[str, ...]:
        if self.missing is not None:
            raise Failure(self.missing)
        await (await self.driver(args[0])).ping()
        return OK

    # ---- proxies ----------------------------------------------------------------------------

    def _proxy_record(self, jid: JobId) -> Path:
        return self.config.state_dir / "proxies" / f"{jid.lrms}_{jid.date}_{jid.native}"

    def _remember_proxy(self, jid: JobId, proxy: str) -> None:
        rec = self._proxy_record(jid)
        private_dir(rec.parent)
        # absolute already (Iwd-relative ones resolved)
        write_private(rec, os.path.abspath(proxy).encode())

    def _recorded_proxy(self, jid: JobId) -> Path | None:
        try:
            fd = open_private(self._proxy_record(jid))
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as fh:
            text = fh.read(_MAX_PROXY_RECORD).decode(errors="replace").strip()
        return Path(text) if text else None

    def _forget_proxy(self, jid: JobId) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._proxy_record(jid).unlink()

    def commands(self) -> list[Command]:
        def cmd(name, handler, nargs, fields_on_error):
            n = len(fields_on_error(""))  # a success has as many fields as an error
            return Command(
                name,
                _errors(handler),
                nargs=nargs,
                error_result=fields_on_error,
                result_fields=n,
                error_fields=n,
            )

        three = lambda msg: ("1", msg)  # noqa: E731
        return [
            cmd("BLAH_JOB_SUBMIT", self.submit, 1, lambda msg: ("1", msg, "N/A")),
            cmd("BLAH_JOB_STATUS", self.status, 1, lambda msg: ("1", msg, "0", "N/A")),
            cmd("BLAH_JOB_CANCEL", self.cancel, 1, three),
            cmd("BLAH_JOB_HOLD", self.hold, 1, three),
            cmd("BLAH_JOB_RESUME", self.resume, 1, three),
            cmd("BLAH_JOB_REFRESH_PROXY", self.refresh_proxy, 2, three),
            cmd("BLAH_PING", self.ping, 1, three),
        ]


def _readable_file(path: Path) -> bool:
    return path.is_file() and os.access(path, os.R_OK)


def _replace_proxy(new: Path, old: Path) -> None:
    """Put the renewed proxy ``new`` in place of ``old``: written to a new 0600 file of a
    random name beside it (nobody else can have made or opened it), on disk, then renamed
    over it."""
    check_parent(old.parent)
    with open(new, "rb") as fh:
        data = fh.read(_MAX_PROXY + 1)
    if len(data) > _MAX_PROXY:
        raise Failure(f"proxy file {new} is larger than {_MAX_PROXY} bytes")
    write_private(old, data)


def _errors(
    handler: Callable[[Sequence[str]], Awaitable[T]],
) -> Callable[[Sequence[str]], Awaitable[T]]:
    """Let expected failures through with their message; describe unexpected ones. Secrets
    registered with the process's redactor never reach the client."""

    async def run(args: Sequence[str]) -> T:
        try:
            return await handler(args)
        except Exception as exc:
            if not isinstance(exc, (*EXPECTED, OSError)):
                log.exception("unexpected failure")
            raise Failure(error_text(exc, expected=EXPECTED)) from None

    return run


NO_CLASSADS = (
    "the ClassAd library is not installed: blahpd cannot read submit ads "
    "(install the 'blah' extra: pip install 'gahp[blah]', which brings htcondor's classad2)"
)


def classad_problem() -> str | None:
    """Why submit ads cannot be read (classad2 missing), or None."""
    try:
        import classad2  # noqa: F401
    except ImportError as exc:
        return f"{NO_CLASSADS}: {exc}"
    return None


@hookimpl
def gahp_commands(context: BackendContext) -> list[Command]:
    if getattr(context.options, "show_config", False):  # gahp-server blah --show-config
        from gahp_blah.show_config import show_config

        sys.stdout.flush()
        raise SystemExit(show_config(context.options, sys.stdout, sys.stderr))
    try:
        config = load_config(context.options)
    except ConfigError as exc:
        # Serve, answering every request with the reason: HTCondor then shows it with the
        # jobs (or the resource) instead of "Failed to initialize GAHP".
        context.warn(f"blahpd cannot serve until its configuration is fixed: {exc}")
        return out_of_service(BlahBackend(BlahConfig()).commands(), f"blahpd: {exc}")
    try:
        private_dir(config.state_dir)
    except UnsafePath as exc:
        # Another user could read or change what blahpd keeps there (job specs, proxies).
        raise ConfigError(f"blahpd state directory is unsafe: {exc}") from None
    except OSError as exc:
        context.warn(
            f"blahpd state directory {config.state_dir} is not usable by user "
            f"{getpass.getuser()} ({exc.strerror}): requests will fail until it is writable "
            "(set state_dir or --state-dir to a directory each job owner can write)"
        )
    log.info("configuration files read: %s", ", ".join(config.files) or "none (defaults)")
    for warning in config.warnings:
        context.warn(f"blah.config: {warning}")
    os.environ.update(config.exports)  # as the C blahp's scripts source blah.config
    backend = BlahBackend(config, context.run_in_worker)
    backend.missing = classad_problem()
    if backend.missing is not None:
        context.warn(f"blahpd: {backend.missing}; every submit and ping is refused")
    context.on_shutdown(backend.aclose)
    return backend.commands()
