"""The root of gahp_boinc's exceptions (the emulator has its own:
``gahp_boinc.emulator.EmulatorError``)."""

from __future__ import annotations


class BoincError(Exception):
    """Anything that went wrong talking to a BOINC project or staging files for it: a failure
    phrased for the client.

    Subclasses: :class:`~gahp_boinc._replies.RpcError` (the server or the network),
    :class:`~gahp_boinc._staging.StagingError` (an input or argument that cannot be sent),
    :class:`~gahp_boinc._outputs.OutputError` (outputs that cannot be placed).
    """
