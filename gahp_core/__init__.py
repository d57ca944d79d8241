"""gahp_core: a framework for writing GAHP servers.

A backend declares its commands; the core speaks the whole protocol: escaping, the
return and result lines, RESULTS, async notification, response prefixes and shutdown.
"""

__version__ = "0.1.0"

from gahp_core.commands import BadRequest, Command, Refused, async_command, sync_command
from gahp_core.errors import GahpError, error_text
from gahp_core.hooks import BackendContext, hookimpl
from gahp_core.protocol import Version

__all__ = [
    "BackendContext",
    "BadRequest",
    "Command",
    "GahpError",
    "Refused",
    "Version",
    "__version__",
    "async_command",
    "error_text",
    "hookimpl",
    "sync_command",
]
