"""A status registry: the states of all tracked jobs, kept current by one bulk query.

A GAHP client asks for the status of each of its jobs on its own (HTCondor's gridmanager
sends one ``BLAH_JOB_STATUS`` per job per poll).  Answering each with its own batch-system
command makes the controller's load grow with the number of jobs.  The registry answers them
from one bulk query per ``interval`` for all tracked jobs instead:

* A job is tracked from its submission (:meth:`StatusRegistry.track`) or its first status
  request.  Tracked jobs and their last known states are kept in a journal in the driver's
  state directory, so a restarted server keeps them.
* The refresh is lazy (the first request after ``interval`` runs it) and single-flight: any
  number of concurrent requests cause one bulk query; the others wait for its result.
* Never a wrong answer: a finished job's state is final (its exit code exact); a job the
  latest bulk query did not describe (unknown, just submitted, or changed by the server
  itself: :meth:`StatusRegistry.invalidate`) is queried directly.
* When the bulk query fails (batch system down), the last known state is answered for up to
  ``stale_limit`` seconds after it was last seen true; after that, the outage is an error.

The bulk query is any coroutine function ``ids -> {id: JobInfo}`` describing the ids it can
(those it leaves out are queried directly): Slurm's ``squeue`` (run in a worker thread by
:class:`~gahp_lrms.base.ThreadedDriver`), Grid Engine's ``qstat -xml``, or a BOINC project's
``query_batch2`` (one per project, naming every batch with jobs tracked).

A registry belongs to one event loop (the server's) and is used from it alone: no thread
locks. The refresh under way is one task whose result every request waiting for it awaits;
the journal is written by one writer task, in a worker thread, under the journal's lock
file (which nobody else in the process holds): no request waits for the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from gahp_core import open_private, private_dir, write_private
from gahp_lrms.config import DEFAULT_INTERVAL, DEFAULT_STALE_LIMIT, RegistryConfig
from gahp_lrms.model import DriverError, JobInfo, JobStatus

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_STALE_LIMIT",
    "BulkQuery",
    "DirectQuery",
    "DriverRegistry",
    "RegistryStats",
    "StatusRegistry",
    "info_from_json",
    "info_to_json",
]

log = logging.getLogger("gahp.lrms.registry")

DEFAULT_KEEP_FINISHED = 7 * 86400.0
"""Seconds a finished job's final state is kept after it was first seen finished."""

BulkQuery = Callable[[Sequence[str]], Awaitable[Mapping[str, JobInfo]]]
DirectQuery = Callable[[str], Awaitable[JobInfo]]

if TYPE_CHECKING:
    from gahp_lrms.base import BlockingDriver


def info_to_json(info: JobInfo) -> dict[str, Any]:
    """``info`` as a JSON object (fields that are None left out)."""
    data = {k: v for k, v in attrs.asdict(info).items() if v is not None}
    data["status"] = int(info.status)
    return data


def info_from_json(data: Mapping[str, Any]) -> JobInfo:
    """The inverse of :func:`info_to_json`."""
    fields = {f.name for f in attrs.fields(JobInfo)}
    values = {k: v for k, v in data.items() if k in fields}
    values["status"] = JobStatus(int(values["status"]))
    return JobInfo(**values)


@attrs.define
class _Entry:
    info: JobInfo | None = None
    seen: float = 0.0  # wall-clock time the state was last known true
    generation: int = -1  # the refresh that described it (-1: none, or stale)
    dirty: bool = False  # changed by the server: query directly next time
    saved: float = 0.0  # the ``seen`` last written to the journal


def _same_state(a: JobInfo | None, b: JobInfo) -> bool:
    """Equal but for the time the job has run (which changes at every query)."""
    return a is not None and attrs.evolve(a, wallclock_s=None) == attrs.evolve(b, wallclock_s=None)


@attrs.define
class RegistryStats:
    """Counters, for logs and benchmarks."""

    refreshes: int = 0
    refresh_failures: int = 0
    direct_queries: int = 0
    stale_answers: int = 0
    cached_answers: int = 0


class StatusRegistry:
    """Job states from one bulk query per ``interval`` (see the module documentation).

    ``journal`` is the file tracked jobs are kept in (None: not kept): a job's line is written
    when its state changes, else at most every ``persist_every`` seconds (default: a tenth of
    ``stale_limit``, at most 60).  ``clock`` gives wall-clock seconds (tests pass a fake
    one).  Used from one event loop (see the module documentation)."""

    def __init__(
        self,
        bulk: BulkQuery,
        direct: DirectQuery,
        *,
        journal: Path | None = None,
        interval: float = DEFAULT_INTERVAL,
        stale_limit: float = DEFAULT_STALE_LIMIT,
        keep_finished: float = DEFAULT_KEEP_FINISHED,
        clock: Callable[[], float] = time.time,
        name: str = "batch system",
        persist_every: float | None = None,
    ) -> None:
        self.bulk = bulk
        self.direct = direct
        self.journal = Path(journal) if journal is not None else None
        self.interval = float(interval)
        self.stale_limit = float(stale_limit)
        self.keep_finished = float(keep_finished)
        self.persist_every = (
            min(60.0, self.stale_limit / 10) if persist_every is None else float(persist_every)
        )
        self.clock = clock
        self.name = name
        self.stats = RegistryStats()
        self._entries: dict[str, _Entry] = {}
        self._refresh: asyncio.Task[None] | None = None  # the bulk query under way
        self._generation = 0  # of the latest successful refresh
        self._last_attempt: float | None = None  # wall-clock start of the latest refresh
        self._last_error: str | None = None  # of the latest refresh, None when it worked
        self._journal_lines = 0  # the journal writer's
        self._pending: list[str] = []  # journal lines not yet handed to the writer
        self._writer: asyncio.Task[None] | None = None  # the one task writing the journal
        self._load()

    # ------------------------------------------------------------------ public API
    def track(self, native_id: str, info: JobInfo | None = None) -> None:
        """Start tracking a job just submitted; its first status is bulk or direct.

        Whatever was known of an earlier job with the same id is forgotten: batch systems
        reuse ids (Slurm and Grid Engine wrap around, a reinstalled cell starts again at 1),
        and the batch system has just given this id to a new job."""
        entry = _Entry(info, self.clock() if info else 0.0)
        self._entries[native_id] = entry
        self._append([(native_id, entry)])

    def invalidate(self, native_id: str) -> None:
        """The server changed the job (cancel, hold, resume): query it directly next time."""
        entry = self._entries.get(native_id)
        if entry is not None and not (entry.info and entry.info.finished):
            entry.dirty = True

    def forget(self, native_id: str) -> None:
        """Stop tracking a job (the server will not ask about it again)."""
        if self._entries.pop(native_id, None) is not None:
            self._append_drop(native_id)

    def tracked(self) -> list[str]:
        """The ids of the tracked jobs."""
        return list(self._entries)

    async def status(self, native_id: str) -> JobInfo:
        """The job's state: final, from the latest bulk query, or queried directly; during an
        outage, the last known state (within ``stale_limit``)."""
        entry = self._entries.get(native_id)
        if entry is not None and entry.info is not None and entry.info.finished:
            self.stats.cached_answers += 1
            return entry.info
        if entry is None or not entry.dirty:
            await self._fresh()
            entry = self._entries.get(native_id)
            if entry is not None and entry.info is not None and not entry.dirty:
                if entry.generation == self._generation and self._last_error is None:
                    self.stats.cached_answers += 1
                    return entry.info
                if self._last_error is not None:
                    return self._stale(native_id, entry)
        return await self._direct(native_id)

    async def refresh(self) -> None:
        """Run a bulk query now (or wait for the one under way)."""
        await self._fresh(force=True)

    async def flush(self) -> None:
        """Wait until every change so far is in the journal."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    async def aclose(self) -> None:
        """Cancel the bulk query under way (the server stops); write what is left."""
        task, self._refresh = self._refresh, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()

    # ------------------------------------------------------------------ internals
    async def _fresh(self, force: bool = False) -> None:
        """Make the data at most ``interval`` old: join the refresh under way, or start one
        when due.  A failing batch system is retried once per ``interval``; meanwhile
        requests do not wait for the retry."""
        task = self._refresh
        if task is None:
            now = self.clock()
            if (
                not force
                and self._last_attempt is not None
                and now - self._last_attempt < self.interval
            ):
                return
            ids = [i for i, e in self._entries.items() if not (e.info and e.info.finished)]
            self._last_attempt = now
            if not ids:
                self._generation += 1
                self._last_error = None
                return
            task = self._refresh = asyncio.ensure_future(self._run_refresh(ids, now))
        elif self._last_error is not None:
            return  # the batch system failed the last one: answer from what is known
        await asyncio.shield(task)  # a waiter cancelled does not cancel the others' query

    async def _run_refresh(self, ids: Sequence[str], started: float) -> None:
        """The bulk query of ``ids``, its outcome merged (the one task that writes it)."""
        try:
            found, error = await self.bulk(ids), None
        except DriverError as exc:
            found, error = {}, str(exc)
        except Exception as exc:  # a broken parser must not wedge every request
            log.exception("bulk status query failed")
            found, error = {}, f"bulk status query failed: {type(exc).__name__}: {exc}"
        finally:
            self._refresh = None
        if error is None:
            self._merge(ids, found, started)
        else:
            self._failed(error)

    def _failed(self, error: str) -> None:
        self.stats.refresh_failures += 1
        if self._last_error is None:
            log.warning("%s status query failed: %s", self.name, error)
        self._last_error = error

    def _merge(self, ids: Sequence[str], found: Mapping[str, JobInfo], started: float) -> None:
        """Take the states of a bulk query that ``started`` then."""
        self.stats.refreshes += 1
        self._generation += 1
        self._last_error = None
        changed = []
        for native_id, info in found.items():
            entry = self._entries.get(native_id)
            if entry is None or entry.dirty:
                continue  # forgotten, or changed by the server during the query
            if (entry.info is not None and entry.info.finished) or entry.seen > started:
                entry.generation = self._generation  # a direct query after this one's start
                continue
            if not _same_state(entry.info, info) or started - entry.saved >= self.persist_every:
                changed.append((native_id, entry))
            entry.info, entry.seen, entry.generation = info, started, self._generation
        self._append(changed)
        log.debug(
            "%s bulk status: %d jobs, %d described, %d changed",
            self.name,
            len(ids),
            len(found),
            len(changed),
        )

    def _stale(self, native_id: str, entry: _Entry) -> JobInfo:
        assert entry.info is not None
        age = self.clock() - entry.seen
        if age <= self.stale_limit:
            self.stats.stale_answers += 1
            return entry.info
        raise DriverError(
            f"{self.name} has not answered for {age:.0f} s (job {native_id}'s state is "
            f"older than the {self.stale_limit:g} s limit): {self._last_error}"
        )

    async def _direct(self, native_id: str) -> JobInfo:
        started = self.clock()
        self.stats.direct_queries += 1
        info = await self.direct(native_id)  # raises DriverError when the system is down
        entry = self._entries.get(native_id)
        if entry is None:
            entry = self._entries[native_id] = _Entry()
        changed = not _same_state(entry.info, info) or started - entry.saved >= self.persist_every
        entry.info, entry.seen, entry.dirty = info, started, False
        # Current until the next refresh, as if the latest one had described it.
        entry.generation = self._generation if self._last_error is None else -1
        if changed:
            self._append([(native_id, entry)])
        return info

    # ------------------------------------------------------------------ the journal
    @contextlib.contextmanager
    def _journal_lock(self) -> Iterator[None]:
        """Hold the journal's lock file (``<journal>.lock``) exclusively: the journal may be
        shared by blahpd processes on several login nodes of one home.  ``flock``, which
        Linux's NFS client carries out as a POSIX lock on the server; without a lock file
        (cannot be made) the journal is written unlocked, as before."""
        assert self.journal is not None
        lock = self.journal.with_name(self.journal.name + ".lock")
        try:
            private_dir(self.journal.parent)
            fd = open_private(lock, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            log.warning("cannot open the status journal's lock %s: %s", lock, exc)
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _replay(self) -> tuple[dict[str, _Entry], int] | None:
        """The journal's jobs (the last line of each, drops applied) and its line count;
        None when it cannot be read.  Lines cut short by a crash are skipped."""
        assert self.journal is not None
        try:
            with os.fdopen(open_private(self.journal), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except FileNotFoundError:
            return {}, 0
        except OSError as exc:
            log.warning("cannot read the status journal %s: %s", self.journal, exc)
            return None
        entries: dict[str, _Entry] = {}
        lines = 0
        for line in text.splitlines():
            lines += 1
            try:
                record = json.loads(line)
                native_id = str(record["id"])
                if record.get("drop"):
                    entries.pop(native_id, None)
                    continue
                info = info_from_json(record["info"]) if record.get("info") else None
                seen = float(record.get("seen", 0.0))
            except (ValueError, KeyError, TypeError):
                continue
            entries[native_id] = _Entry(info, seen, saved=seen)
        return entries, lines

    def _load(self) -> None:
        if self.journal is None:
            return
        with self._journal_lock():
            found = self._replay()
            if found is None:
                return
            self._entries.update(found[0])
            self._journal_lines = found[1]
            self._prune()
            self._rewrite()

    def _append(self, changes: Sequence[tuple[str, _Entry]]) -> None:
        if self.journal is None:
            return
        lines = [
            json.dumps(
                {
                    "id": native_id,
                    "info": info_to_json(e.info) if e.info else None,
                    "seen": e.seen,
                },
                separators=(",", ":"),
            )
            + "\n"
            for native_id, e in changes
        ]
        if not lines:
            return
        for _native_id, e in changes:
            e.saved = e.seen
        self._write(lines)

    def _append_drop(self, native_id: str) -> None:
        if self.journal is not None:
            self._write([json.dumps({"id": native_id, "drop": True}) + "\n"])

    def _write(self, lines: Sequence[str]) -> None:
        """Hand ``lines`` to the journal's writer: a task that appends them in a worker
        thread, off the loop (the journal's lock may wait for another process). Without
        a running loop (a tool, a test), they are written now."""
        self._pending.extend(lines)
        if self._writer is not None and not self._writer.done():
            return  # the writer takes them next
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._flush(*self._take())
            return
        self._writer = loop.create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.to_thread(self._flush, *self._take())

    def _take(self) -> tuple[list[str], int]:
        """The pending lines, and the journal length past which the writer compacts it
        (when that is near, finished jobs ``keep_finished`` old are forgotten first)."""
        lines, self._pending = self._pending, []
        limit = 2 * len(self._entries) + 1000
        if self._journal_lines + len(lines) > limit:
            self._prune()
            limit = 2 * len(self._entries) + 1000
        return lines, limit

    def _flush(self, lines: Sequence[str], limit: int) -> None:
        """Append ``lines`` to the journal; rewrite it when it is longer than ``limit``
        lines. The writer's alone (its thread, or the caller's without a loop)."""
        assert self.journal is not None
        with self._journal_lock():
            try:
                private_dir(self.journal.parent)
                fd = open_private(self.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                with os.fdopen(fd, "a") as fh:
                    fh.write("".join(lines))
            except OSError as exc:
                log.warning("cannot write the status journal %s: %s", self.journal, exc)
                return
            self._journal_lines += len(lines)
            if self._journal_lines > limit:
                self._rewrite()

    def _old(self, e: _Entry, now: float) -> bool:
        """Whether the job finished ``keep_finished`` ago (forgotten)."""
        return e.info is not None and e.info.finished and now - e.seen > self.keep_finished

    def _prune(self) -> None:
        """Forget (in memory) the jobs finished ``keep_finished`` ago."""
        now = self.clock()
        for native_id in [i for i, e in self._entries.items() if self._old(e, now)]:
            del self._entries[native_id]

    def _rewrite(self) -> None:
        """Rewrite the journal with one line per job, but those finished ``keep_finished``
        ago (the journal lock held).  The journal is read again first: other processes
        sharing it have written their jobs there, which are kept."""
        assert self.journal is not None
        now = self.clock()
        found = self._replay()
        if found is None:
            return
        # Every change of this process is in the journal already (appended under the lock),
        # as are those of the others: the journal, not this process's memory, is rewritten, so
        # a job another process forgot meanwhile does not come back.
        keep = {i: e for i, e in found[0].items() if not self._old(e, now)}
        lines = []
        for native_id, e in keep.items():
            record = {
                "id": native_id,
                "info": info_to_json(e.info) if e.info else None,
                "seen": e.seen,
            }
            lines.append(json.dumps(record, separators=(",", ":")) + "\n")
        try:
            # a new file of a random name, renamed over the journal (write_private)
            write_private(self.journal, "".join(lines).encode(), durable=False)
        except OSError as exc:
            log.warning("cannot rewrite the status journal %s: %s", self.journal, exc)
            return
        self._journal_lines = len(keep)


class DriverRegistry:
    """The status of one driver's jobs: from a :class:`StatusRegistry` (built on first use
    from the driver's ``bulk`` and ``direct`` queries, its journal ``journal``) when
    ``settings`` enable it and there is a ``bulk`` query, else from ``direct`` for each
    job. The options: :class:`~gahp_lrms.config.RegistryConfig` (``status_registry``,
    default true; ``status_interval``, s, default 5; ``stale_limit_s``, s, default 1800).
    Used from one event loop."""

    def __init__(
        self,
        settings: RegistryConfig | None,
        name: str,
        journal: Path,
        bulk: BulkQuery | None,
        direct: DirectQuery,
    ) -> None:
        self.interval = settings.status_interval if settings else DEFAULT_INTERVAL
        self.stale_limit = settings.stale_limit_s if settings else DEFAULT_STALE_LIMIT
        self.enabled = bool(settings and settings.status_registry and bulk is not None)
        """Whether status comes from the registry (false: each job is asked on its own)."""
        self.name = name
        self.journal = journal
        self._bulk = bulk
        self._direct = direct
        self._registry: StatusRegistry | None = None

    @classmethod
    def of(cls, driver: BlockingDriver, bulk: BulkQuery, direct: DirectQuery) -> DriverRegistry:
        """The registry of a blocking driver, as its ``features`` and options declare:
        ``bulk`` used when it declares ``bulk_status``; the journal in its ``state_dir``."""
        settings = driver.settings if isinstance(driver.settings, RegistryConfig) else None
        return cls(
            settings,
            getattr(driver, "system", "") or driver.name,
            driver.state_dir / "status-registry.jsonl",
            bulk if driver.features.bulk_status else None,
            direct,
        )

    @property
    def registry(self) -> StatusRegistry | None:
        """The status registry (built on first use), or None when status is per job."""
        if not self.enabled or self._bulk is None:
            return None
        if self._registry is None:
            self._registry = StatusRegistry(
                self._bulk,
                self._direct,
                journal=self.journal,
                interval=self.interval,
                stale_limit=self.stale_limit,
                name=self.name,
            )
        return self._registry

    async def status(self, native_id: str) -> JobInfo:
        """The job's state from the registry, else asked directly."""
        registry = self.registry
        if registry is None:
            return await self._direct(native_id)
        return await registry.status(native_id)

    def track(self, native_id: str) -> None:
        """A new job: its first status can come from the next bulk query."""
        registry = self.registry
        if registry is not None:
            registry.track(native_id)

    def invalidate(self, native_id: str) -> None:
        """The server changed the job: its next status is asked directly."""
        registry = self.registry
        if registry is not None:
            registry.invalidate(native_id)

    def forget(self, native_id: str) -> None:
        """Drop the job from the registry (if one was built)."""
        if self._registry is not None:
            self._registry.forget(native_id)

    def limit_interval(self, seconds: float) -> None:
        """Keep states at most ``seconds`` old (never lengthens the interval)."""
        if seconds <= 0:
            return
        self.interval = min(self.interval, seconds)
        if self._registry is not None:
            self._registry.interval = min(self._registry.interval, seconds)

    async def flush(self) -> None:
        """Wait until every change so far is in the journal."""
        if self._registry is not None:
            await self._registry.flush()

    async def aclose(self) -> None:
        """Cancel the bulk query under way (the server stops); write what is left."""
        if self._registry is not None:
            await self._registry.aclose()
