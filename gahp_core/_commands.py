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


Shape = int | tuple[str, ...] | None
"""A declared result shape: a field count, the fields' names, or None (not checked)."""


def _to_shape(value: int | Sequence[str] | None) -> Shape:
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _check_shape(instance: Command[Any], attribute: attrs.Attribute[Any], value: Shape) -> None:
    if isinstance(value, bool) or (isinstance(value, int) and value < 0):
        raise ValueError(f"{instance.name}: bad {attribute.name} {value!r}")
    if isinstance(value, tuple) and not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{instance.name}: {attribute.name} must be field names: {value!r}")


def shape_count(shape: Shape) -> int | None:
    """The field count of a declared shape (None: not declared)."""
    return len(shape) if isinstance(shape, tuple) else shape


def _shape_text(shape: Shape) -> str:
    n = shape_count(shape)
    names = f" ({', '.join(shape)})" if isinstance(shape, tuple) and shape else ""
    return f"{n} field{'' if n == 1 else 's'}{names}"


def _arguments(n: int) -> str:
    return f"{n} argument{'' if n == 1 else 's'}"


def _check_nargs(instance: Command[Any], attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    lo, hi = value if isinstance(value, tuple) else (value, value)
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"{instance.name}: bad nargs {value!r}")


@attrs.frozen
class Command(Generic[P]):
    """A command a backend contributes, generic over what its parser gives its handler.

    ``name`` is the command code (stored upper case); ``handler`` answers it.

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

    ``result_fields`` declares the fields of a success (a count, or their names): of the
    result line after the request id, or of a synchronous command's ``S`` line. A result
    that does not fit is logged as an error and answered as an error result (an ``F``
    line for a synchronous command), never sent malformed. ``error_fields`` declares
    the fields ``error_result`` makes, checked when the command is declared (a wrong
    one is a ``ValueError`` at start). ``is_coroutine`` tells whether the handler runs
    on the event loop (else in the worker pool). ``COMMANDS`` lists every command, and
    :class:`gahp_core.testing.GahpConformance` checks the declared fields.
    """

    name: str = attrs.field(converter=_upper)
    handler: Handler[P]
    asynchronous: bool = True
    nargs: int | tuple[int, int | None] | None = attrs.field(default=None, validator=_check_nargs)
    parse: Parser[P] | None = None
    error_result: Callable[[str], Fields] = _default_error
    result_fields: Shape = attrs.field(
        default=None, converter=_to_shape, validator=_check_shape, kw_only=True
    )
    """The fields of a success: of the result line after the request id (asynchronous) or
    of the ``S`` line (synchronous), as a count or as names; None: not checked. A handler
    whose result does not fit gets an error result instead (and an error in the log)."""
    error_fields: Shape = attrs.field(
        default=None, converter=_to_shape, validator=_check_shape, kw_only=True
    )
    """The fields ``error_result`` makes (asynchronous commands), checked when the command
    is declared; None: not checked."""

    is_coroutine: bool = attrs.field(init=False, eq=False, repr=False)
    """Whether the handler runs on the event loop rather than in the worker pool."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "is_coroutine", inspect.iscoroutinefunction(self.handler))
        if self.error_fields is not None:
            problem = self.error_problem(tuple(self.error_result("a message")))
            if problem:
                raise ValueError(f"{problem}: give error_result that many fields")

    def result_problem(self, fields: Sequence[str]) -> str:
        """What is wrong with a success of these fields (``""``: it fits the declaration)."""
        want = shape_count(self.result_fields)
        if want is None or len(fields) == want:
            return ""
        return (
            f"{self.name} returned {len(fields)} field{'' if len(fields) == 1 else 's'}"
            f" where it declares {_shape_text(self.result_fields)}"
        )

    def error_problem(self, fields: Sequence[str]) -> str:
        """What is wrong with an error result of these fields (``""``: it fits)."""
        want = shape_count(self.error_fields)
        if want is None or len(fields) == want:
            return ""
        return (
            f"{self.name}'s error_result gives {len(fields)} field"
            f"{'' if len(fields) == 1 else 's'} where it declares {_shape_text(self.error_fields)}"
        )

    def usage(self) -> str:
        """What the command takes, in words: ``"HELLO_NAP takes a request id and 1 argument"``."""
        lo, hi = (
            (0, None)
            if self.nargs is None
            else self.nargs
            if isinstance(self.nargs, tuple)
            else (self.nargs, self.nargs)
        )
        if hi is None:
            args = f"at least {_arguments(lo)}" if lo else "any number of arguments"
        elif lo == hi:
            args = _arguments(lo)
        else:
            args = f"{lo} to {hi} arguments"
        return f"{self.name} takes {'a request id and ' if self.asynchronous else ''}{args}"

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
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    *,
    result_fields: int | Sequence[str] | None = None,
) -> Callable[[Handler[Sequence[str]]], Command[Sequence[str]]]:
    """Decorator: declare a synchronous command from a handler function."""

    def wrap(fn: Handler[Sequence[str]]) -> Command[Sequence[str]]:
        return Command(
            name=name, handler=fn, asynchronous=False, nargs=nargs, result_fields=result_fields
        )

    return wrap


@overload
def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    parse: None = None,
    error_result: Callable[[str], Fields] = _default_error,
    *,
    result_fields: int | Sequence[str] | None = None,
    error_fields: int | Sequence[str] | None = None,
) -> Callable[[Handler[Sequence[str]]], Command[Sequence[str]]]: ...


@overload
def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    *,
    parse: Parser[P],
    error_result: Callable[[str], Fields] = _default_error,
    result_fields: int | Sequence[str] | None = None,
    error_fields: int | Sequence[str] | None = None,
) -> Callable[[Handler[P]], Command[P]]: ...


@overload
def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None,
    parse: Parser[P],
    error_result: Callable[[str], Fields] = _default_error,
    *,
    result_fields: int | Sequence[str] | None = None,
    error_fields: int | Sequence[str] | None = None,
) -> Callable[[Handler[P]], Command[P]]: ...


def async_command(
    name: str,
    nargs: int | tuple[int, int | None] | None = None,
    parse: Parser[P] | None = None,
    error_result: Callable[[str], Fields] = _default_error,
    *,
    result_fields: int | Sequence[str] | None = None,
    error_fields: int | Sequence[str] | None = None,
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
            result_fields=result_fields,
            error_fields=error_fields,
        )

    return wrap
