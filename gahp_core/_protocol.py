"""GAHP requests, return lines, result lines and the version banner (pure functions)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence

import attrs

from gahp_core._escaping import escape, join, split

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

SUCCESS = "S"
"""The return code ``S``: the request is done (synchronous) or accepted (asynchronous)."""
FAILURE = "F"
"""The return code ``F``: a synchronous command refused or failed, or too many in flight."""
ERROR = "E"
"""The return code ``E``: an unknown command or a malformed request."""

_NONZERO = frozenset("123456789")

THREADS_LIMIT_REACHED = "Threads limit reached"
"""The failure text HTCondor's gridmanager recognises as 'slow down and retry'."""


@attrs.frozen
class Request:
    """One parsed request line: the command code (upper case) and its arguments.

    Attributes:
        command: The command code, upper case.
        args: The arguments after it, unescaped.
    """

    command: str
    args: tuple[str, ...]


def parse_request(line: str) -> Request | None:
    """Parse a request line (terminator already removed); ``None`` for a blank line."""
    fields = split(line)
    if not fields[0] and len(fields) == 1:
        return None
    return Request(command=fields[0].upper(), args=tuple(fields[1:]))


def format_line(fields: Iterable[str], prefix: str = "") -> str:
    """Escape and join ``fields`` into one output line ending in LF."""
    return f"{prefix}{join(fields)}\n"


def format_raw(text: str, prefix: str = "") -> str:
    """An output line whose text is already escaped (the version banner)."""
    return f"{prefix}{text}\n"


def format_return(code: str, fields: Sequence[str] = (), prefix: str = "") -> str:
    """A return line: ``S``, ``E`` or ``F`` followed by escaped ``fields``."""
    if code not in (SUCCESS, FAILURE, ERROR):
        raise ValueError(f"bad return code {code!r}")
    if not fields:
        return f"{prefix}{code}\n"
    return f"{prefix}{code} {join(fields)}\n"


def parse_reqid(text: str) -> str | None:
    """Validate a request id: a non-zero integer. Returns it as sent, or ``None``."""
    if text[:1] in _NONZERO and text.isascii() and text.isdigit():
        return text  # the usual case: no sign, no blanks, no leading zero
    t = text.strip()
    digits = t[1:] if t[:1] in ("+", "-") else t
    # ASCII digits only, and no int(): "²" passes isdigit() and a 5000-digit id makes int()
    # raise, either of which would escape the dialect and stop the server.
    if not digits or not (digits.isascii() and digits.isdigit()):
        return None
    if not digits.strip("0"):
        return None
    return text


@attrs.frozen
class Version:
    """What a GAHP server reports in its ``$GahpVersion`` banner.

    Attributes:
        number: The version, ``x.y.z``.
        description: The server's name and anything else, escaped in the banner.
        date: The date shown (default: today).
    """

    number: str
    description: str
    date: _dt.date = attrs.field(factory=_dt.date.today)

    def banner(self) -> str:
        """``$GahpVersion: <x.y.z> <Mon> <d> <yyyy> <descr> $`` with the description escaped."""
        d = self.date
        return (
            f"$GahpVersion: {self.number} {_MONTHS[d.month - 1]} {d.day} {d.year} "
            f"{escape(self.description)} $"
        )


def parse_banner(line: str) -> Version | None:
    """Read a banner the way HTCondor does: from the first ``$``, backslashes dropped."""
    start = line.find("$")
    if start < 0:
        return None
    text = line[start:].rstrip("\r\n").replace("\\", "")
    parts = text.split(" ")
    if len(parts) < 7 or parts[0] != "$GahpVersion:" or parts[-1] != "$":
        return None
    try:
        month = _MONTHS.index(parts[2]) + 1
        date = _dt.date(int(parts[4]), month, int(parts[3]))
    except ValueError:
        return None
    return Version(number=parts[1], description=" ".join(parts[5:-1]), date=date)
