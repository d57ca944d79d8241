"""A burst: `queue 200` through blahpd on fork (`queue 100` on Slurm, OpenPBS and LSF), driven
by the real gridmanager of both versions at once.  Every job completes with its own output, and
blahpd gives the gridmanager no error reply (no `E`/`F`, no non-zero BLAH rc) meanwhile."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import DONE, HELD, HTCondor

SIZE = {"fork": 200, "slurm": 100, "pbs": 100, "lsf": 100}
DEADLINE_S = 480.0
# The batch systems on one version only, and 100 jobs: the CI Slurm starts about 1.5 jobs/s
CASES = (
    ("9.12.0", "fork"),
    ("25.0.13", "fork"),
    ("25.0.13", "slurm"),
    ("25.0.13", "pbs"),
    ("25.0.13", "lsf"),
)
ERROR_REPLY = re.compile(r"GAHP\[\d+\] -> '(?:[EF]'|\d+' '(?!0')\d+')")


@dataclass
class Burst:
    condor: HTCondor
    system: str
    jobdir: Path
    log_offset: int
    cluster: int = 0
    ads: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def n(self) -> int:
        return SIZE[self.system]

    def settled(self) -> bool:
        return len(self.ads) == self.n and all(
            a.get("__history") or a.get("JobStatus") == HELD for a in self.ads.values()
        )

    def new_log(self) -> str:
        with open(self.condor.gridmanager_log, errors="replace") as f:
            f.seek(self.log_offset)
            return f.read()


@pytest.fixture(scope="module")
def bursts(
    htcondors, slurm_env, pbs_env, lsf_env, jobdirs
) -> Iterator[dict[tuple[str, str], Burst]]:
    up = {
        "fork": True,
        "slurm": slurm_env is not None,
        "pbs": pbs_env is not None,
        "lsf": lsf_env is not None,
    }
    out: dict[tuple[str, str], Burst] = {}
    start = time.monotonic()
    for version, system in CASES:
        condor = htcondors[version][0]
        if condor is not None and up[system]:
            d = jobdirs(condor, f"burst-{system}")
            try:
                offset = condor.gridmanager_log.stat().st_size
            except OSError:
                offset = 0
            b = Burst(condor, system, d, offset)
            b.cluster = condor.submit(
                d,
                (
                    f"universe = grid\ngrid_resource = batch {system}\nshould_transfer_files = NO\n"
                    "executable = /bin/echo\narguments = job-$(Process)\n"
                    "output = out.$(Process)\nerror = err.$(Process)\nlog = burst.log\n"
                    f"queue {SIZE[system]}\n"
                ),
            )
            out[(version, system)] = b
    end = start + DEADLINE_S
    while out and time.monotonic() < end:
        pending = [b for b in out.values() if not b.settled()]
        if not pending:
            break
        for b in pending:
            history = b.condor.in_history([b.cluster])
            ads = b.condor.ads([b.cluster])
            ads.update({k: {**v, "__history": True} for k, v in history.items()})
            b.ads = ads
            if b.settled():
                b.seconds = time.monotonic() - start
        time.sleep(2)
    yield out
    for b in out.values():
        b.condor.remove([b.cluster])


@pytest.mark.parametrize(("version", "system"), CASES)
def test_burst_all_complete_without_error_replies(
    bursts, need_htcondor, batch_env, version: str, system: str
) -> None:
    need_htcondor(version)
    batch_env(system)
    b = bursts[(version, system)]
    states = [a.get("JobStatus") for a in b.ads.values()]
    done = [a for a in b.ads.values() if a.get("__history") and a.get("JobStatus") == DONE]
    assert len(done) == b.n, (
        f"{len(done)}/{b.n} completed; states {sorted(set(map(str, states)))}; held: "
        f"{[a.get('HoldReason') for a in b.ads.values() if a.get('JobStatus') == HELD][:3]}"
    )
    assert all(a.get("ExitCode") == 0 for a in done)
    for i in range(b.n):
        assert (b.jobdir / f"out.{i}").read_text() == f"job-{i}\n"
    errors = ERROR_REPLY.findall(b.new_log())
    assert not errors, errors[:5]
    print(f"{version} {system}: {b.n} jobs settled in {b.seconds:.0f}s")
