"""gahp_boinc: the BOINC GAHP (``boinc-gahp``) and a BOINC project server emulator."""

from gahp_boinc.errors import BoincError
from gahp_core import __version__

__all__ = ["BoincError", "__version__"]
