"""Fixtures for the emulator tests (they live in emu_helpers, importable by a unique name)."""

from emu_helpers import *  # noqa: F403
