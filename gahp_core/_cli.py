"""``gahp-server --backend NAME``: run any installed GAHP backend."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gahp_core import __version__
from gahp_core._app import add_backend_options, add_core_options, exit_now, run
from gahp_core._errors import GahpError
from gahp_core._hooks import BackendNotFound, available_backends, load_backend, plugin_manager


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--backend`` first, let the backend add its options, then serve."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--backend")
    pre.add_argument("--list-backends", action="store_true")
    known, _ = pre.parse_known_args(argv)
    if known.list_backends:
        for name, ep in sorted(available_backends().items()):
            print(f"{name}\t{ep.value}")
        raise SystemExit(0)
    pm = plugin_manager()
    parser = argparse.ArgumentParser(
        prog="gahp-server", description="Run a GAHP server with an installed backend."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--backend",
        required=True,
        help="installed backend name (see --list-backends), or module:NAME to import one",
    )
    parser.add_argument("--list-backends", action="store_true", help="list installed backends")
    add_core_options(parser)
    if known.backend:
        try:
            load_backend(pm, known.backend)
        except BackendNotFound as exc:
            parser.error(str(exc))
        try:
            add_backend_options(pm, parser)
        except GahpError as exc:
            parser.error(str(exc))
    options = parser.parse_args(argv)
    exit_now(run(pm, options))
