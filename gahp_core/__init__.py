"""gahp_core: a framework for writing GAHP servers.

A backend declares its commands; the core speaks the whole protocol: escaping, the
return and result lines, RESULTS, async notification, response prefixes and shutdown.

Everything a backend (or a program driving one) needs is importable from here; the
modules whose names start with an underscore are the implementation and may change
without notice. :class:`GahpClient` (over pipes) and :class:`InProcessClient` talk to a
server as HTCondor does. :mod:`gahp_core.testing` is the public test kit, and ``__version__``
the version of the ``gahp`` distribution.
"""

__version__ = "0.1.0"  # first: the modules below import it

from gahp_core._app import add_core_options, build_server, dialect_of, main_for_backend, run
from gahp_core._client import GahpClient, GahpTimeout, InProcessClient, LineClient
from gahp_core._client_connection import BadServerLine, ClientConnection, parse_results_head
from gahp_core._commands import (
    BadRequest,
    Command,
    Refused,
    Unavailable,
    async_command,
    out_of_service,
    sync_command,
)
from gahp_core._config import (
    ConfigError,
    add_settings_options,
    from_text,
    http_url,
    load_settings,
    load_toml,
    non_empty_string,
    non_negative_int,
    non_negative_number,
    path,
    positive_int,
    positive_number,
    read_secret_file,
    setting,
    setting_names,
    settings_from,
    strict_bool,
)
from gahp_core._connection import PROTOCOL_COMMANDS, Closed, GahpConnection, ProtocolMisuse
from gahp_core._dialect import Dialect, Runtime
from gahp_core._errors import GahpError, error_text
from gahp_core._escaping import LineSplitter, escape, join, split
from gahp_core._gahp_dialect import GahpDialect
from gahp_core._hooks import (
    ENTRY_POINT_GROUP,
    BackendContext,
    BackendNotFound,
    BadBackend,
    GahpSpec,
    HookFailed,
    available_backends,
    hookimpl,
    load_backend,
    plugin_manager,
)
from gahp_core._logs import REDACTOR
from gahp_core._options import ServerOptions
from gahp_core._private_paths import (
    UnsafePath,
    check_parent,
    check_private,
    open_private,
    private_dir,
    write_private,
)
from gahp_core._protocol import (
    ERROR,
    FAILURE,
    SUCCESS,
    THREADS_LIMIT_REACHED,
    Request,
    Version,
    format_line,
    format_return,
    parse_banner,
    parse_reqid,
    parse_request,
)
from gahp_core._server import GahpServer

__all__ = [
    "parse_results_head",
    "ClientConnection",
    "BadServerLine",
    "LineClient",
    "InProcessClient",
    "GahpTimeout",
    "GahpClient",
    "ENTRY_POINT_GROUP",
    "ERROR",
    "FAILURE",
    "PROTOCOL_COMMANDS",
    "REDACTOR",
    "SUCCESS",
    "THREADS_LIMIT_REACHED",
    "BackendContext",
    "BackendNotFound",
    "BadBackend",
    "BadRequest",
    "Closed",
    "Command",
    "ConfigError",
    "Dialect",
    "GahpConnection",
    "GahpDialect",
    "GahpError",
    "GahpServer",
    "GahpSpec",
    "HookFailed",
    "LineSplitter",
    "ProtocolMisuse",
    "Refused",
    "Request",
    "Runtime",
    "ServerOptions",
    "Unavailable",
    "UnsafePath",
    "Version",
    "__version__",
    "add_core_options",
    "add_settings_options",
    "async_command",
    "available_backends",
    "build_server",
    "check_parent",
    "check_private",
    "dialect_of",
    "error_text",
    "escape",
    "format_line",
    "format_return",
    "from_text",
    "hookimpl",
    "http_url",
    "join",
    "load_backend",
    "load_settings",
    "load_toml",
    "main_for_backend",
    "non_empty_string",
    "non_negative_int",
    "non_negative_number",
    "open_private",
    "out_of_service",
    "parse_banner",
    "parse_reqid",
    "parse_request",
    "path",
    "plugin_manager",
    "positive_int",
    "positive_number",
    "private_dir",
    "read_secret_file",
    "run",
    "setting",
    "setting_names",
    "settings_from",
    "split",
    "strict_bool",
    "sync_command",
    "write_private",
]
