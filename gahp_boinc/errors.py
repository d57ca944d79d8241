"""The root of gahp_boinc's exceptions (the emulator has its own:
``gahp_boinc.emulator.EmulatorError``)."""


class BoincError(Exception):
    """The root of the BOINC GAHP's exceptions: a failure phrased for the client."""
