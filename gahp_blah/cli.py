"""``blahpd``: the BLAH server executable."""

from __future__ import annotations

from collections.abc import Sequence

from gahp_core import main_for_backend


def main(argv: Sequence[str] | None = None) -> None:
    """Run the BLAH server on stdin/stdout (logs: --log FILE or $BLAHPD_LOG)."""
    main_for_backend("blah", argv, prog="blahpd", log_env="BLAHPD_LOG")
