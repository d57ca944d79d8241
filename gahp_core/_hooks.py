"""Pluggy hook specifications and the plugin manager that finds backends.

A backend is a module (or object) implementing these hooks, installed under the
entry-point group ``gahp.backends``; the entry point's name is the backend's name.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import logging
import traceback
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
    """What the runtime offers a backend when it asks for its commands.

    Attributes:
        options: The parsed command line: the core options and every backend's.
        logger: The logger for the backend (``gahp.backend``): never stdout.
        redact: ``redact(secret)``: mask the secret in every log line from then on.
        run_in_worker: ``await run_in_worker(fn, *args)``: run blocking work in the
            bounded worker pool, from a coroutine handler.
        spawn: ``spawn(coroutine)``: run background work on the loop; cancelled at
            shutdown.
        notify: ``notify(fields)``: an asynchronous notification, in dialects that
            have them.
        event_loop: ``event_loop()``: the server's event loop while it serves (None
            before).
        shutdown_callbacks: What :meth:`on_shutdown` registered.
        warn: ``warn(message)``: a startup problem (a bad configuration, say), said once
            on stderr and in the log; with :func:`gahp_core.out_of_service` the backend
            then answers every command with the reason.
    """

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
    event_loop: Callable[[], asyncio.AbstractEventLoop | None] = attrs.field(default=lambda: None)
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
    def gahp_commands(self, context: BackendContext) -> Sequence[Command[Any]]:
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


class BadBackend(BackendNotFound):
    """A backend whose hooks cannot be used: an argument of a hook implementation named
    otherwise than in :class:`GahpSpec`, a hook function without ``@hookimpl``, no
    ``gahp_commands`` at all. The message names the backend and the hook."""


class HookFailed(GahpError):
    """A backend's hook raised: the message names the backend and the hook, and for an
    exception that is not a :class:`GahpError` (a bug, not a message phrased for the
    administrator) its class and where it was raised. The original exception is the
    ``__cause__``; ``phrased`` tells whether it was a :class:`GahpError`."""

    def __init__(self, backend: str, hook: str, exc: BaseException) -> None:
        self.backend = backend
        self.hook = hook
        self.phrased = isinstance(exc, GahpError)
        text = str(exc).strip()
        if self.phrased:
            super().__init__(f"backend {backend}: hook {hook}: {text or type(exc).__name__}")
            return
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        super().__init__(f"backend {backend}: hook {hook} raised {what}{where}")


def hook_names() -> tuple[str, ...]:
    """The names of the hooks of :class:`GahpSpec`."""
    return tuple(n for n in vars(GahpSpec) if n.startswith("gahp_"))


def call_hook(pm: pluggy.PluginManager, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
    """``(plugin name, result)`` of each implementation of ``hook``, in pluggy's order.

    Unlike ``pm.hook.NAME(...)``, an exception says which backend raised it, in which
    hook: a :class:`HookFailed`.
    """
    out = []
    for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):
        name = impl.plugin_name
        try:
            result = impl.function(**{a: kwargs[a] for a in impl.argnames})
        except Exception as exc:
            raise HookFailed(name, hook, exc) from exc
        out.append((name, result))
    return out


def first_result(pm: pluggy.PluginManager, hook: str, **kwargs: Any) -> Any:
    """The first result of ``hook`` that is not None (a ``firstresult`` hook), or None."""
    for _name, result in call_hook(pm, hook, **kwargs):
        if result is not None:
            return result
    return None


def _hook_arguments(fn: object) -> list[str] | None:
    """The argument names of a hook function (less ``self``), None if unreadable."""
    try:
        return [p for p in inspect.signature(fn).parameters if p != "self"]  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _signature_problem(plugin: object, name: str) -> str:
    """What is wrong with ``plugin``'s hook implementations' arguments, in words."""
    for hook in hook_names():
        fn = getattr(plugin, hook, None)
        given = _hook_arguments(fn) if callable(fn) else None
        if given is None:
            continue
        wanted = _hook_arguments(getattr(GahpSpec, hook)) or []
        extra = [p for p in given if p not in wanted]
        if extra:
            return (
                f"backend {name}: hook {hook}({', '.join(given)}): argument"
                f"{'s' if len(extra) > 1 else ''} {', '.join(extra)} not in the hook"
                f" specification; pluggy passes arguments by name: {hook}({', '.join(wanted)})"
            )
    return ""


def _check_hooks(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Refuse a backend whose hook functions are not marked, or that has no gahp_commands."""
    unmarked = [
        hook
        for hook in hook_names()
        if callable(getattr(plugin, hook, None)) and pm.parse_hookimpl_opts(plugin, hook) is None
    ]
    if unmarked:
        raise BadBackend(
            f"backend {name}: {', '.join(unmarked)} not marked with @gahp_core.hookimpl"
            " (pluggy ignores a hook function without it)"
        )
    if not any(impl.plugin is plugin for impl in pm.hook.gahp_commands.get_hookimpls()):
        raise BadBackend(
            f"backend {name} implements no gahp_commands hook: it would serve no command"
        )


def load_backend(pm: pluggy.PluginManager, name: str, module: str | None = None) -> object:
    """Register backend ``name``: an installed entry point, or ``module:`` prefix for a
    module; with ``module``, that module under the name ``name`` (no entry-point lookup)."""
    if module is not None or name.startswith("module:"):
        module_name = module or name.removeprefix("module:")
        name = name.removeprefix("module:")
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
    return register_backend(pm, plugin, name)


def register_backend(pm: pluggy.PluginManager, plugin: object, name: str) -> object:
    """Register ``plugin`` (a module or object with hook implementations) as backend
    ``name``, refusing it (:class:`BadBackend`, naming the hook) if its hooks are wrong."""
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        problem = _signature_problem(plugin, name)
        raise BadBackend(problem or f"backend {name}: {' '.join(str(exc).split())}") from exc
    try:
        pm.check_pending()  # a misspelt hook implementation fails here, not silently later
        _check_hooks(pm, plugin, name)
    except pluggy.PluginValidationError as exc:
        pm.unregister(plugin)
        raise BackendNotFound(f"backend {name}: {exc}") from exc
    except BadBackend:
        pm.unregister(plugin)
        raise
    return plugin
