"""Shared fixtures for the job-driver tests.

The live Grid Engine tests need ``bash .ci/sge-up.sh`` (see ``sge_config``).
The live LSF tests need a reachable LSF (``bash .ci/lsf-up.sh`` starts volclava; see
``lsf_config``).
The live Slurm/PBS tests need a reachable Slurm (start one with ``bash .ci/slurm-up.sh``).
Its configuration is found through ``$SLURM_CONF``, else ``$GAHP_SLURM_DIR/slurm.conf`` (default
``/tmp/gahp-slurm/slurm.conf``, as written by that script), else Slurm's own default.  When
``sinfo`` fails the live tests are skipped, unless ``GAHP_REQUIRE_SLURM=1`` (CI), which makes
them fail instead.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from live_services import LSF_USER, lsf_job_user, pool_job_dir, unavailable

from gahp_core.testing import wait_for
from gahp_lrms import Driver, JobInfo, JobSpec, JobStatus, get_driver
from gahp_lrms.boinc import BoincDriver
from gahp_lrms.lsf import parse_lsf_conf


class SyncDriver:
    """A driver's asynchronous API called from a test's plain code: each request runs to its
    end on an event loop of the facade's own; any other attribute is the driver's (for an
    adapted blocking driver, the blocking driver's: its helpers, its ``bulk_status``)."""

    REQUESTS = frozenset(
        {"submit", "submit_many", "status", "cancel", "hold", "resume", "ping", "forget"}
        | {"reported", "limit_status_interval", "aclose"}
    )

    def __init__(self, driver: Driver) -> None:
        loop = asyncio.new_event_loop()
        object.__setattr__(self, "driver", driver)
        object.__setattr__(self, "loop", loop)
        weakref.finalize(self, loop.close)

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the facade's loop (the one its driver's requests run on), then
        wait until the status journal has what it changed (a next driver reads it)."""
        result = self.loop.run_until_complete(coro)
        statuses = getattr(self.driver, "statuses", None)
        if statuses is not None:
            self.loop.run_until_complete(statuses.flush())
        return result

    def _target(self, name: str) -> object:
        blocking = getattr(self.driver, "blocking", None)
        return blocking if blocking is not None and hasattr(blocking, name) else self.driver

    def __getattr__(self, name: str) -> Any:
        if name in self.REQUESTS:
            method = getattr(self.driver, name)
            return lambda *args: self.run(method(*args))
        if hasattr(self.driver, name):
            return getattr(self.driver, name)
        return getattr(self._target(name), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.REQUESTS:  # a test's wrapper of a request: the facade's own
            object.__setattr__(self, name, value)
        else:  # a test's patch of a helper: the driver's
            setattr(self._target(name), name, value)


def sync_driver(name: str, config: Mapping[str, Any] | None, state_dir: Path) -> Any:
    """:func:`~gahp_lrms.get_driver`'s driver, as a :class:`SyncDriver`."""
    return SyncDriver(get_driver(name, config, state_dir))


def boinc_driver(tmp_path: Path, emulator: object, **settings: object) -> BoincDriver:
    """A boinc driver on the emulator ``emulator`` (its URL and authenticator), its state in
    ``tmp_path/state``; ``settings`` are the driver's options.  The authenticator file
    ``tmp_path/auth`` is written for a fresh state only: a test may change it for the next
    driver on the same state."""
    auth = tmp_path / "auth"
    if not (tmp_path / "state").exists():
        auth.write_text(emulator.authenticator + "\n")  # type: ignore[attr-defined]
    config = {
        "project_url": emulator.url,  # type: ignore[attr-defined]
        "authenticator_file": str(auth),
        **settings,
    }
    return BoincDriver(config, tmp_path / "state")


async def until(check: Callable[[], Any], timeout: float = 30.0) -> None:
    """Wait (polling, on the running loop) until ``check()`` is true; ``check`` may be a
    coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


TRICKY_ARGS: tuple[str, ...] = (
    "two words",
    "it's",
    'say "hi"',
    "$(touch /tmp/gahp-lrms-pwned)",
    "`touch /tmp/gahp-lrms-pwned`",
    "a;b|c&d",
    "line one\nline two\n#SBATCH --bogus",
    "%j %u \\n back\\slash",
    "",
    "  lead and trail  ",
    "*",
    "--help",
)
TRICKY_ENV: dict[str, str] = {
    "GAHP_T_COMMA": "a,b,c=d",
    "GAHP_T_QUOTE": 'it\'s "x" $HOME `id`',
    "GAHP_T_NEWLINE": "one\ntwo",
    "GAHP_T_EMPTY": "",
}
PWNED = Path("/tmp/gahp-lrms-pwned")

# A tiny program that reports what it got, as JSON, to stdout.
ECHO_PROGRAM = r"""
import json, os, sys
data = {"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": sys.stdin.read(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("GAHP_T_")}}
print(json.dumps(data))
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("GAHP_T_EXIT", "0")))
"""


@pytest.fixture
def echo_program(tmp_path: Path) -> Path:
    """An executable script printing its argv, cwd, stdin and GAHP_T_* environment as JSON."""
    path = tmp_path / "echo prog.py"
    path.write_text(f"#!{sys.executable}\n{ECHO_PROGRAM}")
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def _no_injection() -> Iterator[None]:
    PWNED.unlink(missing_ok=True)
    yield
    assert not PWNED.exists(), "a job argument was interpreted by a shell"


def wait_job(
    driver: Driver,
    native_id: str,
    predicate: Callable[[JobInfo], bool],
    timeout: float = 30.0,
    interval: float = 0.1,
) -> JobInfo:
    """Poll ``driver.status`` until ``predicate`` holds (:func:`gahp_core.testing.wait_for`);
    fail with the last status after ``timeout`` seconds."""
    last: list[JobInfo] = []

    def check() -> JobInfo | None:
        last[:] = [driver.status(native_id)]
        return last[0] if predicate(last[0]) else None

    try:
        return wait_for(check, timeout, f"job {native_id}", interval)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last status {last[0]}") from None


def wait_status(
    driver: Driver, native_id: str, *wanted: JobStatus, timeout: float = 30.0
) -> JobInfo:
    return wait_job(driver, native_id, lambda i: i.status in wanted, timeout)


# ---------------------------------------------------------------------- Slurm
def _slurm_conf() -> str | None:
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    candidate = Path(os.environ.get("GAHP_SLURM_DIR", "/tmp/gahp-slurm")) / "slurm.conf"
    return str(candidate) if candidate.exists() else None


def _unavailable(reason: str) -> None:
    unavailable("GAHP_REQUIRE_SLURM", reason)


@pytest.fixture(scope="session")
def slurm_config() -> dict[str, object]:
    """Driver config for the live Slurm; skips (or fails, see module doc) if it is down."""
    conf = _slurm_conf()
    env = dict(os.environ)
    if conf:
        env["SLURM_CONF"] = conf
    if shutil.which("sinfo") is None:
        _unavailable("Slurm is not installed (no sinfo); run `bash .ci/slurm-up.sh`")
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        _unavailable("Slurm is not reachable (sinfo timed out); run `bash .ci/slurm-up.sh`")
    if proc.returncode != 0 or not proc.stdout.strip():
        _unavailable(f"Slurm is not reachable (sinfo: {proc.stderr.strip()[:200]})")
    config = {"slurm_conf": conf} if conf else {}
    return {**config, "status_interval": LIVE_STATUS_INTERVAL}


LIVE_STATUS_INTERVAL = 0.5
"""The status registry's interval in the live driver tests: short, so that they see even
a 2-second RUNNING state (the default, 5 s, may skip it, as a poll of HTCondor's would)."""


def _tracked(driver: SyncDriver) -> Iterator[SyncDriver]:
    """Yield ``driver``; afterwards cancel every job submitted through it that is not
    finished, so that a failed test leaves nothing running (or stopped) behind."""
    submitted: list[str] = []
    submit = driver.submit

    def recording_submit(spec: JobSpec) -> str:
        native_id = submit(spec)
        submitted.append(native_id)
        return native_id

    driver.submit = recording_submit  # type: ignore[method-assign]
    yield driver
    for native_id in submitted:
        try:
            if not driver.status(native_id).finished:
                driver.cancel(native_id)
        except Exception as exc:  # best-effort cleanup
            print(f"cleanup of job {native_id} failed: {exc}")


@pytest.fixture
def slurm_driver(slurm_config: dict[str, str], tmp_path: Path) -> Iterator[SyncDriver]:
    yield from _tracked(sync_driver("slurm", slurm_config, tmp_path / "state"))


@pytest.fixture
def pbs_driver(slurm_config: dict[str, str], tmp_path: Path) -> Iterator[SyncDriver]:
    if shutil.which("qsub") is None:
        _unavailable("PBS commands not installed (slurm-wlm-torque); run `bash .ci/slurm-up.sh`")
    yield from _tracked(sync_driver("pbs", slurm_config, tmp_path / "state"))


# ---------------------------------------------------------------------- Grid Engine
SGE_PE = os.environ.get("GAHP_SGE_PE", "smp")
"""The parallel environment the live SGE tests use (``.ci/sge-up.sh`` creates ``smp``)."""


@pytest.fixture(scope="session")
def sge_config(sge_env: dict[str, str] | None) -> dict[str, object]:
    """Driver config for the live Grid Engine (see tests/conftest.py for how it is found);
    skips when it is down, or fails when ``GAHP_REQUIRE_SGE=1`` (CI)."""
    if sge_env is None:
        unavailable(
            "GAHP_REQUIRE_SGE", "Grid Engine is not reachable (start it with `bash .ci/sge-up.sh`)"
        )
    config = {
        "sge_root": sge_env["SGE_ROOT"],
        "parallel_environment": SGE_PE,
        "status_interval": LIVE_STATUS_INTERVAL,
    }
    for key, var in (("sge_cell", "SGE_CELL"), ("sge_qmaster_port", "SGE_QMASTER_PORT")):
        if sge_env.get(var):
            config[key] = sge_env[var]
    return config


@pytest.fixture
def sge_driver(sge_config: dict[str, str], tmp_path: Path) -> Iterator[SyncDriver]:
    yield from _tracked(sync_driver("sge", sge_config, tmp_path / "state"))


@pytest.fixture
def fork_driver(tmp_path: Path) -> Iterator[SyncDriver]:
    yield from _tracked(sync_driver("fork", {}, tmp_path / "state"))


# ---------------------------------------------------------------------- OpenPBS
@pytest.fixture(scope="session")
def openpbs_config(pbs_env: dict[str, str] | None) -> dict[str, object]:
    """Driver config for the real OpenPBS (``bash .ci/pbs-up.sh``); skips when it does not
    answer, or fails when ``GAHP_REQUIRE_PBS=1`` (CI)."""
    if pbs_env is None:
        unavailable(
            "GAHP_REQUIRE_PBS", "OpenPBS is not reachable (start it with `bash .ci/pbs-up.sh`)"
        )
    return {"bin_dir": pbs_env["GAHP_PBS_BIN_DIR"], "status_interval": LIVE_STATUS_INTERVAL}


@pytest.fixture
def openpbs_driver(openpbs_config: dict[str, str], tmp_path: Path) -> Iterator[SyncDriver]:
    yield from _tracked(sync_driver("pbs", openpbs_config, tmp_path / "state"))


# ---------------------------------------------------------------------- LSF
LSF_COMMANDS = ("bsub", "bjobs", "bhist", "bkill", "bstop", "bresume", "bqueues", "lsid")


@pytest.fixture(scope="session")
def lsf_config(
    lsf_env: dict[str, str] | None, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, object]:
    """Driver config for the live LSF (see tests/conftest.py ``lsf_env``: ``$LSF_ENVDIR``,
    else the file ``.ci/lsf-up.sh`` writes); skips when it does not answer, or fails when
    ``GAHP_REQUIRE_LSF=1`` (CI).  As root, the commands run as :data:`LSF_USER`."""
    if lsf_env is None:
        unavailable("GAHP_REQUIRE_LSF", "LSF is not reachable (start it with `bash .ci/lsf-up.sh`)")
    envdir = lsf_env["LSF_ENVDIR"]
    bindir = parse_lsf_conf((Path(envdir) / "lsf.conf").read_text()).get("LSF_BINDIR", "")
    config = {"lsf_envdir": envdir, "status_interval": LIVE_STATUS_INTERVAL}
    if os.geteuid() == 0:
        lsf_job_user()
        wrappers = tmp_path_factory.mktemp("lsf-bin")
        for name in LSF_COMMANDS:
            path = wrappers / name
            path.write_text(
                f'#!/bin/sh\nexec runuser -u {LSF_USER} -- {Path(bindir) / name} "$@"\n'
            )
            path.chmod(0o755)
        config["bin_dir"] = str(wrappers)
    return config


@pytest.fixture
def lsf_job_dir(lsf_config: dict[str, str]) -> Iterator[Path]:
    """A fresh directory the jobs' owner may write (a test's ``tmp_path`` is root's only)."""
    base = Path("/tmp/gahp-lsf/jobs")
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o1777)
    path = Path(tempfile.mkdtemp(prefix="t-", dir=base))
    os.chmod(path, 0o755)
    if os.geteuid() == 0:
        user = lsf_job_user()
        os.chown(path, user.pw_uid, user.pw_gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def lsf_mkdir(path: Path) -> Path:
    """Make directory ``path`` for a job: owned by the LSF test user when run as root."""
    path.mkdir(parents=True)
    if os.geteuid() == 0:
        user = pwd.getpwnam(LSF_USER)
        os.chown(path, user.pw_uid, user.pw_gid)
    return path


@pytest.fixture
def lsf_driver(lsf_config: dict[str, str], tmp_path: Path) -> Iterator[SyncDriver]:
    yield from _tracked(sync_driver("lsf", lsf_config, tmp_path / "state"))


# ---------------------------------------------------------------------- HTCondor pool
@pytest.fixture(scope="session")
def condor_config(htcondor_pool_env: dict[str, str] | None) -> dict[str, object]:
    """Driver config for the one-machine HTCondor pool (``bash .ci/htcondor-pool-up.sh``);
    skips when it does not answer, or fails when ``GAHP_REQUIRE_HTCONDOR_POOL=1`` (CI)."""
    if htcondor_pool_env is None:
        unavailable(
            "GAHP_REQUIRE_HTCONDOR_POOL",
            "the HTCondor pool is not reachable (start it with `bash .ci/htcondor-pool-up.sh`)",
        )
    return {
        "condor_config": htcondor_pool_env["CONDOR_CONFIG"],
        "status_interval": LIVE_STATUS_INTERVAL,
    }


@pytest.fixture
def condor_job_dir(
    condor_config: dict[str, object], htcondor_pool_env: dict[str, str]
) -> Iterator[Path]:
    path = pool_job_dir(htcondor_pool_env)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def condor_driver(condor_config: dict[str, str], tmp_path: Path) -> Iterator[SyncDriver]:
    driver = sync_driver("condor", condor_config, tmp_path / "state")
    yield from _tracked(driver)
    driver.close()
