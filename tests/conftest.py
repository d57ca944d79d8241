"""Fixtures shared across packages: the live Slurm, when one is reachable."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from live_services import BatchLock, env_file, lsf_bin_dir, unavailable


def slurm_conf_path() -> str | None:
    """$SLURM_CONF, else the file `.ci/slurm-up.sh` writes, else Slurm's default."""
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    candidate = Path(os.environ.get("GAHP_SLURM_DIR", "/tmp/gahp-slurm")) / "slurm.conf"
    return str(candidate) if candidate.exists() else None


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str] | None:
    """Environment for processes that talk to the live Slurm, or None when it is down."""
    if shutil.which("sinfo") is None:
        return None
    env = dict(os.environ)
    conf = slurm_conf_path()
    if conf:
        env["SLURM_CONF"] = conf
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return env


# ---------------------------------------------------------------------- Grid Engine
SGE_VARS = ("SGE_ROOT", "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT", "SGE_ARCH")


def sge_settings() -> dict[str, str]:
    """SGE_ROOT & co.: the environment's when $SGE_ROOT is set, else those in the file
    `.ci/sge-up.sh` writes ($GAHP_SGE_DIR/env, default /tmp/gahp-sge/env).  PATH is never
    changed: SGE's qsub must not hide Slurm's PBS qsub from the pbs tests."""
    if os.environ.get("SGE_ROOT"):
        return {k: os.environ[k] for k in SGE_VARS if os.environ.get(k)}
    path = Path(os.environ.get("GAHP_SGE_DIR", "/tmp/gahp-sge")) / "env"
    return {k: v for k, v in env_file(path).items() if k in SGE_VARS}


@pytest.fixture(scope="session")
def sge_env() -> dict[str, str] | None:
    """Environment for processes that talk to the live Grid Engine (os.environ plus SGE_ROOT,
    SGE_CELL, SGE_QMASTER_PORT), or None when it is not up."""
    settings = sge_settings()
    if not settings.get("SGE_ROOT"):
        return None
    qstat = sorted(Path(settings["SGE_ROOT"], "bin").glob("*/qstat"))
    if not qstat:
        return None
    env = {**os.environ, **settings}
    try:
        proc = subprocess.run(
            [str(qstat[0]), "-g", "c"], env=env, capture_output=True, text=True, timeout=10
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    if proc.returncode != 0:
        return None
    return env


# ---------------------------------------------------------------------- OpenPBS
@pytest.fixture(scope="session")
def pbs_env() -> dict[str, str] | None:
    """Environment for processes that talk to the real OpenPBS (PBS_CONF_FILE, and
    GAHP_PBS_BIN_DIR: where its commands are), from the file `.ci/pbs-up.sh` writes
    ($GAHP_PBS_DIR/env, default /tmp/gahp-pbs/env), or None when PBS does not answer."""
    settings = env_file(Path(os.environ.get("GAHP_PBS_DIR", "/tmp/gahp-pbs")) / "env")
    bin_dir = settings.get("GAHP_PBS_BIN_DIR")
    if not bin_dir:
        return None
    env = {**os.environ, **settings}
    try:
        proc = subprocess.run(
            [str(Path(bin_dir) / "qstat"), "-B"],
            env=env,
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    return env if proc.returncode == 0 else None


# ---------------------------------------------------------------------- LSF
@pytest.fixture(scope="session")
def lsf_env() -> dict[str, str] | None:
    """Environment for processes that talk to the live LSF (LSF_ENVDIR), from $LSF_ENVDIR or
    the file `.ci/lsf-up.sh` writes ($GAHP_LSF_DIR/env, default /tmp/gahp-lsf/env), or None
    when it does not answer."""
    envdir = os.environ.get("LSF_ENVDIR") or env_file(
        Path(os.environ.get("GAHP_LSF_DIR", "/tmp/gahp-lsf")) / "env"
    ).get("LSF_ENVDIR")
    bin_dir = lsf_bin_dir(envdir) if envdir else None
    if not envdir or not bin_dir:
        return None
    env = {**os.environ, "LSF_ENVDIR": envdir}
    try:
        proc = subprocess.run(
            [str(Path(bin_dir) / "bqueues")], env=env, capture_output=True, text=True, timeout=15
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    return env if proc.returncode == 0 else None


# ---------------------------------------------------------------------- the HTCondor pool
def htcondor_pool_settings() -> dict[str, str]:
    """What `.ci/htcondor-pool-up.sh` wrote ($GAHP_HTCONDOR_POOL_DIR/env, default
    /tmp/gahp-htcondor-pool/env): CONDOR_CONFIG, GAHP_HTCONDOR_POOL_USER, ..._COLLECTOR..."""
    path = Path(os.environ.get("GAHP_HTCONDOR_POOL_DIR", "/tmp/gahp-htcondor-pool")) / "env"
    return env_file(path)


@pytest.fixture(scope="session")
def htcondor_pool_env() -> dict[str, str] | None:
    """Environment for processes that talk to the one-machine HTCondor pool (os.environ plus
    its CONDOR_CONFIG and the GAHP_HTCONDOR_POOL_* settings), or None when its schedd is not
    in its collector."""
    settings = htcondor_pool_settings()
    conf, bin_dir = settings.get("CONDOR_CONFIG"), settings.get("GAHP_HTCONDOR_POOL_BIN")
    if not conf or not bin_dir:
        return None
    env = {**os.environ, **{k: v for k, v in settings.items() if k != "PATH"}}
    try:
        proc = subprocess.run(
            [str(Path(bin_dir) / "condor_status"), "-schedd", "-af", "Name"],
            env=env,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    return env if proc.returncode == 0 and proc.stdout.strip() else None


# ---------------------------------------------------------------------- any of them
_BATCH = {
    "slurm": ("Slurm", "bash .ci/slurm-up.sh", "GAHP_REQUIRE_SLURM"),
    "sge": ("Grid Engine", "bash .ci/sge-up.sh", "GAHP_REQUIRE_SGE"),
    "pbs": ("OpenPBS", "bash .ci/pbs-up.sh", "GAHP_REQUIRE_PBS"),
    "lsf": ("LSF", "bash .ci/lsf-up.sh", "GAHP_REQUIRE_LSF"),
    "condor": ("the HTCondor pool", "bash .ci/htcondor-pool-up.sh", "GAHP_REQUIRE_HTCONDOR_POOL"),
}


@pytest.fixture(scope="session")
def batch_env(slurm_env, sge_env, pbs_env, lsf_env, htcondor_pool_env):
    """``need(system)``: the environment for a live batch system ("slurm", "sge", "pbs": the
    real OpenPBS, "lsf", "condor": the HTCondor pool; any case), None for one that needs no
    daemon (fork). Skips when it is down, or fails when its GAHP_REQUIRE_* variable is 1
    (CI)."""
    envs = {
        "slurm": slurm_env,
        "sge": sge_env,
        "pbs": pbs_env,
        "lsf": lsf_env,
        "condor": htcondor_pool_env,
    }

    def need(system: str) -> dict[str, str] | None:
        key = system.lower()
        if key not in _BATCH:
            return None
        env = envs[key]
        if env is None:
            name, start, require = _BATCH[key]
            unavailable(require, f"{name} is not reachable (start it with `{start}`)")
        return env

    return need


# -- running in parallel (pytest-xdist, `-n 3 --dist loadgroup` in pyproject.toml) --------------
# Most of the suite's time is spent waiting for real services, so three workers run it (more
# than the two cores of CI: they wait, they seldom compute; the suite passes beside a CPU hog,
# and so it does beside itself). A worker
# takes a whole group: each module is a group of its own (its module fixtures run once), except
# the HTCondor modules, which share the personal HTCondors (and reconfigure them, and kill their
# GAHPs) and form one group (HTCondor-CE's, on a CE of their own, another), and the real BOINC
# server's, whose fault tests stop Apache and MariaDB under it. The batch systems are shared
# through a file lock (see BatchLock): a module that uses them holds it shared while its tests
# run, so the workers use them at once, and the outage tests (marked ``batch_outage``: they
# stop slurmctld, sge_qmaster, pbs_server, mbatchd) hold it exclusive. The lock is per user and
# per machine, so concurrent runs of the suite by one user (several checkouts) never see each
# other's outages either.
BATCH_FIXTURES = frozenset(
    {
        "slurm_env",
        "sge_env",
        "pbs_env",
        "lsf_env",
        "batch_env",
        "slurm_config",
        "sge_config",
        "openpbs_config",
        "lsf_config",
        "htcondor_pool_env",
        "condor_config",
    }
)
HTCONDOR_DIRS = ("tests/htcondor/", "tests/htcondor_ce/")


def uses_batch_systems(module: str, fixtures: set[str]) -> bool:
    """Whether a test module talks to the live batch systems."""
    return (
        module.startswith(HTCONDOR_DIRS)
        or module.endswith("_live.py")
        or bool(fixtures & BATCH_FIXTURES)
    )


def service_group(module: str, fixtures: set[str]) -> str:
    """The xdist group of a test module, from its path and the fixtures its tests use."""
    if module.startswith("tests/boinc_real/") or module.endswith("test_htcondor_real_boinc.py"):
        return "real-boinc-server"
    if module.startswith("tests/htcondor_ce/"):
        return "htcondor-ce"  # its own HTCondor-CE: beside the personal HTCondors' group
    if module.startswith(HTCONDOR_DIRS):
        return "htcondor"
    return module


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "batch_outage: stops a batch system's server; has the batch systems to itself"
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    for module, its in modules.items():
        used = set().union(*(getattr(item, "fixturenames", ()) for item in its))
        group = service_group(module, used)
        batch = uses_batch_systems(module, used)
        for item in its:
            item.add_marker(pytest.mark.xdist_group(_split_by_system(group, item)))
            item.stash[BATCH_USER] = batch


def _split_by_system(group: str, item: pytest.Item) -> str:
    """A scenario written once for every batch system (``case`` parameter, see
    gahp_lrms/test_scenarios_live.py) runs in one group per system, as a module per system did."""
    callspec = getattr(item, "callspec", None)
    system = callspec.params.get("case") if callspec is not None else None
    return f"{group}[{system}]" if isinstance(system, str) else group


BATCH_USER = pytest.StashKey[bool]()
BATCH_LOCK = BatchLock()


def _lock_mode(item: pytest.Item | None) -> int | None:
    """How a test holds the batch-systems lock: LOCK_EX, LOCK_SH, or None (not at all)."""
    if item is None or not item.stash.get(BATCH_USER, False):
        return None
    return fcntl.LOCK_EX if item.get_closest_marker("batch_outage") else fcntl.LOCK_SH


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Hold the batch-systems lock over a test's setup, call and teardown, and on to the next
    test of the same module when it needs the same mode (its module fixtures, a blahpd say,
    live between the two: no outage may fall between them)."""
    mode = _lock_mode(item)
    if mode is not None:
        BATCH_LOCK.hold(mode)
    yield
    same_module = (
        nextitem is not None and nextitem.path == item.path and _lock_mode(nextitem) == mode
    )
    if not same_module:
        BATCH_LOCK.release()
