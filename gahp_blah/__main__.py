"""``python -m gahp_blah``: the same as ``blahpd``."""

from gahp_blah.cli import main

main()
