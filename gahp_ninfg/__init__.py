"""gahp_ninfg: Ninf-G invoke servers (``ng_invoke_server.Fork``, ``ng_invoke_server.Slurm``)."""

from gahp_core import __version__
from gahp_ninfg.errors import NinfgError

__all__ = ["NinfgError", "__version__"]
