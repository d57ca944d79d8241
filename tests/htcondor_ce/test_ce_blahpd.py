"""blahpd behind the real HTCondor-CE 25.0.1, as a grid site runs it.

Jobs arrive at the CE as its users send them (``condor_ce_submit`` with a local sandbox; a
remote submission whose sandbox is spooled and retrieved with the HTCondor bindings, as
``condor_ce_trace`` does); the CE's job router turns them into ``batch slurm|pbs|lsf`` grid jobs
(routes chosen by ``+GahpLrms``), and the gridmanager hands those to our blahpd, which it runs
as the job owner: the CE is in root mode (daemons as a service user, jobs of another user).

Every scenario is submitted at once by the module fixture, so the module takes about as long
as its slowest scenario (the burst of 100); each test then waits for its own outcome.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ce_kit import CE, events, terminations, wait_until
from live_services import env_file, lsf_bin_dir

# seconds a routed job may take from condor_ce_submit to its termination event, on a busy
# machine (one took about 20 s here with the CE idle)
JOB_DEADLINE = 420.0
BURST = 100


@dataclass
class Scenario:
    name: str
    dir: Path
    cluster: int = 0

    @property
    def log(self) -> Path:
        return self.dir / "job.log"

    def output(self, name: str = "job.out") -> str:
        return (self.dir / name).read_text(errors="replace")

    def terminated(self, n: int = 1, deadline: float = JOB_DEADLINE) -> dict[str, int | None]:
        return wait_until(
            lambda: (t := terminations(self.log)) and len(t) >= n and t,
            deadline,
            f"{n} termination event(s) of the {self.name} job (cluster {self.cluster})",
            2,
        )


# ------------------------------------------------------------------------------ job scripts
REPORT = r"""#!/bin/sh
# what the batch job got: arguments, environment, stdin, identity, resources
echo "args:[$1][$2][$3]"
echo "env:[$GAHP_CE_A][$GAHP_CE_B]"
echo "stdin:[$(cat)]"
echo "user:[$(id -un)]"
echo "proxy:[$X509_USER_PROXY]"
env | grep -E '^(SLURM_(CPUS_ON_NODE|MEM_PER_NODE|JOB_PARTITION)|PBS_QUEUE)=' | sort
if [ -n "$SLURM_JOB_ID" ]; then
    scontrol show job "$SLURM_JOB_ID" | tr ' ' '\n' |
        grep -E '^(TimeLimit|Partition|Comment|NumCPUs)='
fi
if [ -n "$PBS_JOBID" ]; then
    {pbs_bin}/qstat -f "$PBS_JOBID" | grep -E 'Resource_List\.(ncpus|mem|walltime) |^ *queue ='
fi
if [ -n "$LSB_JOBID" ]; then
    {lsf_bin}/bjobs -l "$LSB_JOBID"
fi
echo "to stderr" >&2
exit 3
"""

PROXY_WAIT = r"""#!/bin/sh
# runs until the proxy it was given changes (renewed at the CE), then exits 0
echo "proxy:[$X509_USER_PROXY]"
first=$(md5sum < "$X509_USER_PROXY")
i=0
while [ $i -lt 900 ]; do
    if [ "$(md5sum < "$X509_USER_PROXY")" != "$first" ]; then
        echo "renewed after ${i}s"
        grep -c 'BEGIN CERTIFICATE' "$X509_USER_PROXY"
        exit 0
    fi
    sleep 1
    i=$((i + 1))
done
echo "never renewed"
exit 1
"""

SITE_SCRIPT = r"""#!/bin/sh
# A C-blahp-style site script (HTCondor-CE's documented hook): CERequirements arrive as shell
# variables; what this prints goes into the batch script.
if [ "$CondorCE" = 1 ] && [ -n "$GahpSiteTag" ]; then
    echo "#SBATCH --comment=$GahpSiteTag"
fi
"""

SPOOL_JOB = """#!/bin/sh
cat in1.txt in2.txt > joined.txt
echo "argv:[$1][$2] iwd:[$(pwd)]"
exit 4
"""

# a remote submission with its sandbox spooled, as condor_ce_trace makes it (the bindings of
# HTCondor 25 are htcondor2)
SPOOL_SUBMIT = """import htcondor2 as htcondor
sub = htcondor.Submit({
    "universe": "vanilla", "executable": "spool.sh", "arguments": chr(34) + "x 'y z'" + chr(34),
    "transfer_input_files": "in1.txt, in2.txt", "transfer_output_files": "joined.txt",
    "should_transfer_files": "YES", "when_to_transfer_output": "ON_EXIT",
    "output": "spool.out", "error": "spool.err",
})
schedd = htcondor.Schedd()
result = schedd.submit(sub, spool=True)
schedd.spool(result)
print("cluster", result.cluster())
"""
RETRIEVE = """import htcondor2 as htcondor
htcondor.Schedd().retrieve("ClusterId == CLUSTER")
"""

QUEUES = {"slurm": "debug", "pbs": "workq", "lsf": "normal"}


def sandbox_submit(lrms: str) -> str:
    return f"""universe = vanilla
executable = report.sh
arguments = "one 'two three' f""our"
environment = "GAHP_CE_A=alpha 'GAHP_CE_B=b c'"
input = in.txt
output = job.out
error = job.err
log = job.log
+GahpLrms = "{lrms}"
+xcount = 2
+maxMemory = 300
+maxWallTime = 7
+queue = "{QUEUES[lrms]}"
queue
"""


def proxy_pem(ce: CE, d: Path, name: str, cn: str, days: int) -> Path:
    """A self-signed certificate and its key in one file, the job owner's, mode 0600."""
    pem = d / name
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            str(days),
            "-subj",
            f"/O=gahp/CN={cn}",
            "-keyout",
            f"{pem}.key",
            "-out",
            f"{pem}.crt",
        ],
        check=True,
        capture_output=True,
    )
    text = Path(f"{pem}.crt").read_text() + Path(f"{pem}.key").read_text()
    os.unlink(f"{pem}.crt")
    os.unlink(f"{pem}.key")
    return ce.write(d, name, text, 0o600)


def squeue_ids(slurm_env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i"], env=slurm_env, capture_output=True, text=True, timeout=30
    ).stdout
    return set(out.split())


def native(grid_job_id: str) -> str:
    """``batch slurm <ce id> slurm/20261124/2533`` -> ``2533``."""
    return grid_job_id.split()[-1].rsplit("/", 1)[-1]


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def ce() -> CE:
    return CE.find()


@pytest.fixture(scope="module")
def scenarios(ce: CE, batch_env) -> Iterator[dict[str, Scenario]]:  # noqa: ANN001
    batch_env("slurm")
    pbs_bin = env_file(Path(os.environ.get("GAHP_PBS_DIR", "/tmp/gahp-pbs")) / "env").get(
        "GAHP_PBS_BIN_DIR", "/opt/pbs/bin"
    )
    lsf_envdir = env_file(Path(os.environ.get("GAHP_LSF_DIR", "/tmp/gahp-lsf")) / "env").get(
        "LSF_ENVDIR", ""
    )
    lsf_bin = (lsf_bin_dir(lsf_envdir) if lsf_envdir else None) or "/nonexistent"
    report = REPORT.replace("{pbs_bin}", pbs_bin).replace("{lsf_bin}", lsf_bin)
    lrms = ["slurm"] + [
        x for x, route in (("pbs", "PBS_Cluster"), ("lsf", "LSF_Cluster")) if route in ce.routes
    ]
    for x in lrms[1:]:
        batch_env(x)
    site_script = ce.site_scripts / "slurm_local_submit_attributes.sh"
    site_script.write_text(SITE_SCRIPT)
    site_script.chmod(0o755)
    made: dict[str, Scenario] = {}
    try:
        for x in lrms:  # a local sandbox, the CE's job attributes, exit code 3
            s = made[f"sandbox-{x}"] = Scenario(f"sandbox-{x}", ce.job_dir(f"sandbox-{x}"))
            ce.write(s.dir, "report.sh", report, 0o755)
            ce.write(s.dir, "in.txt", "line from stdin\n")
            s.cluster = ce.submit(s.dir, sandbox_submit(x))

        s = made["site"] = Scenario("site", ce.job_dir("site"))  # CERequirements -> site script
        ce.write(s.dir, "report.sh", report, 0o755)
        ce.write(s.dir, "in.txt", "")
        s.cluster = ce.submit(
            s.dir,
            """universe = vanilla
    executable = report.sh
    input = in.txt
    output = job.out
    error = job.err
    log = job.log
    +default_CERequirements = "GahpSiteTag"
    +GahpSiteTag = "route-tag-7"
    queue
    """,
        )

        s = made["proxy"] = Scenario("proxy", ce.job_dir("proxy"))  # x509 proxy, renewed
        proxy_pem(ce, s.dir, "proxy.pem", "gahp-ce-first", 2)
        ce.write(s.dir, "wait.sh", PROXY_WAIT, 0o755)
        s.cluster = ce.submit(
            s.dir,
            """universe = vanilla
    executable = wait.sh
    x509userproxy = proxy.pem
    output = job.out
    error = job.err
    log = job.log
    queue
    """,
        )

        s = made["control"] = Scenario("control", ce.job_dir("control"))  # hold, release, rm
        s.cluster = ce.submit(
            s.dir,
            """universe = vanilla
    executable = /bin/sleep
    arguments = 600
    output = job.out
    error = job.err
    log = job.log
    queue
    """,
        )

        s = made["burst"] = Scenario("burst", ce.job_dir("burst"))
        ce.write(s.dir, "n.sh", '#!/bin/sh\necho "job $1"\n', 0o755)
        s.cluster = ce.submit(
            s.dir,
            f"""universe = vanilla
    executable = n.sh
    arguments = $(Process)
    output = out.$(Process)
    error = err.$(Process)
    log = job.log
    queue {BURST}
    """,
        )

        s = made["spool"] = Scenario("spool", ce.job_dir("spool"))  # remote submit, spooled sandbox
        ce.write(
            s.dir,
            "spool.sh",
            SPOOL_JOB,
            0o755,
        )
        ce.write(s.dir, "in1.txt", "first input\n")
        ce.write(s.dir, "in2.txt", "second input\n")
        out = ce.python(
            SPOOL_SUBMIT,
            s.dir,
        ).stdout
        m = re.search(r"cluster (\d+)", out)
        assert m, out
        s.cluster = int(m[1])
        yield made
    finally:
        for sc in made.values():  # nothing of these jobs outlives the module
            ce.run(["condor_ce_rm", str(sc.cluster)], check=False)
        site_script.unlink(missing_ok=True)


# ------------------------------------------------------------------------------ the tests
# the scenarios a test acts on while they run come first; the others are only read
def test_proxy_renewal_reaches_the_running_job(ce: CE, scenarios: dict[str, Scenario]) -> None:
    s = scenarios["proxy"]
    wait_until(
        lambda: any(status == "2" for _, status, _ in ce.routed(s.cluster)),
        JOB_DEADLINE,
        "the proxy job to run",
        2,
    )
    wait_until(
        lambda: (s.dir / "job.out").exists() and "proxy:[" in s.output(),
        60,
        "the proxy job's first line",
    )
    proxy = s.output().split("proxy:[", 1)[1].split("]", 1)[0]
    assert proxy, "X509_USER_PROXY is set in the batch job"
    renewed = proxy_pem(ce, s.dir, "proxy.new", "gahp-ce-renewed", 5)
    os.replace(renewed, s.dir / "proxy.pem")
    assert s.terminated() == {f"{s.cluster}.0": 0}, s.output()
    assert "renewed after" in s.output()
    refresh = ce.gridmanager_lines(r"BLAH_JOB_REFRESH_PROXY")
    assert refresh, "the gridmanager sent BLAH_JOB_REFRESH_PROXY"


def test_hold_release_and_remove_reach_the_batch_system(
    ce: CE, scenarios: dict[str, Scenario], slurm_env: dict[str, str]
) -> None:
    s = scenarios["control"]

    def in_slurm() -> str | None:
        for grid_id, _status, _resource in ce.routed(s.cluster):
            if grid_id not in ("", "undefined"):
                n = native(grid_id)
                return n if n in squeue_ids(slurm_env) else None
        return None

    first = wait_until(in_slurm, JOB_DEADLINE, "the job to be queued in Slurm", 2)
    ce.run(["condor_ce_hold", str(s.cluster)])
    wait_until(
        lambda: first not in squeue_ids(slurm_env),
        120,
        f"Slurm job {first} to be cancelled by the hold",
        2,
    )
    assert ce.ads(f"ClusterId == {s.cluster}", ["JobStatus"]) == [["5"]]
    ce.run(["condor_ce_release", str(s.cluster)])
    second = wait_until(
        lambda: (n := in_slurm()) and n != first and n,
        JOB_DEADLINE,
        "the released job to be queued in Slurm again",
        2,
    )
    ce.run(["condor_ce_rm", str(s.cluster)])
    wait_until(
        lambda: second not in squeue_ids(slurm_env),
        120,
        f"Slurm job {second} to be cancelled by condor_ce_rm",
        2,
    )
    wait_until(
        lambda: not ce.ads(f"ClusterId == {s.cluster}", ["JobStatus"]),
        120,
        "the removed job to leave the CE's queue",
        2,
    )
    # the user log of a CE job has the release (013) and the abort (009); the hold was seen
    # in the queue above (the CE writes no 012 for it)
    assert events(s.log, 13) == 1 and events(s.log, 9) == 1
    assert terminations(s.log) == {}


@pytest.mark.parametrize("lrms", ["slurm", "pbs", "lsf"])
def test_local_sandbox_and_ce_job_attributes_reach_the_batch_job(
    ce: CE, scenarios: dict[str, Scenario], lrms: str
) -> None:
    s = scenarios.get(f"sandbox-{lrms}")
    if s is None:
        pytest.skip(f"the CE has no {lrms} route (start .ci/{lrms}-up.sh before the CE)")
    assert s.terminated() == {f"{s.cluster}.0": 3}
    out = s.output()
    assert 'args:[one][two three][f"our]' in out
    assert "env:[alpha][b c]" in out
    assert "stdin:[line from stdin]" in out
    assert f"user:[{ce.user}]" in out
    assert s.output("job.err") == "to stderr\n"
    if lrms == "slurm":  # xcount, maxMemory (MB), maxWallTime (min), queue
        assert "SLURM_CPUS_ON_NODE=2" in out and "NumCPUs=2" in out, out
        assert "SLURM_MEM_PER_NODE=300" in out, out
        assert "TimeLimit=00:07:00" in out, out
        assert "Partition=debug" in out, out
    elif lrms == "pbs":
        assert re.search(r"Resource_List\.ncpus = 2\b", out), out
        assert re.search(r"Resource_List\.mem = 300mb\b", out), out
        assert re.search(r"Resource_List\.walltime = 00:07:00\b", out), out
        assert re.search(r"queue = workq\b", out), out
    else:
        flat = " ".join(out.split())  # bjobs -l folds its lines
        assert "Queue <normal>" in flat, out
        assert re.search(r"\b2 (Processors|Task\(s\)) Requested", flat), out
        assert re.search(r"RUNLIMIT 7\.0 min", flat), out


def test_site_script_turns_ce_requirements_into_batch_directives(
    ce: CE, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["site"]
    assert s.terminated() == {f"{s.cluster}.0": 3}
    out = s.output()
    assert "Comment=route-tag-7" in out, out
    # the gridmanager sent the CE's requirement expression; the site script saw it
    submits = ce.gridmanager_lines(r"BLAH_JOB_SUBMIT.*GahpSiteTag")
    assert submits and "CondorCE == 1" in submits[-1].replace("\\ ", " "), submits[-1:]


def _show_config(text: str) -> dict[str, tuple[str, str]]:
    """``blahpd --show-config`` as {setting: (value, where it came from)}."""
    shown: dict[str, tuple[str, str]] = {}
    lines = text.splitlines()
    for line, at in zip(lines, lines[1:], strict=False):
        if " = " in line and at.startswith(" # at: "):
            name, value = line.split(" = ", 1)
            shown[name] = (value, at.removeprefix(" # at: "))
    return shown


def test_blahpd_runs_from_the_sites_blah_config_without_a_toml(
    ce: CE, scenarios: dict[str, Scenario]
) -> None:
    """The CE's blahpd runs as a site that moved from the C blahp has it: the CE's
    BLAHPD_LOCATION reaches blahpd (from the gridmanager), which reads
    $BLAHPD_LOCATION/etc/blah.config and blah.config.d/, with no blahpd.toml and no warning;
    every setting comes from there, and the site script (the site scenario's) is found in
    blah_libexec_directory."""
    conf = ce.blah_config
    location = conf.parent.parent
    assert ce.run(["condor_ce_config_val", "BLAHPD_LOCATION"]).stdout.strip() == str(location)
    assert not (location / "etc" / "blahpd.toml").exists()
    wrapper = ce.wrapper.read_text()
    assert "--config" not in wrapper and "BLAHPD_CONFIG" not in wrapper, wrapper
    read = f"{conf}, {conf}.d/50-ci"

    # the blahpd the gridmanager ran for the owner's jobs read the site's files, and only them
    s = scenarios["site"]
    s.terminated()
    log = (ce.blah_log_dir / f"BlahpdLog.{ce.user}").read_text(errors="replace").splitlines()
    reads = {ln.split("configuration files read: ", 1)[1] for ln in log if "files read: " in ln}
    assert reads == {read}, reads
    assert not [ln for ln in log if "blah.config: " in ln], "no blah.config warning"

    # what it runs with, as the owner sees it with the CE's BLAHPD_LOCATION
    proc = ce.run(["env", f"BLAHPD_LOCATION={location}", f"{ce.venv}/bin/blahpd", "--show-config"])
    out = proc.stdout
    assert out.splitlines()[0] == f"# configuration files read: {read}", out
    assert "# WARNING" not in out and "TOML" not in out, out
    shown = _show_config(out)
    origins = {where for _, where in shown.values() if where != "<default>"}
    assert origins and all(w.startswith(f"{conf}") for w in origins), origins
    expected = {
        "driver.slurm.bin_dir": (conf, "slurm_binpath="),
        "driver.slurm.slurm_conf": (conf, "export SLURM_CONF="),
        "site script directories (in order)": (conf, "blah_libexec_directory="),
    }
    if "PBS_Cluster" in ce.routes:
        expected["driver.pbs.bin_dir"] = (conf, "pbs_binpath=")
        expected["driver.pbs.flavor"] = (conf, "pbs_pro=yes")
    if "LSF_Cluster" in ce.routes:
        expected["driver.lsf.lsf_envdir"] = (Path(f"{conf}.d/50-ci"), "lsf_confpath=")
    for name, (file, line) in expected.items():
        where = shown[name][1]
        assert where.startswith(f"{file}, line ") and f": {line}" in where, (name, where)
    assert str(ce.site_scripts) in shown["site script directories (in order)"][0]
    site_script = ce.site_scripts / "slurm_local_submit_attributes.sh"
    assert f"site script for slurm = {site_script}" in out.splitlines(), out


def test_spooled_remote_submission_round_trip(ce: CE, scenarios: dict[str, Scenario]) -> None:
    s = scenarios["spool"]
    wait_until(
        lambda: ce.ads(f"ClusterId == {s.cluster}", ["JobStatus"]) == [["4"]],
        JOB_DEADLINE,
        f"the spooled job {s.cluster} to complete",
        2,
    )
    ce.python(
        RETRIEVE.replace("CLUSTER", str(s.cluster)),
        s.dir,
    )
    assert (s.dir / "joined.txt").read_text() == "first input\nsecond input\n"
    out = s.output("spool.out")
    assert "argv:[x][y z]" in out, out
    assert "/spool/" in out, out  # it ran in the CE's spooled sandbox
    (code,) = ce.ads(f"ClusterId == {s.cluster}", ["ExitCode"])
    assert code == ["4"]


def test_burst_of_100_completes_without_a_hold(ce: CE, scenarios: dict[str, Scenario]) -> None:
    s = scenarios["burst"]
    done = s.terminated(BURST, deadline=900)
    assert sorted(done) == sorted(f"{s.cluster}.{i}" for i in range(BURST))
    assert set(done.values()) == {0}
    assert events(s.log, 12) == 0
    assert (s.dir / "out.57").read_text() == "job 57\n"


def test_root_mode_daemons_and_jobs_belong_to_their_users(
    ce: CE, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["sandbox-slurm"]
    s.terminated()
    assert f"user:[{ce.user}]" in s.output()
    schedd_users = subprocess.run(
        ["ps", "-C", "condor_schedd", "-o", "euser="], capture_output=True, text=True
    ).stdout.split()
    assert ce.daemon_user in schedd_users, schedd_users
    blah_log = ce.blah_log_dir / f"BlahpdLog.{ce.user}"
    assert blah_log.stat().st_uid == int(
        subprocess.run(["id", "-u", ce.user], capture_output=True, text=True).stdout
    )
