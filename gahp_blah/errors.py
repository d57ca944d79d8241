"""The root of gahp_blah's exceptions."""


class BlahError(Exception):
    """The root of blahpd's exceptions: a failure phrased for the client."""
