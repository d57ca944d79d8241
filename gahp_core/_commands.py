"""How a backend declares a command: name, arguments, synchronous or asynchronous, handler."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs

from gahp_core._errors import GahpError


class BadRequest(GahpError):
    """Raised by an argument parser or synchronous handler: answered with an ``E`` line."""


class Refused(GahpError):
    """Raised by a synchronous handler: answered with an ``F`` line."""


P = TypeVar("P")
"""What a command's parser returns and its handler takes (without a parser: the arguments)."""

Fields = Sequence[str]
HandlerResult = Any
"""What a handler returns. An asynchronous command's: the fields of its result line, or an
awaitable of them. A synchronous command's: its fields, or a reply its dialect knows (the
GAHP dialect's ``Block``, the Ninf-G dialect's ``MultiLine``)."""
Parser = Callable[[Sequence[str]], P]
Handler = Callable[[P], HandlerResult]


def _upper(name: str) -> str:
    return name.upper()


def _default_error(message: str) -> Fields:
    return (message,)


def _check_nargs(instance: Command[Any], attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    lo, hi = value if isinstance(value, tuple) else (value, value)
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"{instance.name}: bad nargs {value!r}")


@attrs.frozen
class Command(Generic[P]):
    """A command a backend contributes, generic over what its parser gives its handler.

    ``nargs`` counts the arguments after the command code (and after the request id
    of an asynchronous command): an int, a ``(min, max)`` pair with ``max`` None for
    no limit, or None for any. ``parse`` runs when the request arrives, before the
    return line: it validates (raise :class:`BadRequest` for an ``E``) and captures
    whatever state the request must use, and its value is what the handler gets
    (the argument tuple when there is no parser).

    A synchronous command's handler runs at once on the event loop and returns the
    fields of its ``S`` return line. An asynchronous command's handler produces the
    fields of its result line (after the request id): a coroutine function runs on
    the event loop, a plain function in the worker pool. If it raises, the result is
    ``error_result(message)``.

    A coroutine handler starts at once, in a task (see :mod:`gahp_core._eager`), right
    after the ``S`` return line is queued and before the next request is read: one that
    never waits has its result queued before the next request too.
    """

    name: str = attrs.field(converter=_upper)
    handler: Handler[P]
    asynchronous: bool = True
    nargs: int | tuple[int, int | None] | None = attrs.field(default=None, validator=_check_nargs)
    parse: Parser[P] | None = None
    error_result: Callable[[str], Fields] = _default_error

    is_coroutine: bool = attrs.field(init=False, eq=False, repr=False)
    """Whether the handler runs on the event loop rather than in the worker pool."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "is_coroutine", inspect.iscoroutinefunction(self.handler))

    def accepts(self, count: int) -> bool:
        """Whether ``count`` arguments fit ``nargs``."""
        if self.nargs is None:
            return True
        lo, hi = self.nargs if isinstance(self.nargs, tuple) else (self.nargs, self.nargs)
        return count >= lo and (hi is None or count <= hi)


class Unavailable(GahpError):
    """Why a backend cannot serve; every request gets this message."""


def out_of_service(commands: Sequence[Command[Any]], reason: str) -> list[Command[Any]]:
    """The same commands, each answering ``reason``: an ``E`` line for a synchronous one,
    its error result for an asynchronous one.

    A backend that cannot work (an unreadable configuration, say) serves these rather
    than exiting: the client then shows the reason with each job instead of a bare
    failure to start the server, and the server works again once the cause is fixed
    and the client restarts it.
    """

    def refuse(_args: Any) -> Fields:
        raise BadRequest(reason)

    async def refuse_async(_args: Any) -> Fields:
        raise Unavailable(reason)

    return [
        attrs.evolve(c, handler=refuse_async if c.asynchronous else refuse, parse=None)
        for c in commands
    ]


def sync_command(
    name: str, nargs: int | tuple[int, int | None] | None = None
) -> Callable[[Handler[Sequence[str]]], Command[Sequence[str]]]:
    """Decorator: declare a synchronous command from a handler function."""

    def wrap(fn: Handler[Sequence[str]]) -> Command[Sequence[str]]:
        return Command(name=name, handler=fn, asynchronous=False, nargs=nargs)

    return wrap


@overload
def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    parse: None = None,
    error_result: Callable[[str], Fields] = _default_error,
) -> Callable[[Handler[Sequence[str]]], Command[Sequence[str]]]: ...


@overload
def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    *,
    parse: Parser[P],
    error_result: Callable[[str], Fields] = _default_error,
) -> Callable[[Handler[P]], Command[P]]: ...


@overload
def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None,
    parse: Parser[P],
    error_result: Callable[[str], Fields] = _default_error,
) -> Callable[[Handler[P]], Command[P]]: ...


def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    parse: Parser[P] | None = None,
    error_result: Callable[[str], Fields] = _default_error,
) -> Callable[[Handler[P]], Command[P]]:
    """Decorator: declare an asynchronous command (request id first) from a handler."""

    def wrap(fn: Handler[P]) -> Command[P]:
        return Command(
            name=name,
            handler=fn,
            asynchronous=True,
            nargs=nargs,
            parse=parse,
            error_result=error_result,
        )

    return wrap
