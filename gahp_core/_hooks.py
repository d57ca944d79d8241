"""Pluggy hook specifications and the plugin manager that finds backends.

A backend is a module (or object) implementing these hooks, installed under the
entry-point group ``gahp.backends``; the entry point's name is the backend's name.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from gahp_core._commands import Command
from gahp_core._errors import GahpError
from gahp_core._protocol import Version

if TYPE_CHECKING:
    import importlib.metadata

    from gahp_core._dialect import Dialect

PROJECT_NAME = "gahp"
ENTRY_POINT_GROUP = "gahp.backends"
"""The entry-point group a backend registers its plugin module under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""The marker for a backend's implementations of the ``GahpSpec`` hooks."""


@attrs.define
class BackendContext:
    """What the runtime offers a backend when it asks for its commands."""

    options: argparse.Namespace
    logger: logging.Logger
    redact: Callable[[str], None]
    """Register a secret: it is masked in every log line from then on."""
    run_in_worker: Callable[..., Awaitable[Any]]
    """``await run_in_worker(fn, *args)``: run blocking work in the bounded worker pool."""
    spawn: Callable[[Any], Any] = attrs.field(default=None)
    """``spawn(coroutine)``: run background work on the loop; cancelled at shutdown."""
    notify: Callable[[Sequence[str]], None] = attrs.field(default=None)
    """``notify(fields)``: an asynchronous notification, in dialects that have them."""
    event_loop: Callable[[], asyncio.AbstractEventLoop | None] = attrs.field(
        default=lambda: None
    )
    """``event_loop()``: the server's event loop while it serves (None before). Blocking
    handlers in the worker pool run coroutines on it with
    ``asyncio.run_coroutine_threadsafe``: a backend then keeps one loop, and one
    connection pool, for its coroutine and its blocking commands."""
    shutdown_callbacks: list[Callable[[], Any]] = attrs.field(factory=list)
    warn: Callable[[str], None] = attrs.field(
        default=lambda message: logging.getLogger("gahp").warning("%s", message)
    )
    """``warn(message)``: a startup problem, said once on stderr (where the protocol
    allows) and in the log; the client shows a GAHP's stderr to the administrator."""

    def on_shutdown(self, callback: Callable[[], Any]) -> None:
        """Call ``callback`` (a function or coroutine function) when the server stops."""
        self.shutdown_callbacks.append(callback)


class GahpSpec:
    """The hooks a backend implements (all optional but ``gahp_commands``)."""

    @hookspec(firstresult=True)
    def gahp_version(self) -> Version | None:
        """The version for the banner and VERSION."""

    @hookspec(firstresult=True)
    def gahp_dialect(self) -> Dialect | None:
        """The :class:`~gahp_core.Dialect` the backend speaks (default: GAHP)."""

    @hookspec
    def gahp_add_options(self, parser: argparse.ArgumentParser) -> None:
        """Add the backend's command-line options (configuration) to ``parser``."""

    @hookspec
    def gahp_commands(self, context: BackendContext) -> Sequence[Command]:
        """The commands the backend contributes, bound to its state."""
        raise NotImplementedError


def plugin_manager() -> pluggy.PluginManager:
    """A plugin manager with the GAHP hook specifications and nothing registered."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(GahpSpec)
    return pm


def available_backends() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed backends by name, from the ``gahp.backends`` entry-point group."""
    import importlib.metadata  # 10-20 ms: not for a server whose backend is known

    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


class BackendNotFound(GahpError, LookupError):
    """No installed backend or importable module of that name, or one whose hook
    implementations match no hook specification (a misspelt ``gahp_comands``, say)."""


def load_backend(pm: pluggy.PluginManager, name: str, module: str | None = None) -> object:
    """Register backend ``name``: an installed entry point, or ``module:`` prefix for a
    module; with ``module``, that module under the name ``name`` (no entry-point lookup)."""
    if module is not None or name.startswith("module:"):
        module_name = module or name.removeprefix("module:")
        try:
            plugin = importlib.import_module(module_name)
        except ImportError as exc:
            raise BackendNotFound(f"cannot import backend module {module_name}: {exc}") from exc
    else:
        eps = available_backends()
        if name not in eps:
            known = ", ".join(sorted(eps)) or "none"
            raise BackendNotFound(f"no backend named {name!r} (installed: {known})")
        plugin = eps[name].load()
    pm.register(plugin, name=name)
    try:
        pm.check_pending()  # a misspelt hook implementation fails here, not silently later
    except pluggy.PluginValidationError as exc:
        pm.unregister(plugin)
        raise BackendNotFound(f"backend {name}: {exc}") from exc
    return plugin
