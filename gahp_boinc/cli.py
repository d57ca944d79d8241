"""``boinc-gahp``: the BOINC GAHP server executable."""

from __future__ import annotations

from collections.abc import Sequence

from gahp_core import main_for_backend


def main(argv: Sequence[str] | None = None) -> None:
    """Run the BOINC GAHP on stdin/stdout (logs: --log FILE or $BOINC_GAHP_LOG)."""
    main_for_backend(
        "boinc", argv, prog="boinc-gahp", log_env="BOINC_GAHP_LOG", module="gahp_boinc.backend"
    )
