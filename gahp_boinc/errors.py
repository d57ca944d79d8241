"""The root of the exceptions gahp_boinc raises."""

from __future__ import annotations


class BoincError(Exception):
    """Anything that went wrong talking to a BOINC project or staging files for it.

    Subclasses: :class:`~gahp_boinc.replies.RpcError` (the server or the network),
    :class:`~gahp_boinc.staging.StagingError` (an input or argument that cannot be sent),
    :class:`~gahp_boinc.outputs.OutputError` (outputs that cannot be placed).
    """
