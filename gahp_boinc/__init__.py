"""gahp_boinc: the BOINC GAHP (``boinc-gahp``) and a BOINC project server emulator."""

from gahp_core import __version__

__all__ = ["__version__"]
