"""``python -m gahp_core``: the same as ``gahp-server``."""

from gahp_core._cli import main

main()
