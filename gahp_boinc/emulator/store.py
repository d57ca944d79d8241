"""Persistent state of the emulated project: an SQLite database plus file directories.

The tables mirror BOINC's (user, app, batch, job_file, batch_file_assoc, workunit, result),
with a denormalised ``workunit.status`` (UNSENT, IN_PROGRESS, DONE, ERROR) kept up to date so
that ``query_batch2`` over 100,000 jobs is a single indexed scan. Staged input files live in
``<state_dir>/download/<physical name>``, outputs in ``<state_dir>/upload/``.
One connection guarded by a re-entrant lock; every write is committed at once.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from .apps import APPS

# BOINC constants
BATCH_INIT, BATCH_IN_PROGRESS, BATCH_COMPLETE, BATCH_ABORTED, BATCH_RETIRED = 0, 1, 2, 3, 4
UNSENT, IN_PROGRESS, OVER = 2, 4, 5  # result.server_state
SUCCESS, CLIENT_ERROR, DIDNT_NEED = 1, 3, 5  # result.outcome
WU_TOO_MANY_TOTAL, WU_CANCELLED = 8, 16  # workunit.error_mask bits
EXIT_ABORTED_BY_PROJECT = 202  # result.exit_status of an instance the project aborted
#: the simulated volunteer host's memory and free disk (bytes)
HOST_MEMORY, HOST_DISK = 16e9, 1e12
#: credit granted per elapsed second: 200 cobblestones a day per GFLOPS, a 4.3 GFLOPS host
CREDIT_PER_SECOND = 200 / 86400 * 4.3

SCHEMA = """
CREATE TABLE IF NOT EXISTS user (
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, authenticator TEXT UNIQUE NOT NULL,
    submit INTEGER NOT NULL, is_default INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS app (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS batch (
    id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, app_id INTEGER NOT NULL,
    name TEXT NOT NULL, state INTEGER NOT NULL, create_time INTEGER NOT NULL,
    expire_time REAL NOT NULL DEFAULT 0, completion_time REAL NOT NULL DEFAULT 0,
    njobs INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS batch_name ON batch(name);
CREATE TABLE IF NOT EXISTS job_file (
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, md5 TEXT NOT NULL, size INTEGER NOT NULL,
    create_time INTEGER NOT NULL, delete_time INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS batch_file_assoc (
    batch_id INTEGER NOT NULL, job_file_id INTEGER NOT NULL, PRIMARY KEY (batch_id, job_file_id));
CREATE TABLE IF NOT EXISTS workunit (
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, batch_id INTEGER NOT NULL,
    app_id INTEGER NOT NULL, command_line TEXT NOT NULL, input_files TEXT NOT NULL,
    create_time REAL NOT NULL, mod_time REAL NOT NULL, status TEXT NOT NULL,
    error_mask INTEGER NOT NULL DEFAULT 0, canonical_resultid INTEGER NOT NULL DEFAULT 0,
    min_quorum INTEGER NOT NULL, target_nresults INTEGER NOT NULL, job_params TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS wu_batch_mod ON workunit(batch_id, mod_time);
CREATE INDEX IF NOT EXISTS wu_batch_status ON workunit(batch_id, status);
CREATE TABLE IF NOT EXISTS result (
    id INTEGER PRIMARY KEY, workunit_id INTEGER NOT NULL, name TEXT NOT NULL,
    server_state INTEGER NOT NULL, outcome INTEGER NOT NULL DEFAULT 0,
    exit_status INTEGER NOT NULL DEFAULT 0, elapsed_time REAL NOT NULL DEFAULT 0,
    cpu_time REAL NOT NULL DEFAULT 0, stderr_out TEXT NOT NULL DEFAULT '',
    create_time REAL NOT NULL, sent_time REAL NOT NULL DEFAULT 0,
    received_time REAL NOT NULL DEFAULT 0, output_files TEXT NOT NULL DEFAULT '[]',
    output_hash TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS result_wu ON result(workunit_id);
CREATE INDEX IF NOT EXISTS result_state ON result(server_state, id);
"""


@attrs.frozen
class NewJob:
    """A job of a submit_batch request."""

    name: str
    command_line: str
    inputs: tuple[str, ...]
    min_quorum: int = 0  # from the job's own input template (0: the project's)
    target_nresults: int = 0


@attrs.frozen
class Claim:
    """An instance handed to a volunteer."""

    result_id: int
    result_name: str
    wu_id: int
    wu_name: str
    app_name: str
    command_line: str
    inputs: tuple[str, ...]


class Store:
    """All persistent state; thread-safe."""

    def __init__(
        self,
        state_dir: Path,
        mod_time_resolution: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dir = Path(state_dir)
        self.download_dir = self.dir / "download"
        self.upload_dir = self.dir / "upload"
        self.scratch_dir = self.dir / "scratch"
        self.results_dir = self.dir / "results"  # the batch-collect assimilator's
        for d in (self.download_dir, self.upload_dir, self.scratch_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.resolution = mod_time_resolution
        self.lock = threading.RLock()
        self.db = sqlite3.connect(
            self.dir / "project.sqlite", check_same_thread=False, isolation_level=None
        )
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        with self.tx():
            self.db.executemany("INSERT OR IGNORE INTO app(name) VALUES (?)", [(n,) for n in APPS])
            # instances that were running when the emulator stopped are sent again
            wus = [
                r[0]
                for r in self.db.execute(
                    "SELECT DISTINCT workunit_id FROM result WHERE server_state=?", (IN_PROGRESS,)
                )
            ]
            self.db.execute(
                "UPDATE result SET server_state=?, sent_time=0 WHERE server_state=?",
                (UNSENT, IN_PROGRESS),
            )
            for wu in wus:
                self._refresh(wu)

    # -- plumbing --

    @contextlib.contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A transaction under the store lock."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        with self.lock:
            return self.db.execute(sql, args).fetchone()

    def all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        with self.lock:
            return self.db.execute(sql, args).fetchall()

    def mod_time(self) -> float:
        now = self.clock()
        return now - now % self.resolution if self.resolution > 0 else now

    def close(self) -> None:
        with self.lock:
            self.db.close()

    # -- users and apps --

    def add_user(
        self, name: str, submit: bool, is_default: bool = False, authenticator: str | None = None
    ) -> str:
        """Create or update a user; ``authenticator`` (default: random) sets its key."""
        with self.tx() as db:
            row = db.execute("SELECT authenticator FROM user WHERE name=?", (name,)).fetchone()
            if row:
                auth = authenticator or str(row[0])
                db.execute(
                    "UPDATE user SET submit=?, authenticator=? WHERE name=?",
                    (int(submit), auth, name),
                )
                return auth
            auth = authenticator or secrets.token_hex(16)
            db.execute(
                "INSERT INTO user(name, authenticator, submit, is_default) VALUES (?,?,?,?)",
                (name, auth, int(submit), int(is_default)),
            )
            return auth

    def default_authenticator(self) -> str:
        row = self.one("SELECT authenticator FROM user WHERE is_default=1 ORDER BY id LIMIT 1")
        if row:
            return str(row[0])
        return self.add_user("emulator_user", submit=True, is_default=True)

    def user_by_auth(self, auth: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM user WHERE authenticator=?", auth)

    def app_by_name(self, name: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM app WHERE name=?", name)

    # -- batches --

    def create_batch(self, user_id: int, app_id: int, name: str, expire_time: float) -> int:
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO batch(user_id, app_id, name, state, create_time, expire_time)"
                " VALUES (?,?,?,?,?,?)",
                (user_id, app_id, name, BATCH_INIT, int(self.clock()), expire_time),
            )
            return int(cur.lastrowid or 0)

    def batch(self, batch_id: int) -> sqlite3.Row | None:
        return self.one(
            "SELECT b.*, a.name AS app_name FROM batch b JOIN app a ON a.id=b.app_id WHERE b.id=?",
            batch_id,
        )

    def batch_by_name(self, name: str, user_id: int | None = None) -> sqlite3.Row | None:
        if user_id is None:
            return self.one(
                "SELECT b.*, a.name AS app_name FROM batch b JOIN app a ON a.id=b.app_id"
                " WHERE b.name=? ORDER BY b.id LIMIT 1",
                name,
            )
        return self.one(
            "SELECT b.*, a.name AS app_name FROM batch b JOIN app a ON a.id=b.app_id"
            " WHERE b.name=? AND b.user_id=? ORDER BY b.id LIMIT 1",
            name,
            user_id,
        )

    def batch_summary(self, batch: sqlite3.Row, cpu: bool) -> dict[str, Any]:
        """A batch row with the values print_batch_params() computes."""
        d = dict(batch)
        with self.lock:
            counts = dict(
                self.db.execute(
                    "SELECT status, COUNT(*) FROM workunit WHERE batch_id=? GROUP BY status",
                    (batch["id"],),
                ).fetchall()
            )
            d["total_cpu_time"] = 0.0
            if cpu:
                d["total_cpu_time"] = self.db.execute(
                    "SELECT COALESCE(SUM(r.cpu_time), 0) FROM result r JOIN workunit w"
                    " ON w.id=r.workunit_id WHERE w.batch_id=?",
                    (batch["id"],),
                ).fetchone()[0]
            d["credit_canonical"] = (
                CREDIT_PER_SECOND
                * self.db.execute(
                    "SELECT COALESCE(SUM(r.elapsed_time), 0) FROM workunit w JOIN result r"
                    " ON r.id=w.canonical_resultid WHERE w.batch_id=?",
                    (batch["id"],),
                ).fetchone()[0]
            )
        finished = counts.get("DONE", 0) + counts.get("ERROR", 0)
        d["nerror_jobs"] = counts.get("ERROR", 0)
        d["fraction_done"] = finished / d["njobs"] if d["njobs"] else 0
        return d

    def user_batches(self, user_id: int) -> list[sqlite3.Row]:
        return self.all(
            "SELECT b.*, a.name AS app_name FROM batch b JOIN app a ON a.id=b.app_id"
            " WHERE b.user_id=? AND b.state<>? ORDER BY b.id",
            user_id,
            BATCH_RETIRED,
        )

    def set_expire_time(self, batch_id: int, expire_time: float) -> None:
        with self.tx() as db:
            db.execute("UPDATE batch SET expire_time=? WHERE id=?", (expire_time, batch_id))

    def retire_batch(self, batch_id: int) -> None:
        """retire_batch(): the batch-collect outputs (results/<batch id>/) are deleted, the
        batch is retired and its unsent jobs cancelled; jobs a volunteer is running go on."""
        shutil.rmtree(self.results_dir / str(batch_id), ignore_errors=True)
        with self.tx() as db:
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT id FROM workunit WHERE batch_id=? AND status='UNSENT'", (batch_id,)
                )
            ]
            for wu in ids:
                self._cancel(wu)
            db.execute("UPDATE batch SET state=? WHERE id=?", (BATCH_RETIRED, batch_id))

    def abort_batch(self, batch_id: int) -> None:
        """abort_batch(): cancel every job of the batch; the batch is aborted."""
        with self.tx() as db:
            ids = [
                r[0] for r in db.execute("SELECT id FROM workunit WHERE batch_id=?", (batch_id,))
            ]
            for wu in ids:
                self._cancel(wu)
            db.execute(
                "UPDATE batch SET state=?, completion_time=? WHERE id=?",
                (BATCH_ABORTED, int(self.clock()), batch_id),
            )

    def expire_batches(self) -> int:
        """BOINC master's html/ops/expire_batches: every batch past its expire_time is
        aborted, then retired; the number of batches."""
        now = self.clock()
        with self.lock:
            ids = [
                r[0]
                for r in self.db.execute(
                    "SELECT id FROM batch WHERE expire_time>0 AND expire_time<? AND state<>?",
                    (now, BATCH_RETIRED),
                )
            ]
            for b in ids:
                self.abort_batch(b)
                self.retire_batch(b)
            return len(ids)

    # -- files --

    def job_file(self, name: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM job_file WHERE name=?", name)

    def file_path(self, name: str) -> Path:
        return self.download_dir / name

    def insert_job_file(self, name: str, md5: str, size: int, delete_time: int) -> int:
        """Raises sqlite3.IntegrityError when the name exists (a PHP 8 crash on the server)."""
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO job_file(name, md5, size, create_time, delete_time)"
                " VALUES (?,?,?,?,?)",
                (name, md5, size, int(self.clock()), delete_time),
            )
            return int(cur.lastrowid or 0)

    def delete_job_file(self, jf_id: int) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM job_file WHERE id=?", (jf_id,))

    def associate(self, batch_id: int, jf_id: int) -> None:
        """Raises sqlite3.IntegrityError on a duplicate association (HTTP 500 on PHP 8)."""
        with self.tx() as db:
            db.execute("INSERT INTO batch_file_assoc VALUES (?,?)", (batch_id, jf_id))

    # -- jobs --

    def existing_job_names(self, names: Sequence[str]) -> list[str]:
        found: list[str] = []
        with self.lock:
            for i in range(0, len(names), 500):
                chunk = names[i : i + 500]
                found += [
                    r[0]
                    for r in self.db.execute(
                        f"SELECT name FROM workunit WHERE name IN ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                ]
        return found

    def submit(
        self,
        batch_id: int,
        app_id: int,
        jobs: Sequence[NewJob],
        quorum: int,
        job_params: dict[str, float],
    ) -> None:
        now = self.clock()
        mod = self.mod_time()
        params = json.dumps(job_params)
        with self.tx() as db:
            db.executemany(
                "INSERT INTO workunit(name, batch_id, app_id, command_line, input_files,"
                " create_time, mod_time, status, min_quorum, target_nresults, job_params)"
                " VALUES (?,?,?,?,?,?,?,'UNSENT',?,?,?)",
                [
                    (
                        j.name,
                        batch_id,
                        app_id,
                        j.command_line,
                        json.dumps(j.inputs),
                        now,
                        mod,
                        j.min_quorum or quorum,
                        j.target_nresults or j.min_quorum or quorum,
                        params,
                    )
                    for j in jobs
                ],
            )
            rows = db.execute(
                "SELECT id, name, target_nresults FROM workunit WHERE batch_id=? ORDER BY id",
                (batch_id,),
            ).fetchall()
            db.executemany(
                "INSERT INTO result(workunit_id, name, server_state, create_time) VALUES (?,?,?,?)",
                [(r[0], f"{r[1]}_{k}", UNSENT, now) for r in rows for k in range(r[2])],
            )
            db.execute(
                "UPDATE batch SET njobs=?, state=? WHERE id=?",
                (len(rows), BATCH_IN_PROGRESS, batch_id),
            )

    def wu_by_name(self, name: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM workunit WHERE name=?", name)

    def batch_jobs(self, batch_id: int, min_mod_time: float = 0) -> list[tuple[str, str]]:
        with self.lock:
            if min_mod_time:
                cur = self.db.execute(
                    "SELECT name, status FROM workunit WHERE batch_id=? AND mod_time>? ORDER BY id",
                    (batch_id, min_mod_time),
                )
            else:
                cur = self.db.execute(
                    "SELECT name, status FROM workunit WHERE batch_id=? ORDER BY id", (batch_id,)
                )
            return cur.fetchall()

    def job_details(self, batch_id: int) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in self.all(
                "SELECT w.id, w.name, w.canonical_resultid, w.error_mask, w.status,"
                " COALESCE(c.cpu_time, 0) AS cpu_time,"
                " (SELECT e.exit_status FROM result e WHERE e.workunit_id=w.id AND e.outcome=?"
                "  ORDER BY e.id LIMIT 1) AS exit_status"
                " FROM workunit w LEFT JOIN result c ON c.id=w.canonical_resultid"
                " WHERE w.batch_id=? ORDER BY w.id",
                CLIENT_ERROR,
                batch_id,
            )
        ]

    def result(self, result_id: int) -> sqlite3.Row | None:
        return self.one("SELECT * FROM result WHERE id=?", result_id)

    def result_by_name(self, name: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM result WHERE name=?", name)

    def owner_of_wu(self, wu: sqlite3.Row) -> sqlite3.Row | None:
        return self.one(
            "SELECT u.* FROM user u JOIN batch b ON b.user_id=u.id WHERE b.id=?", wu["batch_id"]
        )

    def abort(self, wu_ids: Sequence[int]) -> None:
        with self.tx():
            batches = {self._cancel(wu) for wu in wu_ids}
            for b in batches:
                self._maybe_complete(b)

    def job_counts(self) -> list[tuple[str, int]]:
        """server_status.php's counts (the daemons' backlogs are always empty here)."""

        def count(state: int) -> int:
            row = self.one("SELECT COUNT(*) FROM result WHERE server_state=?", state)
            return int(row[0]) if row else 0

        return [
            ("results_ready_to_send", count(UNSENT)),
            ("results_in_progress", count(IN_PROGRESS)),
            ("results_need_file_delete", 0),
            ("wus_need_validate", 0),
            ("wus_need_assimilate", 0),
            ("wus_need_file_delete", 0),
        ]

    def count_active(self) -> int:
        row = self.one("SELECT COUNT(*) FROM workunit WHERE status IN ('UNSENT','IN_PROGRESS')")
        return int(row[0]) if row else 0

    # -- volunteer side --

    def claim(self, unsent_before: float) -> Claim | None:
        """Mark the oldest sendable instance IN_PROGRESS and return it. As BOINC's scheduler,
        never send a job whose memory or disk bound exceeds what the volunteer host has."""
        with self.tx() as db:
            row = db.execute(
                "SELECT r.id, r.name, w.id AS wu_id, w.name AS wu_name, a.name AS app_name,"
                " w.command_line, w.input_files FROM result r"
                " JOIN workunit w ON w.id=r.workunit_id JOIN app a ON a.id=w.app_id"
                " WHERE r.server_state=? AND w.create_time<=?"
                " AND COALESCE(json_extract(w.job_params, '$.rsc_memory_bound'), 0) <= ?"
                " AND COALESCE(json_extract(w.job_params, '$.rsc_disk_bound'), 0) <= ?"
                " ORDER BY r.id LIMIT 1",
                (UNSENT, unsent_before, HOST_MEMORY, HOST_DISK),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE result SET server_state=?, sent_time=? WHERE id=?",
                (IN_PROGRESS, self.clock(), row["id"]),
            )
            self._refresh(row["wu_id"])
            return Claim(
                row["id"],
                row["name"],
                row["wu_id"],
                row["wu_name"],
                row["app_name"],
                row["command_line"],
                tuple(json.loads(row["input_files"])),
            )

    def finish(
        self,
        claim: Claim,
        exit_status: int,
        elapsed: float,
        cpu: float,
        stderr_out: str,
        outputs: Sequence[tuple[str, str, str]],
        output_hash: str,
        ok: bool,
    ) -> None:
        """Record a returned instance and run the validator/transitioner logic. An instance of
        a job cancelled while it ran comes back aborted, as BOINC's client reports it after
        the scheduler told it to abort: a client error, exit status 202, no CPU time, no
        output; a failed instance carries no CPU time (BOINC 8.3 records none)."""
        with self.tx() as db:
            mask = db.execute(
                "SELECT error_mask FROM workunit WHERE id=?", (claim.wu_id,)
            ).fetchone()[0]
            if mask & WU_CANCELLED:
                ok, exit_status, elapsed, cpu, outputs = False, EXIT_ABORTED_BY_PROJECT, 0, 0, []
                stderr_out = stderr_out.split("<![CDATA[", 1)[0]
            if not ok:
                cpu = 0
            db.execute(
                "UPDATE result SET server_state=?, outcome=?, exit_status=?, elapsed_time=?,"
                " cpu_time=?, stderr_out=?, received_time=?, output_files=?, output_hash=?"
                " WHERE id=?",
                (
                    OVER,
                    SUCCESS if ok else CLIENT_ERROR,
                    exit_status,
                    elapsed,
                    cpu,
                    stderr_out,
                    self.clock(),
                    json.dumps(list(outputs)),
                    output_hash,
                    claim.result_id,
                ),
            )
            wu = db.execute("SELECT * FROM workunit WHERE id=?", (claim.wu_id,)).fetchone()
            if not wu["error_mask"] and not wu["canonical_resultid"]:
                self._validate(wu)
            elif (
                not ok
                and not wu["canonical_resultid"]
                and not db.execute(
                    "SELECT 1 FROM result WHERE workunit_id=? AND server_state IN (?,?)",
                    (wu["id"], UNSENT, IN_PROGRESS),
                ).fetchone()
            ):
                # the transitioner: a failure and no result left to send
                db.execute(
                    "UPDATE workunit SET error_mask=error_mask|? WHERE id=?",
                    (WU_TOO_MANY_TOTAL, wu["id"]),
                )
            self._refresh(claim.wu_id)
            self._maybe_complete(wu["batch_id"])

    def _validate(self, wu: sqlite3.Row) -> None:
        results = self.db.execute(
            "SELECT id, server_state, outcome, output_hash FROM result WHERE workunit_id=?"
            " ORDER BY id",
            (wu["id"],),
        ).fetchall()
        groups: dict[str, list[int]] = {}
        for r in results:
            if r["outcome"] == SUCCESS:
                groups.setdefault(r["output_hash"], []).append(r["id"])
        for ids in groups.values():
            if len(ids) >= wu["min_quorum"]:
                self.db.execute(
                    "UPDATE workunit SET canonical_resultid=? WHERE id=?", (ids[0], wu["id"])
                )
                self.db.execute(
                    "UPDATE result SET server_state=?, outcome=? WHERE workunit_id=?"
                    " AND server_state=?",
                    (OVER, DIDNT_NEED, wu["id"], UNSENT),
                )
                return
        pending = [r for r in results if r["server_state"] in (UNSENT, IN_PROGRESS)]
        if not pending:
            # the project allows target_nresults results per job: no retries
            self.db.execute(
                "UPDATE workunit SET error_mask=error_mask|? WHERE id=?",
                (WU_TOO_MANY_TOTAL, wu["id"]),
            )

    def _cancel(self, wu_id: int) -> int:
        """abort_workunit(): cancel unsent instances, set the cancelled bit; returns batch id."""
        self.db.execute(
            "UPDATE result SET server_state=?, outcome=? WHERE workunit_id=? AND server_state=?",
            (OVER, DIDNT_NEED, wu_id, UNSENT),
        )
        self.db.execute(
            "UPDATE workunit SET error_mask=error_mask|? WHERE id=?", (WU_CANCELLED, wu_id)
        )
        self._refresh(wu_id, force=True)
        row = self.db.execute("SELECT batch_id FROM workunit WHERE id=?", (wu_id,)).fetchone()
        return int(row[0])

    def _refresh(self, wu_id: int, force: bool = False) -> None:
        """Recompute the job status the way query_batch2 derives it; bump mod_time."""
        wu = self.db.execute(
            "SELECT status, error_mask, canonical_resultid FROM workunit WHERE id=?", (wu_id,)
        ).fetchone()
        if wu["canonical_resultid"]:
            status = "DONE"
        elif wu["error_mask"]:
            status = "ERROR"
        elif self.db.execute(
            "SELECT 1 FROM result WHERE workunit_id=? AND server_state=? LIMIT 1",
            (wu_id, IN_PROGRESS),
        ).fetchone():
            status = "IN_PROGRESS"
        else:
            status = "UNSENT"
        if force or status != wu["status"]:
            self.db.execute(
                "UPDATE workunit SET status=?, mod_time=? WHERE id=?",
                (status, self.mod_time(), wu_id),
            )

    def _maybe_complete(self, batch_id: int) -> None:
        active = self.db.execute(
            "SELECT 1 FROM workunit WHERE batch_id=? AND status IN ('UNSENT','IN_PROGRESS')"
            " LIMIT 1",
            (batch_id,),
        ).fetchone()
        if not active:
            self.db.execute(
                "UPDATE batch SET state=?, completion_time=? WHERE id=? AND state=?",
                (BATCH_COMPLETE, int(self.clock()), batch_id, BATCH_IN_PROGRESS),
            )
