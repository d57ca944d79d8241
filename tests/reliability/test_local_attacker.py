"""Another local user attacks the victim's blahpd, as on a shared submit host.

Two ordinary accounts (``gahpvictim`` runs blahpd, ``gahpattacker`` plays the attacker)
share a world-writable sticky directory, as the old operator guides advised
(``install -d -m 1777 /var/lib/gahp-blah``) and as ``/tmp`` is for proxies. The attacker
pre-creates the victim's state directory, log file, links and temporary names, and races
the proxy refresh; none of it may give them the victim's files or commands. Runs as root
(to make the accounts); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from live_services import local_user

from gahp_core.testing import GahpClient

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make two test users")

VICTIM = "gahpvictim"
ATTACKER = "gahpattacker"
ROOT = Path(__file__).resolve().parents[2]


# ---- the two users ------------------------------------------------------------------------------


def _as_user_argv(user: pwd.struct_passwd, caps: bool) -> list[str]:
    argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    if caps:
        # Only when this interpreter is out of an ordinary user's reach (under /root):
        # read and search access, so the victim can run it. It writes as itself.
        argv += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    return argv


@pytest.fixture(scope="module")
def victim() -> Iterator[list[str]]:
    """The argv prefix that runs a command as the victim (with this interpreter)."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run as the test users")
    user = local_user(VICTIM)
    probe = [sys.executable, "-c", "import gahp_blah.backend"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for caps in (False, True):
        argv = _as_user_argv(user, caps)
        if (
            subprocess.run([*argv, *probe], env=env, capture_output=True, check=False).returncode
            == 0
        ):
            yield argv
            return
    pytest.skip(f"{sys.executable} cannot be run by the test user {VICTIM}")


@pytest.fixture(scope="module")
def attacker_user() -> pwd.struct_passwd:
    return local_user(ATTACKER)


def as_attacker(user: pwd.struct_passwd, action: Callable[[], None]) -> None:
    """Run ``action`` in a forked child as the attacker (no privilege left)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        code = 1
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            action()
            code = 0
        except BaseException as exc:
            with contextlib.suppress(Exception):
                os.write(2, f"attacker: {exc!r}\n".encode())
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the attacker's set-up failed"


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may create entries in (root's, mode 1777, like /tmp)."""
    d = Path(tempfile.mkdtemp(prefix="gahp-shared-", dir="/tmp"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def home(victim: list[str]) -> Iterator[Path]:
    """A private directory of the victim's own (its state, its new proxies)."""
    user = pwd.getpwnam(VICTIM)
    d = Path(tempfile.mkdtemp(prefix="gahp-victim-", dir="/tmp"))
    os.chown(d, user.pw_uid, user.pw_gid)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def victim_file(path: Path, text: str, mode: int = 0o600) -> Path:
    user = pwd.getpwnam(VICTIM)
    path.write_text(text)
    os.chown(path, user.pw_uid, user.pw_gid)
    path.chmod(mode)
    return path


def blahpd(victim: list[str], *args: str | Path) -> list[str]:
    return [*victim, sys.executable, "-m", "gahp_blah", *map(str, args)]


def env() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT), "HOME": pwd.getpwnam(VICTIM).pw_dir}


# ---- reproduction 1: the state directory and the log --------------------------------------------


@pytest.mark.parametrize("planted", ["directory", "symlink"])
def test_blahpd_refuses_a_state_directory_another_user_made(
    victim: list[str], attacker_user: pwd.struct_passwd, shared: Path, planted: str
) -> None:
    state = shared / VICTIM

    def plant() -> None:
        if planted == "directory":
            state.mkdir()
            state.chmod(0o777)  # so the victim could write in it
        else:
            theirs = shared / "theirs"
            theirs.mkdir(mode=0o777)
            theirs.chmod(0o777)
            state.symlink_to(theirs)

    as_attacker(attacker_user, plant)
    proc = subprocess.run(
        blahpd(victim, "--state-dir", state),
        input="COMMANDS\r\nQUIT\r\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env()},
        check=False,
    )
    # It does not start (a clear line, no traceback), so it writes no job spec or proxy
    # record where the attacker could swap or read them.
    assert proc.returncode != 0, proc.stdout
    assert "cannot start:" in proc.stderr, proc.stderr
    assert "blahpd state directory is unsafe" in proc.stderr, proc.stderr
    assert str(state) in proc.stderr and ATTACKER in proc.stderr or "symbolic link" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any(state.iterdir())


@pytest.mark.parametrize("planted", ["file", "symlink"])
@pytest.mark.parametrize("where", ["sticky", "their directory"])
def test_blahpd_serves_without_a_log_another_user_planted(
    victim: list[str],
    attacker_user: pwd.struct_passwd,
    shared: Path,
    home: Path,
    planted: str,
    where: str,
) -> None:
    # In the shared sticky directory itself, or in the victim's log directory that the
    # attacker made first (as the state directory of reproduction 1).
    logs = shared if where == "sticky" else shared / f"{VICTIM}-logs"
    log = logs / "blahpd.log"
    theirs = shared / "theirs.log"

    def plant() -> None:
        if logs != shared:
            logs.mkdir()
            logs.chmod(0o777)
        theirs.write_text("")
        theirs.chmod(0o666)
        if planted == "file":
            log.write_text("")
            log.chmod(0o666)
        else:
            log.symlink_to(theirs)

    as_attacker(attacker_user, plant)
    c = GahpClient(
        blahpd(victim, "--state-dir", home / "state", "--log", log, "--log-level", "DEBUG"),
        env=env(),
    )
    try:
        assert c.call("BLAH_PING", "fork", timeout=60) == ["0", "No error"]
    finally:
        c.close()
    assert (log.read_text() if not log.is_symlink() else "") == ""
    assert theirs.read_text() == ""
    assert f"not logging to {log}" in c.stderr_text


# ---- reproduction 2: the proxy refresh ----------------------------------------------------------


@pytest.fixture
def proxied_job(
    victim: list[str], shared: Path, home: Path
) -> Iterator[tuple[GahpClient, str, Path]]:
    """A running fork job of the victim whose proxy is in the shared directory (as
    ``/tmp/x509up_u<uid>``): the client, the job id and the proxy."""
    proxy = victim_file(shared / f"x509up_{VICTIM}", "OLD PROXY\n")
    c = GahpClient(blahpd(victim, "--state-dir", home / "state"), env=env())
    ad = (
        '[ gridtype = "fork"; Cmd = "/bin/sleep"; Args = "300"; '
        f'Iwd = "{home}"; x509UserProxy = "{proxy}" ]'
    )
    res = c.call("BLAH_JOB_SUBMIT", ad, timeout=60)
    assert res[0] == "0", res
    try:
        yield c, res[2], proxy
    finally:
        with contextlib.suppress(Exception):
            c.call("BLAH_JOB_CANCEL", res[2], timeout=60)
        c.close()


def test_the_refresh_does_not_write_into_a_file_planted_at_a_predictable_name(
    proxied_job: tuple[GahpClient, str, Path], attacker_user: pwd.struct_passwd, home: Path
) -> None:
    c, job, proxy = proxied_job
    planted = proxy.with_name(f".{proxy.name}.refresh-{c.proc.pid}")

    def plant() -> None:
        planted.write_text("")
        planted.chmod(0o666)

    as_attacker(attacker_user, plant)
    new = victim_file(home / "renewed", "SECRET RENEWED PROXY\n")
    assert c.call("BLAH_JOB_REFRESH_PROXY", job, str(new), timeout=60) == ["0", "No error"]
    assert planted.read_text() == ""
    assert proxy.read_text() == "SECRET RENEWED PROXY\n"
    st = proxy.lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == pwd.getpwnam(VICTIM).pw_uid


def test_a_reader_racing_the_refresh_never_sees_the_new_proxy(
    proxied_job: tuple[GahpClient, str, Path], attacker_user: pwd.struct_passwd, home: Path
) -> None:
    c, job, proxy = proxied_job
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child: the attacker opens every file it can, over and over)
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(attacker_user.pw_gid)
            os.setuid(attacker_user.pw_uid)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                for entry in os.scandir(proxy.parent):
                    with contextlib.suppress(OSError):
                        with open(entry.path, "rb") as fh:
                            data = fh.read(4096)
                        if b"SECRET" in data:
                            os.write(write_end, data[:64] + b"\n")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        for i in range(40):
            new = victim_file(home / f"renewed-{i}", f"SECRET {i} " + "x" * 200_000 + "\n")
            assert c.call("BLAH_JOB_REFRESH_PROXY", job, str(new), timeout=60) == ["0", "No error"]
        time.sleep(0.2)
        ready, _, _ = select.select([read_end], [], [], 0)
        seen = os.read(read_end, 4096) if ready else b""
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
    assert seen == b"", f"the attacker read the renewed proxy: {seen[:200]!r}"
    assert proxy.read_text().startswith("SECRET 39 ")


# ---- reproduction 3: the pbs script directory ---------------------------------------------------


PBS_SCRIPT_DIR = """
import json
import sys
from pathlib import Path
from gahp_lrms import JobSpec
from gahp_lrms.pbs import PbsDriver

drv = PbsDriver({"flavor": "pbspro"}, Path(sys.argv[1]))
sub = drv._submission(JobSpec(executable="/bin/true"))
print(json.dumps({"cwd": str(sub.cwd), "script": str(sub.remove)}))
"""


def test_pbs_scripts_never_go_to_a_shared_directory_another_user_made(
    victim: list[str], attacker_user: pwd.struct_passwd, shared: Path, home: Path
) -> None:
    fallback = shared / "gahp-pbs"

    def plant() -> None:
        fallback.mkdir()
        fallback.chmod(0o777)

    as_attacker(attacker_user, plant)
    state = home / "alice@example.org" / "pbs-state"  # '@': not a shell-safe path
    proc = subprocess.run(
        [*victim, sys.executable, "-c", PBS_SCRIPT_DIR, str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env(), "TMPDIR": str(shared)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    where = json.loads(proc.stdout)
    assert list(fallback.iterdir()) == []  # nothing for the attacker to replace
    scripts = Path(where["cwd"])
    assert scripts != fallback and Path(where["script"]).parent == scripts
    st = scripts.lstat()
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == pwd.getpwnam(VICTIM).pw_uid
