"""The root of gahp_core's exceptions, and the text of an error result.

Each package has one exception root: :class:`GahpError` here, ``gahp_boinc.BoincError``,
``gahp_boinc.emulator.EmulatorError``, ``gahp_lrms.DriverError``, ``gahp_blah.BlahError``
and ``gahp_ninfg.NinfgError``. An exception of a package's root is a failure the package
phrased for its client; anything else that escapes a handler is a bug or a local problem.
"""

from __future__ import annotations

from collections.abc import Iterable

from gahp_core._logs import MIN_SECRET, REDACTED, REDACTOR


class GahpError(Exception):
    """The root of gahp_core's exceptions."""


def error_text(
    exc: BaseException,
    secrets: Iterable[str] = (),
    *,
    expected: type[BaseException] | tuple[type[BaseException], ...] = GahpError,
) -> str:
    """The text of the error result that reports ``exc``, with every secret masked.

    An ``expected`` exception (by default a :class:`GahpError`; a backend passes its own
    root) says what went wrong in its message. A local :class:`OSError` reads ``local file
    error: ...``; anything else is ``internal error: <class>: ...`` (a bug: log it). The
    text is stripped; an empty one gives the exception's class name. Line breaks stay:
    the protocol escapes them within the field.

    Each of ``secrets`` (an authenticator, say) and every secret registered with the
    process-wide redactor (:data:`gahp_core.REDACTOR`, which ``context.redact``
    feeds) is replaced by ``***``: a server may echo a secret in its error text.
    """
    if isinstance(exc, expected):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = f"local file error: {exc}"
    else:
        text = f"internal error: {type(exc).__name__}: {exc}"
    text = text.strip() or type(exc).__name__
    for secret in secrets:
        if len(secret) >= MIN_SECRET:
            text = text.replace(secret, REDACTED)
    return REDACTOR.redact(text)
