"""``blahpd``: the BLAH server executable."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gahp_core import main_for_backend


def main(argv: Sequence[str] | None = None) -> None:
    """Run the BLAH server on stdin/stdout (logs: --log FILE or $BLAHPD_LOG);
    ``--show-config`` prints the settings in force and exits; ``blahpd install-remote``
    installs it for HTCondor's remote_gahp (see :mod:`gahp_blah.remote_install`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install-remote"]:
        from gahp_blah.remote_install import main as install

        raise SystemExit(install(args[1:]))
    if "--show-config" in args:
        from gahp_blah.show_config import main as show

        raise SystemExit(show(args))
    main_for_backend("blah", argv, prog="blahpd", log_env="BLAHPD_LOG")
