"""The root of the emulator's exceptions (apart from the BOINC GAHP's: it plays the server)."""


class EmulatorError(Exception):
    """The root of the emulated BOINC project server's exceptions."""
