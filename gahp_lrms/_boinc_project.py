"""How the boinc driver reaches a BOINC project: which project a job uses, its
authenticator, the client's calls bounded in time with their failures as
:class:`~gahp_lrms.model.DriverError`, and the applications' templates (cached)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from gahp_boinc import BoincClient, BoincError, Project, Templates
from gahp_core import ConfigError, error_text, http_url, read_secret_file
from gahp_lrms._boinc_loop import KeyedLock
from gahp_lrms._boinc_store import JobRecord
from gahp_lrms.config import BoincDriverConfig
from gahp_lrms.model import DriverError

T = TypeVar("T")

TEMPLATE_TTL_S = 60.0
"""Seconds an application's templates are trusted when checking submissions."""


class NoProject(DriverError):
    """A job's BOINC project cannot be addressed: none configured, or its authenticator
    file unreadable."""


def read_authenticator(path: str) -> str:
    """The authenticator in file ``path``; :class:`NoProject` when it cannot be read."""
    try:
        return read_secret_file(path, "BOINC authenticator")
    except ConfigError as exc:
        raise NoProject(str(exc)) from None


def driver_error(exc: BoincError) -> DriverError:
    """A BOINC client's failure as blahpd reports it."""
    return DriverError(error_text(exc, expected=BoincError))


class Projects:
    """The projects the driver's jobs use, through one :class:`BoincClient` (its connection
    pool, MD5 cache and submission state serve every project)."""

    def __init__(self, settings: BoincDriverConfig) -> None:
        self.settings = settings
        self.rpc_timeout = settings.rpc_timeout
        verify: bool | str = True
        if settings.insecure:
            verify = False
        elif settings.ca_bundle:
            verify = str(settings.ca_bundle)
        self.client = BoincClient(
            timeout=settings.timeout,
            verify=verify,
            retries=settings.retries,
            lease_seconds=settings.lease_seconds,
        )
        self._template_locks = KeyedLock()
        self._templates: dict[tuple[str, str], tuple[float, Templates]] = {}

    def no_answer(self) -> str:
        return f"the BOINC project did not answer in {self.rpc_timeout:g} s"

    async def rpc(
        self, call: Coroutine[Any, Any, T], passing: tuple[type[BoincError], ...] = ()
    ) -> T:
        """Await one of the client's calls (at most ``rpc_timeout``); its failure as a
        :class:`DriverError`, but for errors of the ``passing`` types (raised as they are,
        for the caller to act on)."""
        try:
            async with asyncio.timeout(self.rpc_timeout):
                return await call
        except TimeoutError:
            raise DriverError(self.no_answer()) from None
        except passing:
            raise
        except BoincError as exc:
            raise driver_error(exc) from None

    def resolve(self, url: str | None, auth_file: str | None) -> tuple[str, str]:
        """The project URL (ending in /) and authenticator file a job uses."""
        url = url or self.settings.project_url
        auth_file = auth_file or (
            str(self.settings.authenticator_file) if self.settings.authenticator_file else None
        )
        if not url or not auth_file:
            raise NoProject(
                "no BOINC project: set project_url and authenticator_file in the boinc "
                "driver's configuration, or BoincProjectUrl/BoincAuthenticatorFile in the job"
            )
        try:
            url = http_url(url, "BOINC project URL")
        except ConfigError as exc:
            raise DriverError(str(exc)) from None
        url = url if url.endswith("/") else f"{url}/"
        return url, auth_file

    def project(self, url: str | None, auth_file: str | None) -> Project:
        """The project a job naming ``url`` and ``auth_file`` (None: the driver's) uses."""
        url, auth_file = self.resolve(url, auth_file)
        return Project(url=url, authenticator=read_authenticator(auth_file))

    def project_of(self, rec: JobRecord) -> Project:
        return self.project(rec.project_url, rec.authenticator_file)

    async def templates(self, project: Project, app: str) -> Templates:
        """The application's templates, asked at most once per ``TEMPLATE_TTL_S``."""
        key = (project.url, app)
        async with self._template_locks.hold(key):
            cached = self._templates.get(key)
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]
            templates = await self.rpc(self.client.get_templates(app, project=project))
            self._templates[key] = (time.monotonic() + TEMPLATE_TTL_S, templates)
            return templates

    def pending_templates(self) -> int:
        """Template requests under way or waited for (for tests: nothing kept per app)."""
        return len(self._template_locks)

    async def aclose(self) -> None:
        await self.client.aclose()
