"""gahp_boinc's exceptions, all under :class:`BoincError` (the emulator has its own root:
``gahp_boinc.emulator.EmulatorError``).

A server's error reply becomes the :class:`RpcError` subclass its message names (see
:func:`rpc_error`): callers tell failures apart by type, never by message text.
"""

from __future__ import annotations

import re
from typing import TypeVar

import attrs

E = TypeVar("E", bound="RpcError")


class BoincError(Exception):
    """Anything that went wrong talking to a BOINC project or staging files for it: a failure
    phrased for the client.

    Subclasses: :class:`RpcError` (the server or the network, with a subclass for each
    refusal a caller may act on), :class:`StagingError` (an input or argument that cannot
    be sent), :class:`OutputError` (outputs that cannot be placed; :class:`UnsafeOutput`
    when the server's names or archive are refused).
    """


@attrs.define(auto_exc=True)
class RpcError(BoincError):
    """A BOINC RPC failed: server error, HTTP failure, unreadable reply or timeout.

    An attrs record (compared by identity, as exceptions are): ``message`` (its ``str``);
    ``code``, BOINC's error number when the server gave one; ``retryable``, whether the same
    request may succeed later (a transport error, HTTP 502/503/504); for an HTTP error
    reply, its ``status``, the ``retry_after`` seconds a 503 asked for, and the first bytes
    of its ``body``.
    """

    message: str
    code: int | None = None
    retryable: bool = False
    status: int | None = None
    retry_after: float | None = None
    body: bytes = attrs.field(default=b"", repr=False)

    def __str__(self) -> str:
        return self.message

    def reworded(self: E, message: str) -> E:
        """The same failure (class and every field) with another message; raise it
        ``from`` this one."""
        return attrs.evolve(self, message=message)


class BadAuthenticator(RpcError):
    """The project knows no account by this authenticator (or none was sent): ``bad
    authenticator``, ``no authenticator``, get_output.php's ``bad auth str``."""


class AccessDenied(RpcError):
    """The account may not do this: ``no submit access`` (to the application), ``no app
    submit access`` (the same, as BOINC 1.4.x servers say it), ``no file access``, ``not
    owner of ...``."""


class NoSuchApp(RpcError):
    """The project has no application of this name: ``app not found: <name>``."""


@attrs.define(auto_exc=True)
class NoSuchBatch(RpcError):
    """The project has no such batch: ``no batch named <name>`` (query_batch2), ``no such
    batch``, ``no batch <id>``.

    ``batch`` is the name (or id) the server named, when it named one: query_batch2 names
    the first of the requested batches it does not know.
    """

    batch: str | None = None


class NoSuchJob(RpcError):
    """The project has no such job: ``no job <name>``, ``job not found: <name>``, ``no such
    job``, get_output.php's ``no workunit <name>`` and ``no job instance <name>``."""


class NoOutput(RpcError):
    """The job has no output to fetch: it has no canonical instance (it failed, was aborted
    or is not finished): get_output.php's ``no canonical result for wu <name>``, or
    query_completed_job's HTTP 500 on a PHP 8 server."""


class StagingError(BoincError):
    """An input file or argument that cannot be sent to BOINC."""


class OutputError(BoincError):
    """A local problem placing outputs (bad destination, unsafe name)."""


class UnsafeOutput(OutputError):
    """The server's outputs are refused, whatever the destination: a file name that is not
    a plain relative name (absolute, ``..``, control characters, too long), an archive
    member that is a link or escapes the directory, an archive over the size or member
    limits or whose data does not match its headers."""


_BATCH = re.compile(r"^no batch(?: named)? (\S.*)$")
_KINDS: tuple[tuple[re.Pattern[str], type[RpcError]], ...] = (
    (re.compile(r"^(bad authenticator|no authenticator|bad auth str)$"), BadAuthenticator),
    (re.compile(r"^(no (app submit|submit|file) access|not owner\b.*)$"), AccessDenied),
    (re.compile(r"^app not found: "), NoSuchApp),
    (re.compile(r"^(no batch named .+|no such batch|no batch \d+)$"), NoSuchBatch),
    (re.compile(r"^(no job .+|job not found: .+|no such job|no workunit .+)$"), NoSuchJob),
    (re.compile(r"^no canonical result for wu "), NoOutput),
)


def rpc_error(message: str, text: str, *, code: int | None = None) -> RpcError:
    """The error for a server's refusal ``text`` (its error message as it sent it), with
    ``message`` as the error's message: the subclass ``text`` names, else :class:`RpcError`."""
    text = text.strip()
    for pattern, cls in _KINDS:
        if pattern.match(text):
            if cls is NoSuchBatch:
                m = _BATCH.match(text)
                return NoSuchBatch(message, code=code, batch=m.group(1) if m else None)
            return cls(message, code=code)
    return RpcError(message, code=code)
