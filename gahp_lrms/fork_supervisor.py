"""The supervisor of one ``fork`` job: ``python -m gahp_lrms.fork_supervisor JOBDIR``.

It detaches (double fork, new session) so that the job outlives the GAHP server, runs
``count`` instances of the job in one new process group, and records what happens in
``JOBDIR/state.json`` (always replaced atomically).  It reads ``JOBDIR/spec.json`` written by
:class:`gahp_lrms.fork.ForkDriver`, and obeys two marker files the driver creates:
``held`` (do not start yet / keep stopped) and ``removed`` (do not start at all).  The driver
wakes it with SIGUSR1.  Only the standard library is used here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the supervisor imports as little as it can
    import subprocess
    from collections.abc import Iterator
    from typing import Any

STATE = "state.json"
SPEC = "spec.json"
HELD = "held"
REMOVED = "removed"
LOCK = "lock"
LOG = "supervisor.log"
SIGNAL_FOR_MARKER = {REMOVED: signal.SIGKILL, HELD: signal.SIGSTOP}
"""What a job started after the driver marked it gets at once."""


def proc_start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), or None if it is gone or a
    zombie; together with the pid it names one process even across pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def write_json_atomic(
    path: str | os.PathLike[str], data: dict[str, Any], durable: bool = True
) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (``durable``: on disk
    before the rename)."""
    path = os.fspath(path)
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def job_lock(jobdir: str | os.PathLike[str]) -> Iterator[None]:
    """Serialise marker changes and signals between the driver and the supervisor."""
    lock = os.path.join(jobdir, LOCK)
    with os.fdopen(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Supervisor:
    """Runs the job of one job directory and keeps its state file up to date."""

    def __init__(self, jobdir: str) -> None:
        self.jobdir = jobdir
        with open(self.path(SPEC)) as f:
            self.spec: dict[str, Any] = json.load(f)
        self.state: dict[str, Any] = {
            "supervisor_pid": os.getpid(),
            "supervisor_start": proc_start_ticks(os.getpid()),
            "hostname": os.uname().nodename,
            "phase": "waiting",
            "pgid": None,
            "pids": [],
            "started_at": None,
            "ended_at": None,
            "exit_code": None,
            "exit_signal": None,
            "exit_reason": None,
            "wallclock_s": None,
            "user_cpu_s": None,
            "sys_cpu_s": None,
        }

    def path(self, name: str) -> str:
        """``name`` in the job directory."""
        return os.path.join(self.jobdir, name)

    def marked(self, marker: str) -> bool:
        """Whether the driver has created the marker file ``marker``."""
        return os.path.exists(self.path(marker))

    def save(self) -> None:
        write_json_atomic(self.path(STATE), self.state)

    def finish(self, phase: str, **fields: Any) -> None:
        self.state.update(fields, phase=phase, ended_at=time.time())
        self.save()

    def wait_for_release(self) -> bool:
        """Block while the job is held before its start; False if it was removed."""
        wake = {signal.SIGUSR1}
        signal.pthread_sigmask(signal.SIG_BLOCK, wake)
        try:
            while True:
                if self.marked(REMOVED):
                    return False
                if not self.marked(HELD):
                    return True
                signal.sigtimedwait(wake, 1.0)
        finally:  # the job must not inherit a blocked signal mask
            signal.pthread_sigmask(signal.SIG_UNBLOCK, wake)

    def open_streams(self, workdir: str) -> tuple[int, int, int]:
        def resolve(p: str | None) -> str:
            return os.devnull if p is None else os.path.join(workdir, p)

        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        out_path, err_path = resolve(self.spec["stdout"]), resolve(self.spec["stderr"])
        out = os.open(out_path, flags, 0o644)
        if os.path.abspath(err_path) == os.path.abspath(out_path):
            err = os.dup(out)
        else:
            err = os.open(err_path, flags, 0o644)
        # stdin is opened once per instance (each sees the whole file); check it now.
        inp = os.open(resolve(self.spec["stdin"]), os.O_RDONLY)
        return inp, out, err

    def spawn(self) -> list[subprocess.Popen[bytes]]:
        import subprocess  # here, not at the top: after the state file is written

        spec = self.spec
        workdir = spec["workdir"]
        env = dict(os.environ)
        env.update(spec["environment"])
        argv = [spec["executable"], *spec["arguments"]]
        stdin_path = os.devnull if spec["stdin"] is None else os.path.join(workdir, spec["stdin"])
        inp, out, err = self.open_streams(workdir)
        os.close(inp)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(spec["count"]):
                with open(stdin_path, "rb") as stdin:
                    procs.append(
                        subprocess.Popen(
                            argv,
                            cwd=workdir,
                            env=env,
                            stdin=stdin,
                            stdout=out,
                            stderr=err,
                            process_group=procs[0].pid if procs else 0,
                            restore_signals=True,
                        )
                    )
        except BaseException:
            # All or nothing: never leave some instances running after a failed start.
            if procs:
                with contextlib.suppress(OSError):
                    os.killpg(procs[0].pid, signal.SIGKILL)
                for p in procs:
                    p.wait()
            raise
        finally:
            os.close(out)
            os.close(err)
        return procs

    def obey_late_marker(self, pgid: int) -> None:
        """Removed or held while we were starting: kill the group, or stop it."""
        for marker in (REMOVED, HELD):
            if self.marked(marker):
                with contextlib.suppress(OSError):
                    os.killpg(pgid, SIGNAL_FOR_MARKER[marker])
                return

    def run(self) -> int:
        self.save()
        if not self.wait_for_release():
            self.finish("removed", exit_reason="removed before it started")
            return 0
        started = time.monotonic()
        self.state["started_at"] = time.time()
        try:
            procs = self.spawn()
        except OSError as exc:
            start_code = 126 if exc.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 127
            what = exc.filename or self.spec["executable"]
            self.finish(
                "finished",
                exit_code=start_code,
                exit_reason=f"cannot start the job: {what}: {exc.strerror or exc}",
                wallclock_s=0.0,
            )
            return 0
        pgid = procs[0].pid
        with job_lock(self.jobdir):
            self.state.update(phase="running", pgid=pgid, pids=[p.pid for p in procs])
            self.save()
            self.obey_late_marker(pgid)
        statuses, user, system = _wait_all(procs)
        self.finish(
            "finished",
            **_outcome(statuses),
            wallclock_s=round(time.monotonic() - started, 3),
            user_cpu_s=round(user, 3),
            sys_cpu_s=round(system, 3),
        )
        return 0


def _wait_all(procs: list[subprocess.Popen[bytes]]) -> tuple[list[int], float, float]:
    """Wait for every instance: their wait statuses, and the user and system CPU seconds
    they used."""
    user = system = 0.0
    statuses: list[int] = []
    for p in procs:
        while True:
            try:
                _pid, status, usage = os.wait4(p.pid, 0)
                break
            except ChildProcessError:
                status, usage = 0, None
                break
            except InterruptedError:
                continue
        p.returncode = status  # keep Popen from waiting again
        statuses.append(status)
        if usage is not None:
            user += usage.ru_utime
            system += usage.ru_stime
    return statuses, user, system


def _outcome(statuses: list[int]) -> dict[str, Any]:
    """``exit_code``, ``exit_signal`` and ``exit_reason`` of the job from its instances'
    wait statuses: the first signal, else the first non-zero exit status."""
    for st in statuses:
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            reason = f"killed by signal {sig} ({signal.Signals(sig).name})"
            return {"exit_code": None, "exit_signal": sig, "exit_reason": reason}
    code = next((c for c in (os.WEXITSTATUS(s) for s in statuses) if c != 0), 0)
    why = f"exited with status {code}" if code else None
    return {"exit_code": code, "exit_signal": None, "exit_reason": why}


def unsafe_jobdir(jobdir: str) -> str | None:
    """Why ``jobdir`` is not a job directory this user alone controls (None: it is)."""
    import stat

    try:
        st = os.lstat(jobdir)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not {os.geteuid()}"
    if st.st_mode & 0o077:
        return f"mode {stat.filemode(st.st_mode)}: open to other users"
    return None


def daemonize(jobdir: str) -> None:
    """Double fork into a new session; the first parent exits at once."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.chdir("/")
    devnull = os.open(os.devnull, os.O_RDWR)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
    log = os.open(os.path.join(jobdir, LOG), flags, 0o600)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    # SIGUSR1 only wakes us up (a handler, unlike SIG_IGN, is not inherited by the job).
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gahp_lrms.fork_supervisor JOBDIR", file=sys.stderr)
        return 2
    jobdir = os.path.realpath(args[0])
    problem = unsafe_jobdir(jobdir)
    if problem:
        print(f"fork supervisor: refusing {jobdir}: {problem}", file=sys.stderr)
        return 2
    daemonize(jobdir)
    supervisor = Supervisor(jobdir)
    try:
        return supervisor.run()
    except BaseException as exc:  # record any crash so status gets a definite answer
        import traceback

        traceback.print_exc()
        with contextlib.suppress(Exception):
            supervisor.finish("failed", exit_reason=f"supervisor error: {exc!r}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
