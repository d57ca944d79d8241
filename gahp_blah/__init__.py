"""gahp_blah: a BLAH server (``blahpd``) on local batch systems through gahp_lrms drivers."""

from gahp_blah.errors import BlahError
from gahp_core import __version__

__all__ = ["BlahError", "__version__"]
