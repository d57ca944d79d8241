"""``python -m gahp_boinc.emulator``: same as the ``boinc-emulator`` command."""

import sys

from .cli import main

sys.exit(main())
