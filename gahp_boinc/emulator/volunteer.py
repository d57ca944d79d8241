"""A simulated volunteer host: runs job instances as local programs and reports them.

Each of ``nthreads`` threads takes the oldest UNSENT instance whose job is at least
``job_delay`` seconds old, marks it IN_PROGRESS, runs ``python -m gahp_boinc.emulator.apps
<app> <args>`` over copies of the inputs (named by the input template's open names) in a
scratch directory, keeps it IN_PROGRESS for at least ``job_delay`` seconds, then stores the
outputs, the stderr in the BOINC client's format, exit status, elapsed and CPU time.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from .apps import APPS, AppSpec, run_inline
from .store import Claim, Store

CORE_CLIENT_VERSION = "7.20.5"
ERR_FILE_MISSING = -161
ERR_FILE_TOO_BIG = -141
_PKG_ROOT = str(Path(__file__).resolve().parents[2])


def split_command_line(line: str) -> list[str]:
    """Split a job's command line into words; single quotes group (BOINC job creator)."""
    args: list[str] = []
    cur: list[str] = []
    quoted = started = False
    for ch in line:
        if ch == "'":
            quoted, started = not quoted, True
        elif ch.isspace() and not quoted:
            if cur or started:
                args.append("".join(cur))
            cur, started = [], False
        else:
            cur.append(ch)
    if cur or started:
        args.append("".join(cur))
    return args


def format_stderr(log: str, exit_code: int) -> str:
    """stderr_out as a BOINC 7 client reports it."""
    message = ""
    if exit_code:
        message = (
            f"<message>\nprocess exited with code {exit_code} "
            f"({exit_code & 0xFFFFFFFF:#x}, {exit_code - 256})</message>\n"
        )
    # the client copies stderr.txt (its last line ends with a newline), then a newline
    text = log + "\n" if log else ""
    return (
        f"\n<core_client_version>{CORE_CLIENT_VERSION}</core_client_version>\n<![CDATA[\n"
        f"{message}<stderr_txt>\n{text}\n</stderr_txt>\n]]>\n"
    )


ERR_GIVEUP_DOWNLOAD = -114
ERR_MD5_FAILED = -119
MAX_REMOTE_BYTES = 64 * 1024 * 1024
"""The largest remote input the emulated volunteer downloads."""


def fetch_remote(entry: dict[str, object], dest: Path) -> tuple[int, str] | None:
    """Download a ``remote`` input as a BOINC client does: its size and MD5 must be those the
    job names, else the instance fails (its exit status and message)."""
    url, md5 = str(entry.get("url", "")), str(entry.get("md5", ""))
    nbytes = int(float(str(entry.get("nbytes") or 0)))
    if not url.startswith(("http://", "https://")) or nbytes > MAX_REMOTE_BYTES:
        return ERR_GIVEUP_DOWNLOAD, f"cannot download {url}"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - http(s) only
            data = resp.read(nbytes + 1)
    except (OSError, ValueError) as exc:
        return ERR_GIVEUP_DOWNLOAD, f"download of {url} failed: {exc}"
    if len(data) != nbytes or hashlib.md5(data).hexdigest() != md5:
        return ERR_MD5_FAILED, f"MD5 check failed for {url}"
    dest.write_bytes(data)
    return None


class Volunteer:
    """Background threads that process UNSENT instances."""

    def __init__(
        self,
        store: Store,
        job_delay: float = 0.5,
        nthreads: int = 2,
        inline: bool = False,
        app_timeout: float = 300.0,
        expire: bool = True,
    ) -> None:
        self.store = store
        self.expire = expire  # cancel the jobs of expired batches (a project's expiry daemon)
        self.job_delay = job_delay
        self.nthreads = max(1, nthreads)
        self.inline = inline
        self.app_timeout = app_timeout
        self._stop = threading.Event()
        self._paused = False
        self._claim_lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._procs_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # -- control --

    def start(self) -> None:
        for i in range(self.nthreads):
            t = threading.Thread(target=self._loop, name=f"volunteer-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._reaper, name="volunteer-reaper", daemon=True)
        t.start()
        self._threads.append(t)

    def pause(self) -> None:
        """No instance is sent after this returns (running ones finish)."""
        with self._claim_lock:
            self._paused = True

    def resume(self) -> None:
        with self._claim_lock:
            self._paused = False

    @property
    def paused(self) -> bool:
        return self._paused

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._procs_lock:
            for p in self._procs:
                p.kill()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    # -- work --

    def _reaper(self) -> None:
        while not self._stop.wait(1.0):
            if not self.expire:
                continue
            try:
                self.store.expire_batches()
            except Exception as e:  # noqa: BLE001 - keep the thread alive, remember why
                self.errors.append(f"reaper: {e!r}")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self._claim_lock:
                    claim = None
                    if not self._paused:
                        claim = self.store.claim(self.store.clock() - self.job_delay)
                if claim is None:
                    self._stop.wait(0.05)
                    continue
                self._process(claim)
            except Exception as e:  # noqa: BLE001
                if self._stop.is_set():
                    return
                self.errors.append(f"volunteer: {e!r}")
                self._stop.wait(0.5)

    def _process(self, claim: Claim) -> None:
        spec = APPS[claim.app_name]
        scratch = self.store.scratch_dir / f"r{claim.result_id}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            failed = self._stage_inputs(spec, claim, scratch)
            args = split_command_line(claim.command_line)
            started = time.monotonic()
            if failed is not None:
                code, log, cpu = failed[0], failed[1], 0.0
            else:
                code, log, cpu = self._execute(claim.app_name, args, scratch)
            elapsed = time.monotonic() - started
            if self._stop.wait(max(0.0, self.job_delay - elapsed)):
                return  # shutting down: the instance is sent again after a restart
            outputs: list[tuple[str, str, str]] = []
            digest = hashlib.sha256()
            if code == 0:
                code, log = self._upload_outputs(spec, claim, scratch, log, outputs, digest)
            self.store.finish(
                claim,
                code,
                round(elapsed, 6),
                round(cpu, 6),
                format_stderr(log, code),
                outputs if code == 0 else [],
                digest.hexdigest(),
                ok=code == 0,
            )
            if spec.collect:
                self._collect(claim.result_id)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _stage_inputs(self, spec: AppSpec, claim: Claim, scratch: Path) -> tuple[int, str] | None:
        """Copy (or download) the job's inputs into ``scratch``; the first failed
        download's exit code and log, or None."""
        failed = None
        for open_name, phys in zip(spec.inputs, claim.inputs, strict=False):
            if phys.startswith("{"):  # a remote file: the volunteer downloads it
                failed = failed or fetch_remote(json.loads(phys), scratch / open_name)
            else:
                shutil.copyfile(self.store.file_path(phys), scratch / open_name)
        return failed

    def _upload_outputs(
        self,
        spec: AppSpec,
        claim: Claim,
        scratch: Path,
        log: str,
        outputs: list[tuple[str, str, str]],
        digest: Any,
    ) -> tuple[int, str]:
        """Move the outputs to the upload directory as the client uploads them, adding
        them to ``outputs`` and ``digest``; the exit code and log (a missing or too
        large file fails the instance)."""
        suffix = secrets.randbelow(2**31)
        for i, open_name in enumerate(spec.outputs):
            src = scratch / open_name
            if not src.is_file():
                return ERR_FILE_MISSING, log + f"\noutput file {open_name} missing"
            if src.stat().st_size > spec.max_nbytes:
                return ERR_FILE_TOO_BIG, (
                    log + f"\noutput file {open_name} larger than {spec.max_nbytes} bytes"
                )
            data = src.read_bytes()
            digest.update(hashlib.sha256(data).digest())
            rel = f"{claim.result_id}_{i}"
            if spec.gzip:  # the client gzips before uploading
                src.write_bytes(gzip.compress(data, mtime=0))
            shutil.move(src, self.store.upload_dir / rel)
            outputs.append((f"{claim.result_name}_r{suffix}_{i}", open_name, rel))
        return 0, log

    def _collect(self, result_id: int) -> None:
        """batch_collect_assimilator: once the job has a canonical instance, move its
        outputs to ``results/<batch id>/<job>__file_<logical name>``."""
        res = self.store.result(result_id)
        if res is None:
            return
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", res["workunit_id"])
        if wu is None or not wu["canonical_resultid"]:
            return
        canonical = self.store.result(wu["canonical_resultid"])
        if canonical is None:
            return
        outdir = self.store.results_dir / str(wu["batch_id"])
        outdir.mkdir(parents=True, exist_ok=True)
        for _phys, logical, rel in json.loads(canonical["output_files"]):
            src = self.store.upload_dir / rel
            if src.is_file():
                os.replace(src, outdir / f"{wu['name']}__file_{logical}")

    def _execute(self, app: str, args: list[str], workdir: Path) -> tuple[int, str, float]:
        """Run the app; return (exit code, combined stdout/stderr, CPU seconds)."""
        if self.inline:
            t0 = time.process_time()
            code, log = run_inline(app, args, workdir)
            return code, log.rstrip("\n"), time.process_time() - t0
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PKG_ROOT, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "gahp_boinc.emulator.apps", app, *args],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        with self._procs_lock:
            self._procs.add(proc)
        timer = threading.Timer(self.app_timeout, proc.kill)
        timer.start()
        cpu = 0.0
        try:
            assert proc.stdout is not None
            out = proc.stdout.read()
            proc.stdout.close()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = usage.ru_utime + usage.ru_stime
            except ChildProcessError:  # reaped by kill(); returncode already set
                proc.wait()
        finally:
            timer.cancel()
            with self._procs_lock:
                self._procs.discard(proc)
        text = io.TextIOWrapper(io.BytesIO(out), encoding="utf-8", errors="replace").read()
        return int(proc.returncode or 0), text.rstrip("\n"), cpu
