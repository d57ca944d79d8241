"""``python -m gahp_boinc``: the same as ``boinc-gahp``."""

from gahp_boinc.cli import main

main()
