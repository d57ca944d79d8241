"""What the blahpd tests share (a module of its own: importable by a unique name): the
submit-ad builder and one harness, a blahpd over pipes as the gridmanager runs it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import classad2

from gahp_core.testing import GahpClient, wait_for

BLAHPD = [sys.executable, "-m", "gahp_blah"]
IDLE, RUNNING, REMOVED, COMPLETED, HELD = 1, 2, 3, 4, 5


def ad_string(**attrs: object) -> str:
    """A submit ad in the BLAH syntax: strings quoted and escaped, anything else as is."""
    parts = []
    for k, v in attrs.items():
        if isinstance(v, str):
            v = '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{k} = {v}")
    return "[ " + "; ".join(parts) + " ]"


def toml_value(v: object) -> str:
    """``v`` written in TOML (a boolean, a number or a string)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v) if isinstance(v, int | float) else '"' + str(v).replace('"', '\\"') + '"'


def config_file(tmp: Path, text: str = "") -> Path:
    """``tmp/blahpd.toml``: the state under ``tmp/state``, then ``text`` (driver tables)."""
    path = tmp / "blahpd.toml"
    path.write_text(f'state_dir = "{tmp / "state"}"\n{text}')
    return path


def boinc_config(tmp: Path, url: str, authenticator: str, **driver: object) -> Path:
    """:func:`config_file` with a ``[driver.boinc]`` table for a project (``retries = 1``)
    and ``driver``'s settings."""
    auth = tmp / "authenticator"
    auth.write_text(authenticator + "\n")
    settings: dict[str, object] = {
        "project_url": url,
        "authenticator_file": str(auth),
        "retries": 1,
        **driver,
    }
    lines = [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    return config_file(tmp, "[driver.boinc]\n" + "\n".join(lines) + "\n")


class Blah:
    """A blahpd over pipes (``c``, a :class:`GahpClient`), restartable on the same state.

    ``args`` follow ``python -m gahp_blah`` (``--config``, ``--state-dir``, ``--log``...).
    """

    def __init__(self, *args: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> None:
        self.argv = [*BLAHPD, *map(str, args)]
        self.env = env
        self.c = GahpClient(self.argv, env=env)

    def restart(self) -> None:
        """SIGKILL, no shutdown of any kind, then a new blahpd on the same state."""
        self.c.proc.kill()
        self.c.proc.wait(10)
        self.c.close()
        self.c = GahpClient(self.argv, env=self.env)

    def submit(self, **attrs: object) -> list[str]:
        """BLAH_JOB_SUBMIT's result fields for the ad of ``attrs``."""
        return self.c.call("BLAH_JOB_SUBMIT", ad_string(**attrs), timeout=60)

    def submit_ok(self, **attrs: object) -> str:
        """The job id of an accepted submission."""
        res = self.submit(**attrs)
        assert len(res) == 3 and res[0] == "0", res
        return res[2]

    def status_fields(self, jobid: str, timeout: float = 120) -> list[str]:
        """BLAH_JOB_STATUS's result fields, errors included."""
        return self.c.call("BLAH_JOB_STATUS", jobid, timeout=timeout)

    def status(self, jobid: str) -> tuple[int, dict[str, Any]]:
        """The job's state and status ad; the status must be answered."""
        res = self.status_fields(jobid)
        assert len(res) == 4 and res[0] == "0", res
        ad = classad2.ClassAd(res[3])
        return int(res[2]), {k: ad[k] for k in ad}

    def wait(self, jobid: str, *states: int, timeout: float = 90) -> dict[str, Any]:
        """The status ad once the job is in one of ``states``."""
        last: list[object] = []

        def reached() -> tuple[int, dict[str, Any]] | None:
            got = self.status(jobid)
            last[:] = [got]
            return got if got[0] in states else None

        try:
            return wait_for(reached, timeout, f"{jobid} in {states}", interval=0.2)[1]
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last {last}") from None

    def close(self) -> None:
        self.c.close()

    def __enter__(self) -> Blah:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
