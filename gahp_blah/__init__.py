"""gahp_blah: a BLAH server (``blahpd``) on local batch systems through gahp_lrms drivers."""

from gahp_core import __version__

__all__ = ["__version__"]
