"""``ng_invoke_server.Fork``, ``.Slurm``, ``.SGE``, ``.PBS``, ``.LSF`` and ``.Condor``: the
executables Ninf-G runs.

The Ninf-G client passes nothing but ``-l <logfile>``; everything else comes in the
requests. Driver options can be given in the environment: ``NG_INVOKE_BIN_DIR`` (where the
batch system's commands are, e.g. ``/opt/pbs/bin``: a PATH may hold another system's
``qsub``), ``NG_INVOKE_SLURM_CONF`` (the Slurm configuration) — and Slurm's own
``SLURM_CONF`` is honoured as usual; ``NG_INVOKE_SGE_PE`` (the Grid Engine parallel
environment for jobs with ``count`` > 1) — Grid Engine itself is found through
``SGE_ROOT``/``SGE_CELL``/``SGE_QMASTER_PORT``, LSF through ``LSF_ENVDIR``;
``NG_INVOKE_CONDOR_SCHEDD`` and ``NG_INVOKE_CONDOR_COLLECTOR`` (the schedd, and the collector
that locates it) — without them, the pool of the HTCondor configuration in the environment
(``CONDOR_CONFIG``), as HTCondor's own tools find it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gahp_core import __version__, main_for_backend

# Environment settings passed on as driver options: (variable, option key, the drivers
# that take it; bin_dir: every batch system's, not fork's nor HTCondor's).
_ENV_OPTIONS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("NG_INVOKE_BIN_DIR", "bin_dir", frozenset({"slurm", "sge", "pbs", "lsf"})),
    ("NG_INVOKE_SLURM_CONF", "slurm_conf", frozenset({"slurm", "pbs"})),
    ("NG_INVOKE_CONDOR_SCHEDD", "schedd_name", frozenset({"condor"})),
    ("NG_INVOKE_CONDOR_COLLECTOR", "collector", frozenset({"condor"})),
    ("NG_INVOKE_SGE_PE", "parallel_environment", frozenset({"sge"})),
)


def _driver_options(driver: str) -> list[str]:
    """``--driver-option KEY=VALUE`` for each environment setting that applies to ``driver``."""
    inner: list[str] = []
    for var, key, drivers in _ENV_OPTIONS:
        value = os.environ.get(var)
        if value and driver in drivers:
            inner += ["--driver-option", f"{key}={value}"]
    return inner


def _run(driver: str, prog: str, argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(prog=prog, description=f"Ninf-G invoke server ({driver})")
    parser.add_argument("-l", metavar="LOGFILE", help="log file (default: no log)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # The Ninf-G manual: an external module must not fail on arguments it does not know.
    args, unknown = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    inner = ["--driver", driver, *(f"--ignored-argument={a}" for a in unknown)]
    if args.l:
        inner += ["--log", args.l]
    inner += _driver_options(driver)
    main_for_backend("ninfg", inner, prog=prog, log_env="NG_INVOKE_SERVER_LOG")


def fork_main(argv: Sequence[str] | None = None) -> None:
    """Jobs run on this host."""
    _run("fork", "ng_invoke_server.Fork", argv)


def slurm_main(argv: Sequence[str] | None = None) -> None:
    """Jobs go to Slurm."""
    _run("slurm", "ng_invoke_server.Slurm", argv)


def sge_main(argv: Sequence[str] | None = None) -> None:
    """Jobs go to (Son of) Grid Engine."""
    _run("sge", "ng_invoke_server.SGE", argv)


def pbs_main(argv: Sequence[str] | None = None) -> None:
    """Jobs go to PBS (PBS Professional/OpenPBS, or Torque-style commands)."""
    _run("pbs", "ng_invoke_server.PBS", argv)


def lsf_main(argv: Sequence[str] | None = None) -> None:
    """Jobs go to LSF (IBM Spectrum LSF, OpenLava, volclava)."""
    _run("lsf", "ng_invoke_server.LSF", argv)


def condor_main(argv: Sequence[str] | None = None) -> None:
    """Jobs go to HTCondor: one cluster of ``count`` procs per job."""
    _run("condor", "ng_invoke_server.Condor", argv)
