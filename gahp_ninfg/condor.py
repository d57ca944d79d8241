"""What ``ng_invoke_server.Condor`` adds to the others (pure): ``condor_option`` lines and
the job id a cluster gives.

The client passes ``condor_option <name> <value>`` attributes (from ``<SERVER>
invoke_server_option "condor_option <name> <value>"`` or ``<INVOKE_SERVER> option ...``):
submit commands for the job's cluster, one each. They are checked here and refused with a
reason when malformed; what they may not touch is what the server sets from the request
(the executable, its arguments, environment, streams and directory, and how the job is
tracked).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gahp_lrms.condor import OWN_COMMANDS
from gahp_ninfg.attributes import AttributeProblem, JobRequest

MAX_OPTIONS = 32
MAX_VALUE = 1024
_NAME = re.compile(r"\+?[A-Za-z_][A-Za-z0-9_.]{0,63}\Z")
_CONTROL = re.compile("[\x00-\x1f\x7f]")
RESERVED = OWN_COMMANDS - {"universe"}
"""Submit commands the server writes itself from the request (compared in lower case)."""
UNIVERSES = frozenset({"vanilla"})
"""The universes a job may ask for: its executable runs from a shared filesystem."""


def parse_condor_options(lines: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``condor_option`` values as ``(name, value)`` pairs, in order; an
    :class:`AttributeProblem` saying what is wrong with the first bad one."""
    if len(lines) > MAX_OPTIONS:
        raise AttributeProblem(f"more than {MAX_OPTIONS} condor_option lines ({len(lines)})")
    seen: set[str] = set()
    options = []
    for line in lines:
        name, value = _condor_option(line)
        key = name.lower()
        if key in seen:
            raise AttributeProblem(f"condor_option {name} is given twice")
        seen.add(key)
        options.append((name, value))
    return tuple(options)


def _condor_option(line: str) -> tuple[str, str]:
    """One ``condor_option`` line as ``(name, value)``, or the :class:`AttributeProblem`
    saying what is wrong with it."""
    name, _, value = line.strip().partition(" ")
    value = value.strip()
    shown = line if len(line) <= 80 else line[:80] + "..."
    if not name or not value:
        raise AttributeProblem(f"condor_option {shown!r} is not '<name> <value>'")
    if not _NAME.match(name):
        raise AttributeProblem(
            f"condor_option {shown!r}: {name!r} is not a submit command name"
            " ([+]letters, digits, '_' and '.', at most 64)"
        )
    if len(value) > MAX_VALUE:
        raise AttributeProblem(
            f"condor_option {name}: the value is longer than {MAX_VALUE} characters"
        )
    if _CONTROL.search(value):
        raise AttributeProblem(f"condor_option {name}: the value has a control character")
    _check_condor_key(name, value)
    return name, value


def _check_condor_key(name: str, value: str) -> None:
    """Refuse a submit command the server writes itself, and a universe it does not run."""
    key = name.lower()
    if key in RESERVED:
        raise AttributeProblem(
            f"condor_option {name}: set by the invoke server from the request, not an option"
        )
    if key == "universe" and value.lower() not in UNIVERSES:
        raise AttributeProblem(
            f"condor_option universe {value}: only {', '.join(sorted(UNIVERSES))} jobs"
            " (the executable runs from a shared filesystem)"
        )


def cluster_id(natives: Sequence[str]) -> str | None:
    """The cluster id of one cluster's procs (``<cluster>.<proc>`` ids, possibly with a
    prefix naming the schedd); None when they are not all of one cluster."""
    clusters = {n.rpartition(".")[0] for n in natives}
    if len(clusters) != 1:
        return None
    (cluster,) = clusters
    return cluster or None


def spec_extras(request: JobRequest) -> Mapping[str, Any]:
    """The :class:`~gahp_lrms.JobSpec` fields a request's ``condor_option`` lines give
    (``universe vanilla`` is what the driver submits anyway)."""
    options = {
        f"submit:{name}": value
        for name, value in parse_condor_options(request.condor_options)
        if name.lower() != "universe"
    }
    return {"options": options} if options else {}


MANAGER_OPTIONS: Mapping[str, Any] = {"unit_id": cluster_id, "spec_extras": spec_extras}
"""How :class:`~gahp_ninfg.jobs.JobManager` runs Condor jobs: named by their cluster id,
with their ``condor_option`` lines."""
