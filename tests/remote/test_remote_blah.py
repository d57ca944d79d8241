"""blahpd on a remote cluster over SSH, driven by the real HTCondor 25.0.13: the gridmanager
runs ``remote_gahp`` twice per resource (our blahpd, and HTCondor's condor_ft-gahp which moves
the sandbox), as BOSCO and OSG's Hosted CEs do.  On Slurm, OpenPBS and LSF: arguments and
environment with spaces and quotes, stdin, input and output files through the real ft-gahp,
the exit code; condor_rm of a running job (gone from the batch system); hold and release.  On
Slurm: a burst, and the SSH connections killed in mid-run (the gridmanager starts remote_gahp
again; no job held or lost).

All jobs of the first group are submitted at once by one module fixture and advanced together.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from htcondor_kit import DONE, HELD, REMOVED, RUNNING, owned, user_log_events
from live_services import lsf_bin_dir
from remote_kit import Remote

SYSTEMS = ("slurm", "pbs", "lsf")
DEADLINE_S = 420.0

ARGS = [
    "-c",
    'printf \'%s|\' "$1" "$2" "$GREETING" "$QUOTED"; cat; cat data.txt >result.txt;'
    " pwd >where.txt; echo to-stderr >&2; exit 3",
    "argv0",
    "one two",
    'say "hi"',
]
ENV = {"GREETING": "hello world", "QUOTED": 'it\'s "quoted"'}
STDIN = "line from stdin\n"
DATA = "input file through the ft-gahp\n"
EXPECTED_OUT = 'one two|say "hi"|hello world|it\'s "quoted"|' + STDIN


def condor_args(args: list[str]) -> str:
    inner = " ".join("'" + a.replace("'", "''") + "'" for a in args)
    return '"' + inner.replace('"', '""') + '"'


def condor_env(env: dict[str, str]) -> str:
    inner = " ".join(f"{k}='" + v.replace("'", "''") + "'" for k, v in env.items())
    return '"' + inner.replace('"', '""') + '"'


def description(remote: Remote, system: str, body: str, queue: str = "queue") -> str:
    return (
        f"universe = grid\ngrid_resource = {remote.grid_resource(system)}\n"
        f"should_transfer_files = YES\nwhen_to_transfer_output = ON_EXIT\n{body}\n{queue}\n"
    )


def native_id(grid_job_id: str) -> str:
    """``batch slurm <sandbox> slurm/20261127/266`` -> ``266``."""
    return grid_job_id.split()[-1].split("/", 2)[2]


def ads_with_history(remote: Remote, clusters: list[int]) -> dict[tuple[int, int], dict]:
    condor = remote.condor
    history = condor.in_history(clusters)
    ads = condor.ads(clusters)
    for k in history:
        ads[k] = {**history[k], "__history": True}
    return ads


@dataclass
class Combo:
    """The three jobs of one batch system and what happened to them."""

    remote: Remote
    system: str
    jobdir: Path
    clusters: dict[str, int] = field(default_factory=dict)
    ads: dict[str, dict[str, Any]] = field(default_factory=dict)
    first_grid_id: dict[str, str] = field(default_factory=dict)
    sent: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def submit(self) -> None:
        d, s, r, c = self.jobdir, self.system, self.remote, self.remote.condor
        owned(c, d / "in.txt", STDIN)
        owned(c, d / "data.txt", DATA)
        self.clusters["a"] = c.submit(
            d,
            description(
                r,
                s,
                (
                    f"executable = /bin/sh\narguments = {condor_args(ARGS)}\n"
                    f"environment = {condor_env(ENV)}\ntransfer_executable = false\n"
                    "transfer_input_files = data.txt\n"
                    "transfer_output_files = result.txt, where.txt\n"
                    "input = in.txt\noutput = a.out\nerror = a.err\nlog = a.log"
                ),
            ),
            "a.sub",
        )
        self.clusters["rm"] = c.submit(
            d,
            description(
                r,
                s,
                (
                    "executable = /bin/sleep\narguments = 600\ntransfer_executable = false\n"
                    "output = rm.out\nerror = rm.err\nlog = rm.log"
                ),
            ),
            "rm.sub",
        )
        self.clusters["hold"] = c.submit(
            d,
            description(
                r,
                s,
                (
                    "executable = /bin/sh\narguments = \"-c 'sleep 8; echo done'\"\n"
                    "transfer_executable = false\n"
                    "output = hold.out\nerror = hold.err\nlog = hold.log"
                ),
            ),
            "hold.sub",
        )

    def advance(self, ads: dict[tuple[int, int], dict[str, Any]]) -> None:
        for key, cluster in self.clusters.items():
            if key in self.finished or (cluster, 0) not in ads:
                continue
            ad = self.ads[key] = ads[(cluster, 0)]
            status = ad.get("JobStatus")
            if status == RUNNING and key in ("rm", "hold") and key not in self.sent:
                self.first_grid_id[key] = ad.get("GridJobId", "")
                tool = "condor_rm" if key == "rm" else "condor_hold"
                proc = self.remote.condor.tool(tool, str(cluster))
                if proc.returncode != 0:
                    self.problems.append(f"{tool} {cluster}: {proc.stderr}")
                self.sent.add(key)
            elif (
                status == HELD
                and key == "hold"
                and "release" not in self.sent
                and ad.get("Managed") != "External"
            ):
                proc = self.remote.condor.tool("condor_release", str(cluster))
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
def campaign(remote, remote_jobdirs, slurm_env, pbs_env, lsf_env) -> Iterator[dict[str, Combo]]:
    up = {"slurm": slurm_env, "pbs": pbs_env, "lsf": lsf_env}
    combos = {s: Combo(remote, s, remote_jobdirs(remote, s)) for s in SYSTEMS if up[s]}
    for combo in combos.values():
        combo.submit()
    end = time.monotonic() + DEADLINE_S
    while combos and time.monotonic() < end:
        clusters = [n for c in combos.values() for n in c.clusters.values()]
        ads = ads_with_history(remote, clusters)
        for c in combos.values():
            c.advance(ads)
        if all(c.complete for c in combos.values()):
            break
        time.sleep(1)
    yield combos
    for c in combos.values():
        remote.condor.remove(c.clusters.values())


def _combo(campaign, batch_env, system: str) -> Combo:
    batch_env(system)
    combo = campaign[system]
    assert not combo.problems, combo.problems
    return combo


def _reply(remote: Remote, command: str, job_id: str) -> list[str]:
    """The result the remote blahpd gave to ``command`` for ``job_id`` (GridmanagerLog)."""
    condor = remote.condor
    sent = condor.gahp_lines(f"<- '{command} ", f" {job_id}'")
    assert sent, f"the gridmanager sent no {command} for {job_id}"
    gahp = sent[-1].split("GAHP[", 1)[1].split("]", 1)[0]
    reqid = sent[-1].split(f"{command} ", 1)[1].split()[0]
    replies = condor.gahp_lines(f"GAHP[{gahp}] -> '{reqid}' ")
    assert replies, f"no result for {command} {reqid}"
    return replies[-1].split("-> ", 1)[1].strip("'").split("' '")


def _batch_state(system: str, env: dict[str, str], native: str) -> str:
    """What the batch system itself says of the job (as root)."""
    if system == "slurm":
        argv = ["squeue", "-h", "-j", native, "-o", "%T"]
    elif system == "pbs":
        argv = ["qstat", "-x", "-f", native]
    else:
        argv = [str(Path(lsf_bin_dir(env["LSF_ENVDIR"]) or "") / "bjobs"), "-a", native]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("system", SYSTEMS)
def test_arguments_environment_stdin_files_exit_code(campaign, batch_env, remote, system):
    combo = _combo(campaign, batch_env, system)
    assert "a" in combo.finished, f"job did not finish: {combo.ads.get('a')}"
    ad = combo.ads["a"]
    assert ad["JobStatus"] == DONE and ad.get("ExitCode") == 3, ad
    d = combo.jobdir
    assert (d / "a.out").read_text() == EXPECTED_OUT
    assert (d / "a.err").read_text() == "to-stderr\n"
    assert (d / "result.txt").read_text() == DATA  # in and out through condor_ft-gahp
    where = (d / "where.txt").read_text().strip()
    assert where.startswith(f"{remote.home}/bosco/sandbox/"), where  # ran in the sandbox
    events = user_log_events(d / "a.log")
    assert events[0] == 0 and 5 in events and 12 not in events, events
    # the remote blahpd is ours: the submit went through it and was answered by it
    submit = remote.condor.gahp_lines(
        "<- 'BLAH_JOB_SUBMIT ", f'GridResource\\ =\\ "batch\\ {system}'
    )
    assert submit, "no BLAH_JOB_SUBMIT for this resource in the GridmanagerLog"


@pytest.mark.parametrize("system", SYSTEMS)
def test_condor_rm_of_a_running_job(campaign, batch_env, remote, system):
    combo = _combo(campaign, batch_env, system)
    assert "rm" in combo.finished, f"job did not leave the queue: {combo.ads.get('rm')}"
    assert combo.ads["rm"]["JobStatus"] == REMOVED
    blah_id = combo.first_grid_id["rm"].split()[-1]
    assert _reply(remote, "BLAH_JOB_CANCEL", blah_id)[1] == "0"
    assert 9 in user_log_events(combo.jobdir / "rm.log")
    said = _batch_state(system, batch_env(system), native_id(combo.first_grid_id["rm"]))
    assert not any(w in said for w in ("RUNNING", "PENDING", "job_state = R", " RUN ")), said


@pytest.mark.parametrize("system", SYSTEMS)
def test_hold_then_release(campaign, batch_env, remote, system):
    combo = _combo(campaign, batch_env, system)
    assert "release" in combo.sent, f"never held: {combo.ads.get('hold')}"
    assert "hold" in combo.finished, f"did not finish after release: {combo.ads.get('hold')}"
    ad = combo.ads["hold"]
    assert ad["JobStatus"] == DONE and ad.get("ExitCode") == 0, ad
    first = combo.first_grid_id["hold"].split()[-1]
    assert _reply(remote, "BLAH_JOB_CANCEL", first)[1] == "0"
    assert ad["GridJobId"].split()[-1] != first, "release did not submit the job again"
    assert (combo.jobdir / "hold.out").read_text() == "done\n"
    events = user_log_events(combo.jobdir / "hold.log")
    assert 12 in events and 13 in events and events[-1] == 5, events


# ---------------------------------------------------------------------- burst
BURST = int(os.environ.get("GAHP_REMOTE_BURST", "100"))


def _drive(remote: Remote, clusters: list[int], deadline_s: float) -> dict[tuple[int, int], dict]:
    """Wait until every job of ``clusters`` is in the history (or held); their ads."""
    end = time.monotonic() + deadline_s
    ads: dict[tuple[int, int], dict] = {}
    while time.monotonic() < end:
        ads = ads_with_history(remote, clusters)
        if ads and all(a.get("__history") or a.get("JobStatus") == HELD for a in ads.values()):
            break
        time.sleep(2)
    return ads


def test_burst(remote, remote_jobdirs, batch_env):
    batch_env("slurm")
    d = remote_jobdirs(remote, "burst")
    owned(remote.condor, d / "data.txt", DATA)
    started = time.monotonic()
    cluster = remote.condor.submit(
        d,
        description(
            remote,
            "slurm",
            (
                "executable = /bin/sh\n"
                "arguments = \"-c 'cat data.txt; exit $(( $1 % 7 ))' x $(Process)\"\n"
                "transfer_executable = false\ntransfer_input_files = data.txt\n"
                "output = out.$(Process)\nerror = err.$(Process)\nlog = burst.log"
            ),
            f"queue {BURST}",
        ),
    )
    try:
        ads = _drive(remote, [cluster], 900)
        took = time.monotonic() - started
        print(f"burst of {BURST} remote jobs on Slurm: {took:.0f} s")
        assert len(ads) == BURST
        wrong = {
            k[1]: (a.get("JobStatus"), a.get("ExitCode"), a.get("HoldReason"))
            for k, a in ads.items()
            if not (a.get("JobStatus") == DONE and a.get("ExitCode") == k[1] % 7)
        }
        assert not wrong, wrong
        assert all((d / f"out.{p}").read_text() == DATA for p in range(BURST))
    finally:
        remote.condor.remove([cluster])


# ---------------------------------------------------------------------- SSH drop
def _connection_pids(remote: Remote) -> list[int]:
    """The per-connection sshd processes of the remote path (the listener's sshd
    descendants, not the listener)."""
    listener = int(remote.sshd_pidfile.read_text().split()[0])
    procs: dict[int, tuple[int, str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        procs[int(stat.parent.name)] = (int(text[text.rindex(")") + 2 :].split()[1]), name)
    out: list[int] = []
    frontier = [listener]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, (pp, name) in procs.items() if pp == parent and name == "sshd"]
        out += kids
        frontier += kids
    return out


def test_ssh_connections_killed_mid_run(remote, remote_jobdirs, batch_env):
    batch_env("slurm")
    d = remote_jobdirs(remote, "ssh-drop")
    owned(remote.condor, d / "data.txt", DATA)
    cluster = remote.condor.submit(
        d,
        description(
            remote,
            "slurm",
            (
                "executable = /bin/sh\narguments = \"-c 'sleep 45; cat data.txt; exit 5'\"\n"
                "transfer_executable = false\ntransfer_input_files = data.txt\n"
                "output = out.$(Process)\nerror = err.$(Process)\nlog = drop.log"
            ),
            "queue 3",
        ),
    )
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end:
            ads = ads_with_history(remote, [cluster])
            if len(ads) == 3 and all(a.get("JobStatus") == RUNNING for a in ads.values()):
                break
            time.sleep(1)
        else:
            pytest.fail(f"the jobs did not all run: {ads}")
        before = remote.condor.gahp_lines("<- 'BLAH_JOB_STATUS ")
        old_gahps = {line.split("GAHP[", 1)[1].split("]", 1)[0] for line in before}
        killed = _connection_pids(remote)
        assert killed, "no SSH connection to kill"
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        ads = _drive(remote, [cluster], 420)
        states = {
            k[1]: (a.get("JobStatus"), a.get("ExitCode"), a.get("HoldReason"))
            for k, a in ads.items()
        }
        assert len(ads) == 3 and all(s[:2] == (DONE, 5) for s in states.values()), states
        assert all((d / f"out.{p}").read_text() == DATA for p in range(3))
        assert 12 not in user_log_events(d / "drop.log")  # never held
        after = remote.condor.gahp_lines("<- 'BLAH_JOB_STATUS ")
        new_gahps = {line.split("GAHP[", 1)[1].split("]", 1)[0] for line in after} - old_gahps
        assert new_gahps, "no new remote blahpd answered after the connections were killed"
        print(
            f"SSH drop: killed {len(killed)} sshd connections; remote blahpd restarted as "
            f"GAHP {sorted(new_gahps)}; jobs {states}"
        )
    finally:
        remote.condor.remove([cluster])
