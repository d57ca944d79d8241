"""The ``fork`` driver: jobs run on this host, each under a detached supervisor process.

Job ``ID`` lives in ``state_dir/fork/ID/``: ``spec.json`` (what to run), ``state.json`` (what
the supervisor saw: pids, exit status, times), the markers ``held`` and ``removed``, and
``supervisor.log``.  Nothing is kept in memory, so a new driver on the same ``state_dir``
answers for every job an earlier one started.  Once the job's final status has been answered
(:meth:`ForkDriver.reported`) its directory goes and only that status stays, in
``state_dir/final/ID``, for ``keep_finished_s``; a finished job never asked about goes
``keep_finished_s`` after its end.  Every directory is the user's own, mode 0700.

* ``submit`` writes the spec, starts the supervisor and returns without waiting for it: the
  job is IDLE until the supervisor has started it.  A supervisor that fails to start, or has
  written nothing after ``start_timeout_s``, makes the job COMPLETED with the reason (and
  its log).  ``cancel`` of a job not started yet waits until its supervisor has seen the
  ``removed`` marker: the job never runs.

* ``cancel`` sends SIGTERM then (after ``kill_grace_s``) SIGKILL to the job's process group and
  waits until the supervisor has reaped it: no process of the group is left (the whole wait
  bounded by ``start_timeout_s + kill_grace_s``, then an error).  Processes that
  leave the group on purpose (``setsid``) are not tracked.
* ``hold`` stops the whole group with SIGSTOP (a job not started yet is kept from starting);
  the job is HELD.  ``resume`` sends SIGCONT.
* ``count`` > 1 runs that many instances in the same group; their stdout/stderr go to the
  same files (appended, interleaved), each reads stdin from the start.  The job's exit status
  is the first signal that killed an instance, else the first non-zero exit status.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gahp_core import open_private, private_dir, write_private
from gahp_lrms import fork_supervisor as sup
from gahp_lrms.base import BlockingDriver
from gahp_lrms.config import ForkConfig
from gahp_lrms.fork_state import Phase, SupervisorState
from gahp_lrms.model import (
    DriverError,
    JobInfo,
    JobSpec,
    JobStatus,
    refuse_requests,
    untracked_environ,
)
from gahp_lrms.registry import info_from_json, info_to_json

__all__ = ["ForkDriver"]

_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


class ForkDriver(BlockingDriver):
    """Runs jobs as local processes.  Config keys: ``python`` (interpreter for the supervisor,
    default this one), ``kill_grace_s`` (default 2), ``start_timeout_s`` (how long a
    supervisor may take to start, default 15)."""

    name = "fork"
    config_class = ForkConfig
    settings: ForkConfig

    def __init__(self, config: Mapping[str, Any], state_dir: Path) -> None:
        super().__init__(config, state_dir)
        self.jobs_dir = self.state_dir / "fork"
        self.final_dir = self.state_dir / "final"
        self.python = self.settings.python or sys.executable
        self.kill_grace_s = self.settings.kill_grace_s
        self.start_timeout_s = self.settings.start_timeout_s
        self.keep_finished_s = self.settings.keep_finished_s
        self._next_sweep = 0.0  # monotonic time of the next sweep of old finished jobs
        self._launch_lock = threading.Lock()
        self._launchers: dict[str, subprocess.Popen[bytes]] = {}
        self._failed_launches: dict[str, int] = {}

    # ------------------------------------------------------------------ helpers
    def _jobdir(self, native_id: str) -> Path:
        if not native_id or not all(c.isalnum() or c in "-_" for c in native_id):
            raise DriverError(f"malformed fork job id {native_id!r}")
        return self.jobs_dir / native_id

    @staticmethod
    def _read_state(jobdir: Path) -> SupervisorState | None:
        path = jobdir / sup.STATE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DriverError(f"cannot read {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise DriverError(f"cannot read {path}: not a supervisor state")
        return SupervisorState.from_json(data, path)

    @staticmethod
    def _supervisor_alive(state: SupervisorState) -> bool:
        if not state.supervisor_pid:
            return False
        return sup.proc_start_ticks(state.supervisor_pid) == state.supervisor_start

    @staticmethod
    def _group_states(pgid: int | None) -> list[str]:
        """The states (``R``, ``S``, ``T``...) of the live, non-zombie processes of ``pgid``."""
        if not pgid:
            return []
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        states = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            fields = data[data.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                states.append(fields[0].decode())
        return states

    def _group_alive(self, pgid: int | None) -> bool:
        """True while a live (non-zombie) process is in process group ``pgid``."""
        return bool(self._group_states(pgid))

    def _wake(self, state: SupervisorState | None) -> None:
        if state and state.supervisor_pid and self._supervisor_alive(state):
            with contextlib.suppress(OSError):
                os.kill(state.supervisor_pid, signal.SIGUSR1)

    # ------------------------------------------------------------------ Driver API
    def submit(self, spec: JobSpec) -> str:
        refuse_requests(spec, "the fork driver")
        self._reap()
        self._sweep()
        native_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:12]
        jobdir = self.jobs_dir / native_id
        workdir = os.path.abspath(spec.workdir) if spec.workdir else os.getcwd()
        if not os.path.isdir(workdir):
            raise DriverError(f"working directory {workdir} does not exist")
        try:
            private_dir(self.jobs_dir)
            jobdir.mkdir(mode=0o700)
            data = {
                "executable": spec.executable,
                "arguments": list(spec.arguments),
                "environment": dict(spec.environment),
                "stdin": spec.stdin,
                "stdout": spec.stdout,
                "stderr": spec.stderr,
                "workdir": workdir,
                "count": spec.count,
                "name": spec.name,
            }
            # Not fsynced: a crash of this host ends the job too.
            sup.write_json_atomic(jobdir / sup.SPEC, data, durable=False)
            if spec.start_held:
                (jobdir / sup.HELD).touch()
        except OSError as exc:
            raise DriverError(f"cannot create the job directory {jobdir}: {exc}") from exc
        self._launch(native_id, jobdir)
        return native_id

    def _launch(self, native_id: str, jobdir: Path) -> None:
        """Start the job's supervisor and return at once: the job is IDLE until the
        supervisor has started it (a launch that fails shows in :meth:`status`)."""
        # The supervisor needs only the standard library: run as a file in isolated mode
        # without the site module (-I -S: no script directory, user site, site-packages or
        # PYTHON* variables), it starts without importing the package or reading .pth files.
        argv = [self.python, "-I", "-S", sup.__file__, str(jobdir)]
        try:
            log = os.open(jobdir / sup.LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                # The launcher forks the detached supervisor and exits; _reap() collects it.
                launcher = subprocess.Popen(
                    argv,
                    cwd=_PACKAGE_PARENT,
                    env=untracked_environ(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            finally:
                os.close(log)
        except OSError as exc:
            raise DriverError(f"cannot start the fork supervisor: {exc}") from exc
        with self._launch_lock:
            self._launchers[native_id] = launcher

    def _reap(self) -> None:
        """Collect the launchers that have exited (no zombie is left behind); remember the
        ones that failed."""
        with self._launch_lock:
            for native_id, launcher in list(self._launchers.items()):
                code = launcher.poll()
                if code is not None:
                    del self._launchers[native_id]
                    if code != 0:
                        self._failed_launches[native_id] = code

    def _not_started(
        self, native_id: str, jobdir: Path, removed: bool = False, held: bool = False
    ) -> JobInfo:
        """The status of a job whose supervisor has not written its state yet."""
        if removed:
            return JobInfo(JobStatus.REMOVED, exit_reason="removed by request")
        self._reap()
        with self._launch_lock:
            launching = native_id in self._launchers
            failed = self._failed_launches.get(native_id)
        if failed is None and (launching or self._launch_age(jobdir) < self.start_timeout_s):
            if held:
                return JobInfo(JobStatus.HELD, hold_reason="held by request")
            return JobInfo(JobStatus.IDLE)
        log = _tail(jobdir / sup.LOG)
        what = f"exit status {failed}" if failed is not None else "no state"
        return JobInfo(
            JobStatus.COMPLETED,
            exit_reason=f"the fork supervisor never started the job ({what})"
            + (f": {log}" if log else ""),
        )

    @staticmethod
    def _launch_age(jobdir: Path) -> float:
        try:
            return time.time() - (jobdir / sup.SPEC).stat().st_mtime
        except OSError:
            return 0.0

    def status(self, native_id: str) -> JobInfo:
        self._reap()
        jobdir = self._jobdir(native_id)
        if not (jobdir / sup.SPEC).exists():
            final = self._final(native_id)
            if final is not None:
                return final
            return JobInfo(JobStatus.COMPLETED, exit_reason="unknown job: no record of it")
        state = self._read_state(jobdir)
        removed = (jobdir / sup.REMOVED).exists()
        held = (jobdir / sup.HELD).exists()
        if state is None:
            # Between submit and the supervisor's first write (or a lost launch).
            return self._not_started(native_id, jobdir, removed, held)
        host = state.hostname or socket.gethostname()
        if state.phase.final:
            return JobInfo(
                JobStatus.REMOVED
                if removed or state.phase is Phase.REMOVED
                else JobStatus.COMPLETED,
                exit_code=None if removed else state.exit_code,
                exit_signal=None if removed else state.exit_signal,
                exit_reason="removed by request" if removed else state.exit_reason,
                worker_node=host if state.started_at else None,
                wallclock_s=state.wallclock_s,
                user_cpu_s=state.user_cpu_s,
                sys_cpu_s=state.sys_cpu_s,
            )
        if removed:
            return JobInfo(JobStatus.REMOVED, exit_reason="removed by request")
        if not self._supervisor_alive(state):
            if self._group_alive(state.pgid):
                return JobInfo(JobStatus.RUNNING, worker_node=host)
            return JobInfo(
                JobStatus.COMPLETED,
                exit_reason="the job's supervisor ended without recording the job's end",
            )
        if state.phase is Phase.WAITING:
            if held:
                return JobInfo(JobStatus.HELD, hold_reason="held by request")
            return JobInfo(JobStatus.IDLE)
        wall = round(time.time() - state.started_at, 3) if state.started_at else None
        if held:
            return JobInfo(
                JobStatus.HELD, wallclock_s=wall, worker_node=host, hold_reason="held by request"
            )
        return JobInfo(JobStatus.RUNNING, wallclock_s=wall, worker_node=host)

    def cancel(self, native_id: str) -> None:
        jobdir = self._jobdir(native_id)
        if not (jobdir / sup.SPEC).exists():
            return
        with sup.job_lock(jobdir):
            state = self._read_state(jobdir)
            if state and state.phase.final:
                return
            if state is None and self._not_started(native_id, jobdir).finished:
                return  # its launch failed: it has ended
            (jobdir / sup.REMOVED).touch()
            pgid = state.pgid if state else None
            if pgid:
                self._terminate(pgid)
        self._wake(state)
        self._await_removal(native_id, jobdir, pgid)

    def _terminate(self, pgid: int) -> None:
        """SIGTERM to the job's group (and SIGCONT: stopped processes must see it)."""
        if self._group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
                os.killpg(pgid, signal.SIGCONT)

    def _await_removal(self, native_id: str, jobdir: Path, pgid: int | None) -> None:
        """After ``removed`` is marked: wait until no process of the job is left and its
        supervisor has recorded the end (or, for a job not started, has seen the marker and
        will never start it).  The group gets SIGKILL ``kill_grace_s`` after SIGTERM; the
        whole wait is bounded by one deadline, ``start_timeout_s + kill_grace_s``."""
        now = time.monotonic()
        deadline = now + self.start_timeout_s + self.kill_grace_s
        kill_at = now + self.kill_grace_s
        killed = False
        while True:
            state = self._read_state(jobdir)
            if pgid is None:  # not started when marked: did its supervisor start it since?
                if state is None:
                    if self._not_started(native_id, jobdir).finished:
                        return  # the launch failed: nothing will start
                elif state.pgid:
                    pgid = state.pgid
                    self._terminate(pgid)
                    kill_at = time.monotonic() + self.kill_grace_s
                elif state.phase is not Phase.WAITING or not self._supervisor_alive(state):
                    return
            else:
                alive = self._group_alive(pgid)
                if not alive and (
                    state is None
                    or state.phase is not Phase.RUNNING
                    or not self._supervisor_alive(state)
                ):
                    return  # gone, and the end recorded (or no supervisor left to record it)
                if alive and not killed and time.monotonic() >= kill_at:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pgid, signal.SIGKILL)
                    killed = True
            if time.monotonic() >= deadline:
                if pgid is not None and self._group_alive(pgid):
                    raise DriverError(f"processes of job {native_id} survived SIGKILL")
                return
            time.sleep(0.02)

    def forget(self, native_id: str) -> None:
        """Remove a finished job's directory (its spec holds the job's environment)."""
        jobdir = self._jobdir(native_id)
        if jobdir.exists() and self.status(native_id).finished:
            self._remove(native_id, jobdir)

    def reported(self, native_id: str) -> None:
        """The final status was answered: the job's directory goes (its spec holds the
        job's environment); only its final status stays, in ``state_dir/final/ID``, for
        ``keep_finished_s`` (a client that asks again gets the same answer)."""
        jobdir = self._jobdir(native_id)
        if not jobdir.exists():
            return
        info = self.status(native_id)
        if not info.finished:
            return
        try:
            private_dir(self.final_dir)
            data = json.dumps(info_to_json(info), separators=(",", ":")).encode()
            write_private(self.final_dir / native_id, data, durable=False)
        except OSError as exc:
            raise DriverError(f"cannot record the end of fork job {native_id}: {exc}") from exc
        self._remove(native_id, jobdir)

    def _final(self, native_id: str) -> JobInfo | None:
        """The final status :meth:`reported` kept, if any."""
        try:
            fd = open_private(self.final_dir / native_id)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DriverError(f"cannot read the end of fork job {native_id}: {exc}") from exc
        try:
            with os.fdopen(fd, "rb") as fh:
                return info_from_json(json.loads(fh.read(65536)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DriverError(f"cannot read the end of fork job {native_id}: {exc}") from exc

    def _remove(self, native_id: str, jobdir: Path) -> None:
        shutil.rmtree(jobdir, ignore_errors=True)
        with self._launch_lock:
            self._failed_launches.pop(native_id, None)

    def _sweep(self) -> None:
        """Remove the jobs that ended more than ``keep_finished_s`` ago (their final status
        was never asked for); at most once a minute."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(60.0, max(1.0, self.keep_finished_s / 10))
        limit = time.time() - self.keep_finished_s
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.final_dir):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < limit:
                        os.unlink(entry.path)
        try:
            entries = list(os.scandir(self.jobs_dir))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            jobdir = Path(entry.path)
            try:
                state = self._read_state(jobdir)
            except DriverError:
                continue
            if state is None:
                ended = self._launch_age(jobdir) > self.start_timeout_s + self.keep_finished_s
            else:
                end = state.ended_at
                ended = state.phase.final and end is not None and end < limit
            if ended:
                self._remove(entry.name, jobdir)

    def hold(self, native_id: str) -> None:
        jobdir = self._jobdir(native_id)
        with sup.job_lock(jobdir) if jobdir.exists() else contextlib.nullcontext():
            info = self.status(native_id)
            if info.finished:
                raise DriverError(f"job {native_id} cannot be held: it is {info.status.name}")
            (jobdir / sup.HELD).touch()
            state = self._read_state(jobdir)
            if state and state.phase is Phase.RUNNING and state.pgid:
                pgid = state.pgid
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGSTOP)
                # Signals are delivered asynchronously: return once the group has stopped.
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline and any(
                    st not in ("T", "t") for st in self._group_states(pgid)
                ):
                    time.sleep(0.01)

    def resume(self, native_id: str) -> None:
        jobdir = self._jobdir(native_id)
        with sup.job_lock(jobdir) if jobdir.exists() else contextlib.nullcontext():
            info = self.status(native_id)
            if info.status is not JobStatus.HELD:
                raise DriverError(f"job {native_id} is not held: it is {info.status.name}")
            with contextlib.suppress(FileNotFoundError):
                (jobdir / sup.HELD).unlink()
            state = self._read_state(jobdir)
            if state and state.phase is Phase.RUNNING and state.pgid:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(state.pgid, signal.SIGCONT)
        self._wake(state)

    def ping(self) -> None:
        try:
            private_dir(self.jobs_dir)
        except OSError as exc:
            raise DriverError(f"fork driver: state directory unusable: {exc}") from exc
        if not os.access(self.jobs_dir, os.W_OK):
            raise DriverError(f"fork driver: state directory {self.jobs_dir} is not writable")


def _tail(path: Path, limit: int = 2000) -> str:
    """The last ``limit`` characters of a log file, on one line ('' if unreadable)."""
    try:
        text = path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""
    return " | ".join(line for line in text.splitlines() if line.strip())
