"""``blahpd``: the BLAH server executable."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gahp_core import main_for_backend


def main(argv: Sequence[str] | None = None) -> None:
    """Run the BLAH server on stdin/stdout (logs: --log FILE or $BLAHPD_LOG);
    ``--show-config`` prints the settings in force and exits."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--show-config" in args:
        from gahp_blah.show_config import main as show

        raise SystemExit(show(args))
    main_for_backend("blah", argv, prog="blahpd", log_env="BLAHPD_LOG")
