"""``python -m gahp_core``: the same as ``gahp-server``."""

from gahp_core.cli import main

main()
