"""The root of gahp_ninfg's exceptions."""


class NinfgError(Exception):
    """The root of the Ninf-G invoke servers' exceptions: a failure phrased for the client."""
