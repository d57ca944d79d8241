"""blahpd spawned as a subprocess, driving real batch systems (fork always; Slurm, Grid
Engine, OpenPBS and LSF when up)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from blah_helpers import BLAHPD, Blah, ad_string
from live_services import POOL_PYTHON, pool_job_dir

from gahp_core import split
from gahp_core.testing import GahpClient, GahpConformance

PROGRAM = r"""
import json, os, sys, time
data = {"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": sys.stdin.read(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("BT_")}}
print(json.dumps(data))
print("to stderr", file=sys.stderr)
time.sleep(float(os.environ.get("BT_SLEEP", "0")))
sys.exit(int(os.environ.get("BT_EXIT", "0")))
"""


class TestBlahpdConformance(GahpConformance):
    server_command = BLAHPD
    async_probe = "BLAH_PING {reqid} fork"
    probe_result_fields = 2  # 0 No\ error


def v2(args: list[str]) -> str:
    return " ".join("'" + a.replace("'", "''") + "'" for a in args)


@pytest.fixture(params=["fork", "slurm", "pbs", "sge", "condor"])
def lrms(request, batch_env) -> str:
    """The gridtypes run here, as root (pbs: the real OpenPBS; LSF refuses root's jobs:
    blahpd on LSF is tested under HTCondor, as its unprivileged owner; condor: the
    one-machine pool, whose jobs run as its owner)."""
    batch_env(request.param)
    return request.param


@pytest.fixture
def job_dir(request, tmp_path) -> Iterator[Path]:
    """Where a job's files go: ``tmp_path``, or for condor a directory of the pool's owner
    (its jobs run as that user)."""
    if "lrms" not in request.fixturenames or request.getfixturevalue("lrms") != "condor":
        yield tmp_path
        return
    path = pool_job_dir(request.getfixturevalue("htcondor_pool_env"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def program(request, job_dir) -> Path:
    condor = "lrms" in request.fixturenames and request.getfixturevalue("lrms") == "condor"
    path = job_dir / "report prog.py"
    path.write_text(f"#!{POOL_PYTHON if condor else sys.executable}\n{PROGRAM}")
    path.chmod(0o755)
    return path


@pytest.fixture
def blah(tmp_path, slurm_env, sge_env, pbs_env, lsf_env, htcondor_pool_env):
    env = {**os.environ, **(slurm_env or {}), **(sge_env or {})}  # SGE_ROOT & co. for sge
    config = ""
    if pbs_env is not None:  # the real OpenPBS, not Slurm's qsub that PATH may hold
        config += f'[driver.pbs]\nbin_dir = "{pbs_env["GAHP_PBS_BIN_DIR"]}"\n'
        env["PBS_CONF_FILE"] = pbs_env["PBS_CONF_FILE"]
    if lsf_env is not None:
        config += f'[driver.lsf]\nlsf_envdir = "{lsf_env["LSF_ENVDIR"]}"\n'
    if htcondor_pool_env is not None:
        config += f'[driver.condor]\ncondor_config = "{htcondor_pool_env["CONDOR_CONFIG"]}"\n'
        config += "status_interval = 1\n"  # not 5 s: the tests poll every 0.2 s
    (tmp_path / "blahpd.toml").write_text(config)
    env["BLAHPD_CONFIG"] = str(tmp_path / "blahpd.toml")
    with Blah("--state-dir", tmp_path / "state", env=env) as b:
        yield b


def test_job_life_with_tricky_arguments(blah, lrms, program, job_dir):
    work = job_dir / "work dir"
    work.mkdir()
    os.chown(work, job_dir.stat().st_uid, job_dir.stat().st_gid)  # the pool's owner's
    (work / "stdin.txt").write_text("from stdin\n")
    args = ["two words", "it's", 'say "hi"', "$(touch pwned)", "a;b", ""]
    res = blah.submit(
        Cmd=str(program),
        Arguments=v2(args),
        Iwd=str(work),
        In="stdin.txt",
        Out="out.txt",
        Err=str(job_dir / "err.txt"),
        Environment=v2(["BT_X=x y", "BT_EXIT=7", "BT_SLEEP=1"]),
        gridtype=lrms,
    )
    assert len(res) == 3 and res[0] == "0", res
    jobid = res[2]
    assert jobid.startswith(f"{lrms}/") and " " not in jobid
    seen = set()
    deadline = time.monotonic() + 90
    while True:
        st, ad = blah.status(jobid)
        seen.add(st)
        if st == 4:
            break
        assert st in (1, 2) and time.monotonic() < deadline, (st, ad)
        time.sleep(0.2)
    assert 2 in seen or lrms != "fork"  # a 1 s batch job may be missed between two polls
    assert ad["ExitCode"] == 7 and ad["JobStatus"] == 4 and ad["BatchJobId"]
    report = json.loads((work / "out.txt").read_text())
    assert report["argv"] == args
    assert report["cwd"] == str(work)
    assert report["stdin"] == "from stdin\n"
    assert report["env"]["BT_X"] == "x y"
    assert (job_dir / "err.txt").read_text() == "to stderr\n"
    assert not (work / "pwned").exists()


def test_cancel_running_job(blah, lrms, program, job_dir):
    res = blah.submit(
        Cmd=str(program),
        Iwd=str(job_dir),
        Environment="BT_SLEEP=60",
        Out="o",
        Err="e",
        gridtype=lrms,
    )
    jobid = res[2]
    blah.wait(jobid, 2)
    assert blah.c.call("BLAH_JOB_CANCEL", jobid, timeout=60) == ["0", "No error"]
    blah.wait(jobid, 3)


def _slurm_node_cpus(env: dict[str, str] | None) -> int:
    """The CPUs Slurm gives its node (not this machine's count: slurm.conf says)."""
    proc = subprocess.run(
        ["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, timeout=30, env=env
    )
    words = proc.stdout.split()
    return int(words[0]) if words and words[0].isdigit() else os.cpu_count() or 1


def _pbs_node_cpus(env: dict[str, str]) -> int:
    """The CPUs of OpenPBS's one node."""
    proc = subprocess.run(
        [str(Path(env["GAHP_PBS_BIN_DIR"]) / "pbsnodes"), "-a", "-F", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    nodes = json.loads(proc.stdout)["nodes"]
    return int(next(iter(nodes.values()))["resources_available"]["ncpus"])


def test_hold_and_resume(blah, lrms, program, job_dir, slurm_env, pbs_env):
    blocker = None
    if lrms in ("slurm", "pbs"):
        # keep the next job pending: fill the node first (every CPU the batch system has there)
        cpus = _slurm_node_cpus(slurm_env) if lrms == "slurm" else _pbs_node_cpus(pbs_env)
        res = blah.submit(
            Cmd=str(program),
            Iwd=str(job_dir),
            Environment="BT_SLEEP=120",
            NodeNumber=cpus,
            Out="b",
            Err="be",
            gridtype=lrms,
        )
        blocker = res[2]
    try:
        _hold_and_resume(blah, lrms, program, job_dir, blocker)
    finally:  # a blocker left pending would hold the node from everyone else's jobs
        if blocker:
            blah.c.call("BLAH_JOB_CANCEL", blocker, timeout=60)


def _hold_and_resume(
    blah: Blah, lrms: str, program: Path, job_dir: Path, blocker: str | None
) -> None:
    if blocker:
        blah.wait(blocker, 2)
    res = blah.submit(
        Cmd=str(program),
        Iwd=str(job_dir),
        Environment="BT_SLEEP=2",
        Out="o",
        Err="e",
        gridtype=lrms,
    )
    jobid = res[2]
    assert blah.c.call("BLAH_JOB_HOLD", jobid, timeout=60) == ["0", "No error"]
    ad = blah.wait(jobid, 5)
    assert ad.get("HoldReason")
    assert blah.c.call("BLAH_JOB_RESUME", jobid, timeout=60) == ["0", "No error"]
    blah.wait(jobid, 1, 2, 4)
    if blocker:
        blah.c.call("BLAH_JOB_CANCEL", blocker, timeout=60)
    ad = blah.wait(jobid, 4, timeout=90)
    assert ad["ExitCode"] == 0


def test_status_survives_a_restart(blah, lrms, program, job_dir):
    res = blah.submit(
        Cmd=str(program),
        Iwd=str(job_dir),
        Environment="BT_EXIT=5 BT_SLEEP=1",
        Out="o",
        Err="e",
        gridtype=lrms,
    )
    jobid = res[2]
    blah.restart()  # kill -9 while the job runs
    ad = blah.wait(jobid, 4)
    assert ad["ExitCode"] == 5
    blah.restart()
    assert blah.status(jobid)[0] == 4


def test_error_results_have_the_right_field_counts(blah):
    c = blah.c
    res = c.call("BLAH_JOB_SUBMIT", "[ Cmd = ")
    assert len(res) == 3 and res[0] != "0" and res[2] == "N/A"
    res = c.call("BLAH_JOB_SUBMIT", ad_string(Cmd="/bin/true", gridtype="nosuchlrms"))
    assert len(res) == 3 and "nosuchlrms" in res[1] and res[2] == "N/A"
    res = c.call("BLAH_JOB_SUBMIT", ad_string(Arguments="x", gridtype="fork"))
    assert len(res) == 3 and "Cmd" in res[1]
    res = c.call("BLAH_JOB_STATUS", "not-a-job-id")
    assert len(res) == 4 and res[0] != "0" and "malformed job id" in res[1]
    for cmd in ("BLAH_JOB_CANCEL", "BLAH_JOB_HOLD", "BLAH_JOB_RESUME"):
        res = c.call(cmd, "nope/x/1")
        assert len(res) == 2 and res[0] != "0", res
    res = c.call("BLAH_PING", "nosuch")
    assert len(res) == 2 and res[0] != "0"
    assert c.call("BLAH_PING", "fork") == ["0", "No error"]
    assert c.command("BLAH_JOB_STATUS", "1")[0] == "E"  # missing job id
    assert "BLAH_JOB_SIGNAL" not in c.command("COMMANDS")


def test_escaped_classad_on_the_wire(blah, program, tmp_path):
    """The ad arrives escaped as one argument, as HTCondor sends it."""
    ad = ad_string(
        Cmd=str(program), Arguments=v2(["a b"]), Iwd=str(tmp_path), Out="o", gridtype="fork"
    )
    rid = blah.c.reqid()
    line = (
        f"BLAH_JOB_SUBMIT {rid} ".encode()
        + ad.replace("\\", "\\\\").replace(" ", "\\ ").encode()
        + b"\r\n"
    )
    blah.c.send_raw(line)
    assert split(blah.c.read_line()) == ["S"]
    res = blah.c.wait_results([rid])[rid]
    assert res[0] == "0", res
    blah.wait(res[2], 4)
    assert json.loads((tmp_path / "o").read_text())["argv"] == ["a b"]


def test_refresh_proxy_replaces_the_jobs_proxy(blah, program, tmp_path):
    proxy = tmp_path / "x509up"
    proxy.write_text("old proxy")
    res = blah.submit(
        Cmd=str(program),
        Iwd=str(tmp_path),
        Environment="BT_SLEEP=30",
        x509UserProxy=str(proxy),
        Out="o",
        gridtype="fork",
    )
    jobid = res[2]
    fresh = tmp_path / "fresh"
    fresh.write_text("new proxy")
    assert blah.c.call("BLAH_JOB_REFRESH_PROXY", jobid, str(fresh)) == ["0", "No error"]
    assert proxy.read_text() == "new proxy"
    assert oct(proxy.stat().st_mode & 0o777) == "0o600"
    res = blah.c.call("BLAH_JOB_REFRESH_PROXY", jobid, str(tmp_path / "missing"))
    assert res[0] != "0" and "missing" in res[1]
    blah.c.call("BLAH_JOB_CANCEL", jobid, timeout=60)
    blah.wait(jobid, 3)
    # A renewal that races the job's end succeeds doing nothing, as the C blahp answers: an
    # error would make the gridmanager hold the finished job (seen under HTCondor-CE).
    (tmp_path / "later").write_text("later proxy")
    res = blah.c.call("BLAH_JOB_REFRESH_PROXY", jobid, str(tmp_path / "later"))
    assert res == ["0", "No proxy to renew - job finished"]
    assert proxy.read_text() == "new proxy"


def test_drivers_allow_list(tmp_path):
    """Only the batch systems in `drivers` are accepted; the others get a clear error."""
    conf = tmp_path / "blahpd.toml"
    conf.write_text(f'state_dir = "{tmp_path / "state"}"\ndrivers = ["fork"]\n')
    with GahpClient([*BLAHPD, "--config", str(conf)]) as c:
        for gridtype in ("slurm", "sge"):
            ad = ad_string(Cmd="/bin/true", Iwd=str(tmp_path), gridtype=gridtype)
            res = c.call("BLAH_JOB_SUBMIT", ad)
            assert res[0] == "1" and res[2] == "N/A", res
            assert f"{gridtype!r} is not supported here (enabled: fork)" in res[1], res
        assert c.call("BLAH_PING", "slurm")[0] == "1"
        assert c.call("BLAH_PING", "fork") == ["0", "No error"]
        res = c.call(
            "BLAH_JOB_SUBMIT", ad_string(Cmd="/bin/true", Iwd=str(tmp_path), gridtype="fork")
        )
        assert res[0] == "0" and res[2].startswith("fork/"), res


# -- site batch directives (HTCondor-CE): CERequirements and <lrms>_local_submit_attributes.sh --
class Expr(str):
    """An unquoted ClassAd expression for ad_string."""

    def __str__(self) -> str:  # pragma: no cover - trivial
        return str.__str__(self)


def _raw_ad(**attrs: object) -> str:
    return (
        "[ "
        + "; ".join(
            f"{k} = {v}" if isinstance(v, Expr) else ad_string(**{k: v})[2:-2]
            for k, v in attrs.items()
        )
        + " ]"
    )


def _site_blah(
    tmp_path: Path, env: dict[str, str] | None, script: str, lrms: str, timeout: float = 10
) -> Blah:
    """blahpd with a C-blahp-style site script as ``<lrms>_local_submit_attributes.sh``."""
    site = tmp_path / "blahp etc"
    site.mkdir(parents=True)
    hook = site / f"{lrms}_local_submit_attributes.sh"
    hook.write_text("#!/bin/bash\n" + script)  # not executable: it is sourced, as by the C blahp
    conf = tmp_path / "blahpd.toml"
    conf.write_text(
        f'[site]\nlocal_submit_attributes_dir = "{site}"\n'
        f"local_submit_attributes_timeout = {timeout}\n"
    )
    return Blah(
        "--state-dir", tmp_path / "state", env={**(env or os.environ), "BLAHPD_CONFIG": str(conf)}
    )


def test_site_directive_reaches_slurm(batch_env, tmp_path):
    env = batch_env("slurm")
    b = _site_blah(tmp_path, env, 'echo "#SBATCH --comment=ce-$CondorCE-$Walltime_Min"\n', "slurm")
    try:
        res = b.c.call(
            "BLAH_JOB_SUBMIT",
            _raw_ad(
                Cmd="/bin/true",
                Iwd=str(tmp_path),
                gridtype="slurm",
                CERequirements=Expr("CondorCE == 1 && Walltime >= 60"),
            ),
            timeout=60,
        )
        assert res[0] == "0", res
        native = res[2].split("/")[-1]
        show = subprocess.run(
            ["scontrol", "show", "job", native], env=env, capture_output=True, text=True, timeout=30
        )
        assert "Comment=ce-1-60" in show.stdout, show.stdout
    finally:
        b.close()


def test_site_script_failure_and_hang_are_error_results(tmp_path):
    failing = _site_blah(tmp_path / "f", None, "echo 'bad site config' >&2\nexit 1\n", "fork")
    hanging = _site_blah(tmp_path / "h", None, "sleep 60\n", "fork", timeout=1)
    try:
        ad = _raw_ad(
            Cmd="/bin/true",
            Iwd=str(tmp_path),
            gridtype="fork",
            CERequirements=Expr("CondorCE == 1"),
        )
        res = failing.c.call("BLAH_JOB_SUBMIT", ad, timeout=30)
        assert len(res) == 3 and res[0] == "1" and res[2] == "N/A", res
        assert "fork_local_submit_attributes.sh failed (exit status 1): bad site config" in res[1]
        start = time.monotonic()
        res = hanging.c.call("BLAH_JOB_SUBMIT", ad, timeout=30)
        assert res[0] == "1" and "did not finish within 1 s" in res[1], res
        assert time.monotonic() - start < 10
        assert hanging.c.call("BLAH_PING", "fork") == ["0", "No error"]
    finally:
        failing.close()
        hanging.close()


def test_job_gets_x509_user_proxy(blah, tmp_path):
    (tmp_path / "x509up_u1").write_text("the proxy")
    prog = tmp_path / "show.sh"
    prog.write_text('#!/bin/sh\necho "$X509_USER_PROXY"\ncat "$X509_USER_PROXY"\n')
    prog.chmod(0o755)
    res = blah.submit(
        Cmd=str(prog), Iwd=str(tmp_path), Out="o", gridtype="fork", x509UserProxy="x509up_u1"
    )
    assert res[0] == "0", res
    blah.wait(res[2], 4)
    assert (tmp_path / "o").read_text() == f"{tmp_path}/x509up_u1\nthe proxy"


def test_site_directive_reaches_sge_and_user_lines_do_not(batch_env, program, tmp_path):
    """qsub reads only the site's "#$" lines (under a per-submission -C prefix)."""
    env = {**os.environ, **(batch_env("sge") or {})}
    b = _site_blah(tmp_path, env, 'echo "#$ -v BT_SITE=ce$CondorCE"\n', "sge")
    try:
        res = b.c.call(
            "BLAH_JOB_SUBMIT",
            _raw_ad(
                Cmd=str(program),
                Arguments=v2(["x\n#$ -v BT_EVIL=1"]),
                Iwd=str(tmp_path),
                Out="o",
                gridtype="sge",
                CERequirements=Expr("CondorCE == 1"),
            ),
            timeout=60,
        )
        assert res[0] == "0", res
        b.wait(res[2], 4, timeout=90)
        out = json.loads((tmp_path / "o").read_text())
        assert out["env"].get("BT_SITE") == "ce1" and "BT_EVIL" not in out["env"], out
    finally:
        b.close()


@pytest.mark.parametrize("gridtype", ["fork", "slurm"])
def test_jobs_do_not_inherit_htcondors_process_tracking(tmp_path, slurm_env, batch_env, gridtype):
    """The gridmanager's environment has HTCondor's ``_CONDOR_ANCESTOR_<pid>`` markers; a
    batch job that inherits them (sbatch exports the submitter's environment) is killed by
    HTCondor's procd when the schedd restarts on the same host. The job keeps the rest."""
    batch_env(gridtype)
    env = {
        **os.environ,
        **(slurm_env or {}),
        "_CONDOR_ANCESTOR_4242": "4242:1700000000:1",
        "BT_INHERITED": "kept",
    }
    (tmp_path / "blahpd.toml").write_text("")
    env["BLAHPD_CONFIG"] = str(tmp_path / "blahpd.toml")
    with Blah("--state-dir", tmp_path / "state", env=env) as b:
        res = b.submit(Cmd="/usr/bin/env", Iwd=str(tmp_path), Out="env.txt", gridtype=gridtype)
        assert res[0] == "0", res
        b.wait(res[2], 4)
    seen = (tmp_path / "env.txt").read_text().splitlines()
    assert "BT_INHERITED=kept" in seen
    assert not [line for line in seen if line.startswith("_CONDOR_ANCESTOR_")], seen
