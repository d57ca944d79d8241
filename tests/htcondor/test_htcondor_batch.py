"""`grid_resource = batch fork|slurm|sge|pbs|lsf` through blahpd (pbs: the real OpenPBS, lsf:
volclava), driven by the real gridmanager of HTCondor 9.12 and 25.0: arguments and environment
with spaces and quotes, stdin, output and error back, the exit code in condor_history;
condor_rm; condor_hold + condor_release.

All jobs of every (version, system) are submitted at once by one module fixture and advanced
together (remove once running, hold once running, release once held), so they run concurrently.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import (
    DONE,
    HELD,
    REMOVED,
    RUNNING,
    VERSIONS,
    HTCondor,
    owned,
    user_log_events,
)

SYSTEMS = ("fork", "slurm", "sge", "pbs", "lsf")
DEADLINE_S = 300.0

ARGS = [
    "-c",
    'printf \'%s|\' "$1" "$2" "$GREETING" "$QUOTED"; cat; echo to-stderr >&2; exit 3',
    "argv0",
    "one two",
    'say "hi"',
]
ENV = {"GREETING": "hello world", "QUOTED": 'it\'s "quoted"'}
STDIN = "line from stdin\n"
EXPECTED_OUT = 'one two|say "hi"|hello world|it\'s "quoted"|' + STDIN


def condor_args(args: list[str]) -> str:
    """A submit-file ``arguments`` value in the new syntax."""
    inner = " ".join("'" + a.replace("'", "''") + "'" for a in args)
    return '"' + inner.replace('"', '""') + '"'


def condor_env(env: dict[str, str]) -> str:
    """A submit-file ``environment`` value in the new syntax."""
    inner = " ".join(f"{k}='" + v.replace("'", "''") + "'" for k, v in env.items())
    return '"' + inner.replace('"', '""') + '"'


def description(system: str, body: str) -> str:
    return (
        f"universe = grid\ngrid_resource = batch {system}\n"
        f"should_transfer_files = NO\n{body}\nqueue\n"
    )


@dataclass
class Combo:
    """The three jobs of one (HTCondor, batch system) and what happened to them."""

    condor: HTCondor
    system: str
    jobdir: Path
    clusters: dict[str, int] = field(default_factory=dict)
    ads: dict[str, dict[str, Any]] = field(default_factory=dict)
    first_grid_id: dict[str, str] = field(default_factory=dict)
    hold_reason: str = ""
    sent: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def submit(self) -> None:
        d, s = self.jobdir, self.system
        owned(self.condor, d / "in.txt", STDIN)
        self.clusters["a"] = self.condor.submit(
            d,
            description(
                s,
                (
                    f"executable = /bin/sh\narguments = {condor_args(ARGS)}\n"
                    f"environment = {condor_env(ENV)}\n"
                    "input = in.txt\noutput = a.out\nerror = a.err\nlog = a.log"
                ),
            ),
            "a.sub",
        )
        self.clusters["rm"] = self.condor.submit(
            d,
            description(
                s,
                (
                    "executable = /bin/sleep\narguments = 600\noutput = rm.out\nerror = rm.err\n"
                    "log = rm.log"
                ),
            ),
            "rm.sub",
        )
        self.clusters["hold"] = self.condor.submit(
            d,
            description(
                s,
                (
                    "executable = /bin/sh\narguments = \"-c 'sleep 8; echo done'\"\n"
                    "output = hold.out\nerror = hold.err\nlog = hold.log"
                ),
            ),
            "hold.sub",
        )

    def advance(self, ads: dict[tuple[int, int], dict[str, Any]]) -> None:
        """One step of each job's script, from the current ads."""
        for key, cluster in self.clusters.items():
            if key in self.finished:
                continue
            ad = ads.get((cluster, 0))
            if ad is None:
                continue
            self.ads[key] = ad
            status = ad.get("JobStatus")
            if status == RUNNING and key in ("rm", "hold") and key not in self.sent:
                self.first_grid_id[key] = ad.get("GridJobId", "")
                tool = "condor_rm" if key == "rm" else "condor_hold"
                proc = self.condor.tool(tool, str(cluster))
                if proc.returncode != 0:
                    self.problems.append(f"{tool} {cluster}: {proc.stderr}")
                self.sent.add(key)
            elif (
                status == HELD
                and key == "hold"
                and "release" not in self.sent
                and ad.get("Managed") != "External"
            ):
                # release only once the gridmanager has handled the hold (cancelled the batch
                # job and handed the job back): a release before that goes unnoticed by it
                self.hold_reason = ad.get("HoldReason", "")
                proc = self.condor.tool("condor_release", str(cluster))
                if proc.returncode != 0:
                    self.problems.append(f"condor_release {cluster}: {proc.stderr}")
                self.sent.add("release")
            elif status == HELD and (key != "hold" or "release" in self.sent):
                self.problems.append(f"{key} job held: {ad.get('HoldReason')}")
                self.finished.add(key)
            elif status in (DONE, REMOVED) and ad.get("__history"):
                self.finished.add(key)

    @property
    def complete(self) -> bool:
        return self.finished >= set(self.clusters)


@pytest.fixture(scope="module")
def campaign(
    htcondors, slurm_env, sge_env, pbs_env, lsf_env, jobdirs
) -> Iterator[dict[tuple[str, str], Combo]]:
    """Submit every (version, system) at once and drive all jobs to their end."""
    up = {
        "fork": True,
        "slurm": slurm_env is not None,
        "pbs": pbs_env is not None,
        "sge": sge_env is not None,
        "lsf": lsf_env is not None,
    }
    combos: dict[tuple[str, str], Combo] = {}
    for version in VERSIONS:
        condor = htcondors[version][0]
        if condor is None:
            continue
        for system in SYSTEMS:
            if up[system]:
                combo = Combo(condor, system, jobdirs(condor, f"batch-{system}"))
                combo.submit()
                combos[(version, system)] = combo
    end = time.monotonic() + DEADLINE_S
    while combos and time.monotonic() < end:
        for condor in {c.condor for c in combos.values()}:
            mine = [c for c in combos.values() if c.condor is condor]
            clusters = [n for c in mine for n in c.clusters.values()]
            history = condor.in_history(clusters)
            ads = condor.ads(clusters)
            for k in history:
                ads[k] = {**history[k], "__history": True}
            for c in mine:
                c.advance(ads)
        if all(c.complete for c in combos.values()):
            break
        time.sleep(1)
    yield combos
    for c in combos.values():  # nothing may outlive the module, e.g. after a timeout
        c.condor.remove(c.clusters.values())


def _combo(campaign, need_htcondor, batch_env, version: str, system: str) -> Combo:
    need_htcondor(version)
    batch_env(system)
    combo = campaign[(version, system)]
    assert not combo.problems, combo.problems
    return combo


def _reply(condor: HTCondor, command: str, job_id: str) -> list[str]:
    """The result line the GAHP gave to ``command`` for ``job_id`` (from the GridmanagerLog)."""
    sent = condor.gahp_lines(f"<- '{command} ", f" {job_id}'")
    assert sent, f"the gridmanager sent no {command} for {job_id}"
    gahp = sent[-1].split("GAHP[", 1)[1].split("]", 1)[0]
    reqid = sent[-1].split(f"{command} ", 1)[1].split()[0]
    replies = condor.gahp_lines(f"GAHP[{gahp}] -> '{reqid}' ")
    assert replies, f"no result for {command} {reqid}"
    return replies[-1].split("-> ", 1)[1].strip("'").split("' '")


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("version", VERSIONS)
def test_arguments_environment_stdin_exit_code(
    campaign, need_htcondor, batch_env, version: str, system: str
) -> None:
    combo = _combo(campaign, need_htcondor, batch_env, version, system)
    assert "a" in combo.finished, f"job did not finish: {combo.ads.get('a')}"
    ad = combo.ads["a"]
    assert ad["JobStatus"] == DONE, ad
    assert ad.get("ExitCode") == 3, ad
    assert (combo.jobdir / "a.out").read_text() == EXPECTED_OUT
    assert (combo.jobdir / "a.err").read_text() == "to-stderr\n"
    events = user_log_events(combo.jobdir / "a.log")
    assert events[0] == 0 and 5 in events, events
    assert "return value 3" in (combo.jobdir / "a.log").read_text()


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("version", VERSIONS)
def test_condor_rm_cancels_the_batch_job(
    campaign, need_htcondor, batch_env, version: str, system: str
) -> None:
    combo = _combo(campaign, need_htcondor, batch_env, version, system)
    assert "rm" in combo.finished, f"job did not leave the queue: {combo.ads.get('rm')}"
    assert combo.ads["rm"]["JobStatus"] == REMOVED
    blah_id = combo.first_grid_id["rm"].split()[-1]
    reply = _reply(combo.condor, "BLAH_JOB_CANCEL", blah_id)
    assert reply[1] == "0", reply
    assert 9 in user_log_events(combo.jobdir / "rm.log")


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("version", VERSIONS)
def test_condor_hold_then_release_runs_the_job_again(
    campaign, need_htcondor, batch_env, version: str, system: str
) -> None:
    combo = _combo(campaign, need_htcondor, batch_env, version, system)
    assert "release" in combo.sent, f"never held: {combo.ads.get('hold')}"
    assert "hold" in combo.finished, f"did not finish after release: {combo.ads.get('hold')}"
    ad = combo.ads["hold"]
    assert ad["JobStatus"] == DONE and ad.get("ExitCode") == 0, ad
    first = combo.first_grid_id["hold"].split()[-1]
    assert _reply(combo.condor, "BLAH_JOB_CANCEL", first)[1] == "0"
    assert ad["GridJobId"].split()[-1] != first, "release did not submit the job again"
    assert (combo.jobdir / "hold.out").read_text() == "done\n"
    events = user_log_events(combo.jobdir / "hold.log")
    assert 12 in events and 13 in events and events[-1] == 5, events
