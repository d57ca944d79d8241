"""The logic of submit_rpc_handler.php, job_file.php, get_output.php and get_output2.php.

Each public method takes a parsed request and returns a :class:`~.responses.Reply`; error texts,
their order of checks and the server's PHP 8 crashes follow BOINC 8.3.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import sqlite3
import string
import tarfile
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape

import attrs

from . import responses
from .apps import APPS, AppSpec
from .forms import FilePart
from .responses import PhpCrash, Reply, RequestRefused
from .store import (
    BATCH_INIT,
    CLIENT_ERROR,
    DIDNT_NEED,
    EXIT_ABORTED_BY_PROJECT,
    IN_PROGRESS,
    OVER,
    SUCCESS,
    UNSENT,
    NewJob,
    Store,
)
from .tamper import Tampering

_VALID_NAME = re.compile(r"^[A-Za-z0-9_\-. ]+$")
_INT = re.compile(r"^\s*([+-]?\d+)")
_NUMERIC = re.compile(r"^\s*([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)\s*$")
_FLOAT = re.compile(r"^\s*([+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?))")


@attrs.frozen
class ProjectConfig:
    """Behaviour knobs of the emulated project."""

    quorum: int = 1
    max_upload_files: int = 20  # PHP max_file_uploads
    max_file_size: int = 2 * 1024 * 1024  # PHP upload_max_filesize
    max_post_size: int = 8 * 1024 * 1024  # PHP post_max_size
    #: "crash": query_completed_job on a job without canonical result fails with HTTP 500 and
    #: a truncated body, as BOINC 8.3 on PHP 8 does; "full": answer with the failed instance
    completed_job_mode: str = "crash"


TEMPLATE_FPOPS_EST = 1e10
"""rsc_fpops_est of the emulator's input templates."""
PROJECT_FLOPS = 1e9
"""project_flops() of a project whose users have no recent credit."""


def _state_string(res: sqlite3.Row, wu: sqlite3.Row) -> str:
    """state_string() of html/inc/result.inc for the states the emulator produces."""
    if res["server_state"] == UNSENT:
        return "Unsent"
    if res["server_state"] == IN_PROGRESS:
        return "In progress"
    if res["outcome"] == SUCCESS:
        return "Completed and validated" if wu["canonical_resultid"] else "Completed"
    if res["outcome"] == CLIENT_ERROR:
        if res["exit_status"] in (-221, EXIT_ABORTED_BY_PROJECT):
            return "Cancelled by server"
        return "Error while computing"
    if res["outcome"] == DIDNT_NEED:
        return "Didn't need"
    return "Unknown"


def php_int(s: str | None) -> int:
    m = _INT.match(s or "")
    return int(m.group(1)) if m else 0


def php_double(s: str | None) -> float:
    m = _FLOAT.match(s or "")
    return float(m.group(1)) if m else 0.0


def php_get_int(q: dict[str, str], name: str) -> int | None:
    """BOINC's ``get_int()``: the parameter as an int, None when missing or not numeric."""
    m = _NUMERIC.match(q.get(name, ""))
    return int(float(m.group(1))) if m else None


def fanout_dir(name: str, fanout: int = 1024) -> str:
    """The download/upload fan-out directory of a file name (BOINC's dir_hier_path)."""
    return f"{int(hashlib.md5(name.encode()).hexdigest()[:8], 16) % fanout:x}"


def job_words(line: str) -> list[str]:
    """Split a job line as BOINC's job creator does: words separated by white space, a word
    opened by a quote (double or single) runs to the next same quote."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
        elif line[i] in "\"'":
            j = line.find(line[i], i + 1)
            j = n if j < 0 else j
            words.append(line[i + 1 : j])
            i = j + 1
        else:
            j = i
            while j < n and not line[j].isspace():
                j += 1
            words.append(line[i:j])
            i = j
    return words


def valid_filename(name: str) -> bool:
    """BOINC's is_valid_filename(): letters, digits, ``_ - .`` and space; no ``..``."""
    return bool(_VALID_NAME.match(name)) and ".." not in name and len(name) <= 255


def _text(el: ET.Element | None, tag: str) -> str:
    if el is None:
        return ""
    child = el.find(tag)
    return "" if child is None else (child.text or "")


def _texts(el: ET.Element, tag: str) -> list[str]:
    return [c.text or "" for c in el.findall(tag)]


def read_source(source: str, limit: int) -> bytes | None:
    """PHP's md5_file()/copy() of a ``local`` path or a ``semilocal`` URL (allow_url_fopen):
    the content, or None when it cannot be read (or is over ``limit`` bytes)."""
    try:
        if source.startswith(("http://", "https://")):
            with urllib.request.urlopen(source, timeout=30) as resp:  # noqa: S310 - http(s) only
                data: bytes = resp.read(limit + 1)
        else:
            with open(source, "rb") as fh:
                data = fh.read(limit + 1)
    except (OSError, ValueError):
        return None
    return data if len(data) <= limit else None


def parse_rpc_xml(req: str) -> ET.Element | None:
    """simplexml_load_string(): the root element, or None when not parsable."""
    try:
        return ET.fromstring(req)
    except ET.ParseError:
        return None


class ProjectPages:
    """The PHP pages of one emulated BOINC project."""

    def __init__(
        self, store: Store, config: ProjectConfig, tamper: Tampering | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.tamper = tamper if tamper is not None else Tampering()
        self._submit_rpcs: dict[str, Callable[[ET.Element], Reply]] = {
            "ping": lambda r: responses.ping(),
            "get_templates": self.get_templates,
            "create_batch": self.create_batch,
            "submit_batch": self.submit_batch,
            "query_batches": self.query_batches,
            "query_batch": self.query_batch,
            "query_batch2": self.query_batch2,
            "query_completed_job": self.query_completed_job,
            "abort_jobs": self.abort_jobs,
            "abort_batch": self.abort_batch,
            "query_job": self.query_job,
            "estimate_batch": self.estimate_batch,
            "retire_batch": self.retire_batch,
            "set_expire_time": self.set_expire_time,
        }

    # -- entry points --

    def submit_rpc(self, req: str) -> Reply:
        """submit_rpc_handler.php"""
        root = parse_rpc_xml(req)
        if root is None:
            return responses.error(
                f"can't parse request message: {responses.htmlspecialchars(req)}"
            )
        handler = self._submit_rpcs.get(root.tag)
        if handler is None:
            return responses.error("bad command")
        return self._run(root.tag, lambda: handler(root))

    def job_file(self, req: str, files: Sequence[FilePart]) -> Reply:
        """job_file.php"""
        root = parse_rpc_xml(req)
        if root is None:
            # job_file.php's own xml_error() adds where it failed
            where = (
                ("file", str(self.store.dir / "html" / "user" / "job_file.php")),
                ("line", "302"),
            )
            return responses.error(
                f"can't parse request message: {responses.htmlspecialchars(req)}", extra=where
            )
        if root.tag == "query_files":
            return self._run(root.tag, lambda: self.query_files(root))
        if root.tag == "upload_files":
            return self._run(root.tag, lambda: self.upload_files(root, files))
        return responses.error("no such action")

    @staticmethod
    def _run(cmd: str, fn: Callable[[], Reply]) -> Reply:
        try:
            return fn()
        except RequestRefused as e:
            return responses.error(e.msg, e.num, cmd)
        except PhpCrash as e:
            return responses.crash(e.partial)

    # -- permissions and lookups --

    def _user(self, r: ET.Element, no_access: str = "no file access") -> sqlite3.Row:
        """The requesting user; RPCs naming an app say ``no submit access`` to a user without
        submit rights, the others (as job_file.php) ``no file access``."""
        auth = _text(r, "authenticator")
        if not auth:
            raise RequestRefused("no authenticator")
        user = self.store.user_by_auth(auth)
        if user is None:
            raise RequestRefused("bad authenticator")
        if not user["submit"]:
            raise RequestRefused(no_access)
        return user

    def _app(self, name: str) -> sqlite3.Row:
        app = self.store.app_by_name(name)
        if app is None:
            raise RequestRefused(f"app not found: {name}")
        return app

    def _wu(
        self, name: str, user: sqlite3.Row | None = None, missing: str = "no job {name}"
    ) -> sqlite3.Row:
        wu = self.store.wu_by_name(name)
        if wu is None:
            raise RequestRefused(missing.format(name=name))
        if user is not None:
            owner = self.store.owner_of_wu(wu)
            if owner is None or owner["id"] != user["id"]:
                raise RequestRefused("not owner")
        return wu

    def _batch(self, r: ET.Element, user: sqlite3.Row) -> sqlite3.Row:
        """get_batch(): by batch_id or batch_name, then the owner check."""
        bid = php_int(_text(r, "batch_id"))
        name = _text(r, "batch_name")
        if bid:
            batch = self.store.batch(bid)
        elif name:
            batch = self.store.batch_by_name(name)
        else:
            raise RequestRefused("batch not specified")
        if batch is None:
            raise RequestRefused("no such batch")
        if batch["user_id"] != user["id"]:
            raise RequestRefused("not owner")
        return batch

    # -- submit_rpc_handler.php --

    def get_templates(self, r: ET.Element) -> Reply:
        app_name = _text(r, "app_name")
        if not app_name:
            wu = self._wu(_text(r, "job_name"), missing="job not found: {name}")
            row = self.store.one("SELECT name FROM app WHERE id=?", wu["app_id"])
            app_name = row["name"] if row else ""
        app = self._app(app_name)
        self._user(r, "no submit access")
        spec = APPS[app["name"]]
        if app["name"] in self.tamper.template_outputs:
            names = tuple(escape(n) for n in self.tamper.template_outputs[app["name"]])
            spec = attrs.evolve(spec, outputs=names)
        return responses.templates(spec.input_template(self.config.quorum), spec.output_template())

    def create_batch(self, r: ET.Element) -> Reply:
        app = self._app(_text(r, "app_name"))
        user = self._user(r, "no submit access")
        bid = self.store.create_batch(
            user["id"], app["id"], _text(r, "batch_name"), php_double(_text(r, "expire_time"))
        )
        return responses.batch_id("create_batch", bid)

    def submit_batch(self, r: ET.Element) -> Reply:
        b = r.find("batch")
        b = b if b is not None else ET.Element("batch")
        app = self._app(_text(b, "app_name"))
        user = self._user(r, "no submit access")
        jobs = self._staged_jobs(b, APPS[app["name"]])
        _check_allocation_estimates(b)
        bid = php_int(_text(b, "batch_id"))
        if bid:
            self._check_init_batch(bid, user)
        self._check_create_work(jobs, app["id"], bid)
        if not bid:
            name = _text(b, "batch_name") or f"batch_{int(self.store.clock())}"
            bid = self.store.create_batch(user["id"], app["id"], name, 0)
        p = b.find("job_params")
        params = {
            key: php_double(_text(p, key))
            for key in (
                "rsc_fpops_est",
                "rsc_fpops_bound",
                "rsc_memory_bound",
                "rsc_disk_bound",
                "delay_bound",
            )
        }
        self.store.submit(bid, app["id"], jobs, self.config.quorum, params)
        return responses.batch_id("submit_batch", bid)

    def _staged_jobs(self, b: ET.Element, spec: AppSpec) -> list[NewJob]:
        """The batch's jobs, with their input files counted (validate_batch()) and staged
        (stage_files()): before the batch is looked up, as the server does."""
        jobs = []
        files: list[list[ET.Element]] = []
        for i, job_el in enumerate(b.findall("job")):
            files.append(job_el.findall("input_file"))
            wu_el = job_el.find("input_template/workunit")  # replaces the app's template
            jobs.append(
                NewJob(
                    _text(job_el, "name") or f"job_{i}",
                    _text(job_el, "command_line"),
                    (),
                    php_int(_text(wu_el, "min_quorum")),
                    php_int(_text(wu_el, "target_nresults")),
                )
            )
        need = len(spec.inputs)
        for i, fs in enumerate(files):
            if len(fs) != need:
                raise RequestRefused(
                    f"wrong # of input files for job {i}: need {need}, got {len(fs)}"
                )
        return [
            attrs.evolve(j, inputs=tuple(self._stage_file(f) for f in fs))
            for j, fs in zip(jobs, files, strict=True)
        ]

    def _check_init_batch(self, bid: int, user: sqlite3.Row) -> None:
        """A batch given by id: it exists, is the user's, and is still being built."""
        batch = self.store.batch(bid)
        if batch is None:
            raise RequestRefused(f"no batch {bid}")
        if batch["user_id"] != user["id"]:
            raise RequestRefused("not owner of batch")
        if batch["state"] != BATCH_INIT:
            raise RequestRefused("batch not in init state")

    def _stage_file(self, f: ET.Element) -> str:
        """stage_file(): an input's physical name, written to the download directory first
        for the modes the server stages itself (a remote file's entry is a JSON object)."""
        mode = _text(f, "mode")
        src_el = f.find("source")
        source = (src_el.text or "") if src_el is not None else ""
        if mode == "remote":
            return json.dumps(
                {
                    "url": _text(f, "url"),
                    "nbytes": php_double(_text(f, "nbytes")),
                    "md5": _text(f, "md5"),
                }
            )
        if mode == "local_staged":
            return source
        return self._store_input(self._input_data(mode, source))

    def _input_data(self, mode: str, source: str) -> bytes:
        """The content of an input the server stages itself, by its mode."""
        if mode == "inline":
            return source.encode()
        if mode in ("local", "semilocal"):
            got = read_source(source, self.config.max_file_size)
            if got is None:
                raise RequestRefused(f"Can't get MD5 of file {source}")
            return got
        if mode == "sandbox":  # no sandbox here: the server's answer for an unknown name
            raise RequestRefused(f"sandbox link file {source} not found")
        raise RequestRefused(f"unsupported file mode: {mode}")

    def _store_input(self, data: bytes) -> str:
        """Write ``data`` to the download directory under its ``jf_<md5>`` name (once)."""
        name = "jf_" + hashlib.md5(data).hexdigest()
        path = self.store.file_path(name)
        if not path.is_file():
            if not data:  # PHP: file_put_contents() of nothing returns 0, read as a failure
                raise RequestRefused(
                    f"can't write to file {self.store.download_dir}/{fanout_dir(name)}/{name}"
                )
            tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return name

    def _check_create_work(self, jobs: Sequence[NewJob], app_id: int, batch_id: int) -> None:
        """Fail as BOINC's job creator does: it reads each job as a line of words (the command
        line in double quotes, unescaped, then the input files), reads every input file, then
        inserts all jobs at once (a taken name fails the insert)."""
        for j in jobs:
            self._check_job_line(j)
        taken = set(self.store.existing_job_names([j.name for j in jobs]))
        for j in jobs:
            if j.name in taken:
                raise RequestRefused(self._duplicate_job(j.name, jobs, app_id, batch_id))
            taken.add(j.name)

    def _check_job_line(self, j: NewJob) -> None:
        """One job's line of words: every staged input readable, the command line intact."""
        staged = [i for i in j.inputs if not i.startswith("{")]
        words = job_words(f'--command_line "{j.command_line}" ' + " ".join(staged))
        for src in words[2:]:
            if not valid_filename(src) or not self.store.file_path(src).is_file():
                raise RequestRefused(self._missing_input(src))
        if words[1:2] != [j.command_line]:
            raise RequestRefused(f"create_work failed: bad command line for job {j.name}")

    def _missing_input(self, name: str) -> str:
        """create_work's report of an input file it cannot read (BOINC 8.3's text)."""
        flat = f"{self.store.download_dir}/{name}"
        hier = f"{self.store.download_dir}/{fanout_dir(name)}/{name}"
        return (
            f"create_work failed: md5_file: can't open {hier}\n"
            "md5_file: No such file or directory\n"
            "process_input_template: md5_file fopen() failed\n"
            "process_input_template(): fopen() failed\n"
            "create_work() failed: -108\n"
            f"copy {flat} to {hier}\n"
        )

    def _duplicate_job(self, name: str, jobs: Sequence[NewJob], app_id: int, batch_id: int) -> str:
        """create_work's report of a failed insert: the database error and the query."""
        now = int(self.store.clock())
        rows = ",".join(
            f"(0, {now}, {app_id}, '{j.name}', '<workunit>\n<command_line>\n{j.command_line}\n"
            f"</command_line>\n</workunit>', {batch_id})"
            for j in jobs
        )
        dup = f"Duplicate entry '{name}' for key 'name'"
        return (
            f"create_work failed: Database error: {dup}\n"
            f"query=insert into workunit values {rows}\n"
            "wu.insert_batch() failed: 1\n"
            f"MySQL error: {dup}\n"
        )

    def query_batches(self, r: ET.Element) -> Reply:
        user = self._user(r)
        cpu = bool(php_int(_text(r, "get_cpu_time")))
        batches = [self.store.batch_summary(b, cpu) for b in self.store.user_batches(user["id"])]
        return responses.query_batches(batches, cpu)

    def query_batch(self, r: ET.Element) -> Reply:
        user = self._user(r)
        batch = self._batch(r, user)
        cpu = bool(php_int(_text(r, "get_cpu_time")))
        details = bool(php_int(_text(r, "get_job_details")))
        return responses.query_batch(
            self.store.batch_summary(batch, cpu), self.store.job_details(batch["id"]), cpu, details
        )

    def query_batch2(self, r: ET.Element) -> Reply:
        user = self._user(r)
        batches = []
        for name in _texts(r, "batch_name"):
            batch = self.store.batch_by_name(name, user["id"])
            if batch is None:
                raise RequestRefused(f"no batch named {name}")
            batches.append(batch)
        min_mod_time = php_double(_text(r, "min_mod_time"))
        server_time = self.store.clock()
        return responses.query_batch2(
            server_time, (self.store.batch_jobs(b["id"], min_mod_time) for b in batches)
        )

    def query_completed_job(self, r: ET.Element) -> Reply:
        user = self._user(r)
        wu = self._wu(_text(r, "job_name"), user, missing="no such job")
        if wu["canonical_resultid"]:
            res = self.store.result(wu["canonical_resultid"])
        elif self.config.completed_job_mode == "crash":
            # PHP 8: dereferencing the missing canonical result is fatal
            raise PhpCrash(responses.completed_job_head(wu["error_mask"]))
        else:
            res = self.store.one(
                "SELECT * FROM result WHERE workunit_id=? AND outcome=3 ORDER BY id DESC LIMIT 1",
                wu["id"],
            )
        if res is None:
            return responses.completed_job(wu["error_mask"], 0, 0, 0, 0, "")
        canonical = 0 if wu["name"] in self.tamper.no_canonical else wu["canonical_resultid"]
        # no canonical instance: the failed one is named <error_resultid> (a server that
        # does not crash there, BOINC before PHP 8)
        failed = res["id"] if not wu["canonical_resultid"] else 0
        return responses.completed_job(
            wu["error_mask"],
            canonical,
            res["exit_status"],
            res["elapsed_time"],
            res["cpu_time"],
            res["stderr_out"],
            error_resultid=failed,
        )

    def abort_jobs(self, r: ET.Element) -> Reply:
        """One job after the other, as the real page: the jobs before an unknown one stay
        aborted and are listed before the error."""
        user = self._user(r)
        done: list[str] = []
        for name in _texts(r, "job_name"):
            try:
                wu = self._wu(name, user)
            except RequestRefused as e:
                return responses.abort_jobs(done, e)
            self.store.abort([wu["id"]])
            done.append(wu["name"])
        return responses.abort_jobs(done)

    def estimate_batch(self, r: ET.Element) -> Reply:
        """estimate_batch: the batch's FLOPs (a job's rsc_fpops_est, else its template's)
        over the project's FLOPS, which BOINC derives from its users' recent credit: with
        none (as here) 1e9."""
        b = r.find("batch")
        b = b if b is not None else ET.Element("batch")
        self._app(_text(b, "app_name"))
        self._user(r, "no submit access")
        flops = 0.0
        for job in b.findall("job"):
            flops += php_double(_text(job, "rsc_fpops_est")) or TEMPLATE_FPOPS_EST
        return responses.estimate_batch(flops / PROJECT_FLOPS)

    def server_status(self, q: dict[str, str]) -> Reply | None:
        """server_status.php?counts=1: the job counts (None: the status page, not emulated)."""
        if not php_int(q.get("counts")):
            return None
        return responses.job_counts(self.store.job_counts())

    def query_job(self, r: ET.Element) -> Reply:
        """query_job: the instances of a job (by its workunit id)."""
        user = self._user(r)
        job_id = php_int(_text(r, "job_id"))
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", job_id)
        if wu is None:
            raise RequestRefused("no such job")
        batch = self.store.batch(wu["batch_id"])
        if batch is None or batch["user_id"] != user["id"]:
            raise RequestRefused("not owner")
        instances = []
        for res in self.store.all("SELECT * FROM result WHERE workunit_id=? ORDER BY id", job_id):
            sizes = []
            if res["server_state"] == OVER:
                for _phys, _logical, rel in self._outputs(res):
                    path = self.store.upload_dir / rel
                    if path.is_file():
                        sizes.append(path.stat().st_size)
            instances.append((res["name"], res["id"], _state_string(res, wu), sizes))
        return responses.query_job(instances)

    def abort_batch(self, r: ET.Element) -> Reply:
        user = self._user(r)
        batch = self._batch(r, user)
        self.store.abort_batch(batch["id"])
        return responses.abort_batch()

    def retire_batch(self, r: ET.Element) -> Reply:
        user = self._user(r)
        batch = self._batch(r, user)
        self.store.retire_batch(batch["id"])
        return responses.retire_batch()

    def set_expire_time(self, r: ET.Element) -> Reply:
        user = self._user(r)
        batch = self._batch(r, user)
        self.store.set_expire_time(batch["id"], php_double(_text(r, "expire_time")))
        return responses.set_expire_time()

    # -- job_file.php --

    def _file_md5(self, name: str) -> str:
        return hashlib.md5(self.store.file_path(name).read_bytes()).hexdigest()

    def query_files(self, r: ET.Element) -> Reply:
        self._user(r)
        delete_time = php_int(_text(r, "delete_time"))
        batch_id = php_int(_text(r, "batch_id"))
        absent = []
        for i, name in enumerate(_texts(r, "phys_name")):
            if not valid_filename(name):
                raise RequestRefused("bad filename")
            jf = self.store.job_file(name)
            if jf is not None and jf["delete_time"] < delete_time:
                # BOINC 8.3 treats the successful update as a failure
                raise RequestRefused("job_file->update() failed: ")
            path = self.store.file_path(name)
            if path.is_file():
                if jf is not None:
                    jf_id = jf["id"]
                else:
                    jf_id = self.store.insert_job_file(
                        name, self._file_md5(name), path.stat().st_size, delete_time
                    )
                if batch_id:
                    try:
                        self.store.associate(batch_id, jf_id)
                    except sqlite3.IntegrityError:
                        raise PhpCrash("<query_files>\n") from None
            else:
                if jf is not None:
                    self.store.delete_job_file(jf["id"])
                absent.append(i)
        return responses.query_files(absent)

    def upload_files(self, r: ET.Element, files: Sequence[FilePart]) -> Reply:
        self._user(r)
        delete_time = php_int(_text(r, "delete_time"))
        batch_id = php_int(_text(r, "batch_id"))
        names = _texts(r, "phys_name")
        for name in names:
            if not valid_filename(name):
                raise RequestRefused("bad filename")
        by_field: dict[str, FilePart] = {}
        for f in files[: self.config.max_upload_files]:
            by_field[f.field] = f
        if len(by_field) != len(names):
            raise RequestRefused(
                f"# of uploaded files ({len(by_field)}) doesn't agree with request ({len(names)})"
            )
        for i, name in enumerate(names):
            part = self._uploaded_part(by_field.get(f"file_{i}"))
            self._store_upload(name, part, delete_time, batch_id)
        return responses.upload_files()

    def _uploaded_part(self, part: FilePart | None) -> FilePart:
        """An uploaded file PHP accepted (present, within upload_max_filesize)."""
        if part is None:
            raise RequestRefused(" is not an uploaded file")
        if len(part.data) > self.config.max_file_size:
            base = part.filename.replace("\\", "/").rsplit("/", 1)[-1]  # as PHP's $_FILES
            raise RequestRefused(
                f"{base} upload failed because: The uploaded file "
                "exceeds upload_max_filesize of php.ini."
            )
        return part

    def _store_upload(self, name: str, part: FilePart, delete_time: int, batch_id: int) -> None:
        """Write an uploaded file (an existing one must have the same content) and record it."""
        digest = hashlib.md5(part.data).hexdigest()
        path = self.store.file_path(name)
        if path.is_file():
            jf = self.store.job_file(name)
            old = jf["md5"] if jf is not None else self._file_md5(name)
            if old != digest:
                raise RequestRefused(f"file immutability violation for {name}")
        else:
            tmp = path.with_name(f".{name}.{os.getpid()}.{id(part)}.tmp")
            tmp.write_bytes(part.data)
            os.replace(tmp, path)
        try:
            jf_id = self.store.insert_job_file(name, digest, len(part.data), delete_time)
            if batch_id:
                self.store.associate(batch_id, jf_id)
        except sqlite3.IntegrityError:
            # PHP 8: duplicate row -> uncaught mysqli_sql_exception
            raise PhpCrash("<upload_files>\n") from None

    # -- get_output.php / get_output2.php ---------------------------------------------------------

    def get_output(self, q: dict[str, str]) -> Reply:
        commands: dict[str, Callable[[dict[str, str]], Reply]] = {
            "workunit_file": self._workunit_file,
            "result_file": self._signed_result_file,
            "batch_files": self._batch_files,
            "workunit_files": self._workunit_files,
        }
        command = commands.get(q.get("cmd", ""))
        return command(q) if command is not None else responses.plain("bad command\n")

    def _workunit_file(self, q: dict[str, str]) -> Reply:
        """cmd=workunit_file: an output of a job's canonical instance (the owner's
        authenticator as ``auth_str``)."""
        file_num = php_get_int(q, "file_num")
        if file_num is None:
            return responses.missing_arg("file_num")
        wu_name = q.get("wu_name", "")
        wu = self.store.wu_by_name(wu_name)
        if wu is None:
            return responses.download_error(f"no workunit {wu_name}")
        owner = self.store.owner_of_wu(wu)
        if owner is None or owner["authenticator"] != q.get("auth_str"):
            return responses.download_error("bad authenticator")
        if not wu["canonical_resultid"]:
            return responses.download_error(f"no canonical result for wu {wu['name']}")
        if wu["name"] in self.tamper.output_bytes:
            return responses.download(self.tamper.output_bytes[wu["name"]], f"{wu_name}_0")
        res = self.store.result(wu["canonical_resultid"])
        return self._result_file(res, file_num)

    def _signed_result_file(self, q: dict[str, str]) -> Reply:
        """cmd=result_file: an output of a job instance (``auth_str`` = md5(authenticator +
        instance name))."""
        file_num = php_get_int(q, "file_num")
        if file_num is None:
            return responses.missing_arg("file_num")
        name = q.get("result_name", "")
        res = self.store.result_by_name(name)
        if res is None:
            return responses.download_error(f"no job instance {name}")
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", res["workunit_id"])
        owner = self.store.owner_of_wu(wu) if wu else None
        expect = hashlib.md5(
            ((owner["authenticator"] if owner else "") + res["name"]).encode()
        ).hexdigest()
        if owner is None or q.get("auth_str") != expect:
            return responses.download_error("bad authenticator")
        return self._result_file(res, file_num)

    def _signed(self, user_id: int, thing: int, q: dict[str, str]) -> bool:
        """get_output.php's signature: ``auth_str`` = md5(authenticator + id)."""
        user = self.store.one("SELECT authenticator FROM user WHERE id=?", user_id)
        want = hashlib.md5(f"{user['authenticator'] if user else ''}{thing}".encode())
        return user is not None and q.get("auth_str") == want.hexdigest()

    def _zip(self, results: Sequence[sqlite3.Row], name: str) -> Reply:
        """The canonical outputs (by physical name) in a zip, as a download."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for res in results:
                for phys, _logical, rel in self._outputs(res):
                    path = self.store.upload_dir / rel
                    if path.is_file():
                        z.write(path, phys)
        data = buf.getvalue() if any(self._outputs(r) for r in results) else b""
        suffix = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(6))
        return responses.download(data, f"{name}_{suffix}.zip")

    def _batch_files(self, q: dict[str, str]) -> Reply:
        """cmd=batch_files: the canonical outputs of a batch's jobs (signed batch id)."""
        batch_id = php_get_int(q, "batch_id")
        if batch_id is None:
            return responses.redirect("non_num_arg.html")
        batch = self.store.batch(batch_id)
        if batch is None:
            return responses.download_error(f"no batch {batch_id}")
        if not self._signed(batch["user_id"], batch_id, q):
            return responses.download_error("bad auth str")
        results = [
            r
            for r in (
                self.store.result(w["canonical_resultid"])
                for w in self.store.all(
                    "SELECT canonical_resultid FROM workunit"
                    " WHERE batch_id=? AND canonical_resultid>0 ORDER BY id",
                    batch_id,
                )
            )
            if r is not None
        ]
        return self._zip(results, "boinc_batch")

    def _workunit_files(self, q: dict[str, str]) -> Reply:
        """cmd=workunit_files: a job's canonical outputs (signed job id)."""
        wu_id = php_get_int(q, "wu_id")
        if wu_id is None:
            return responses.missing_arg("wu_id")
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", wu_id)
        if wu is None:
            return responses.download_error(f"no workunit {wu_id}")
        batch = self.store.batch(wu["batch_id"])
        if batch is None or not self._signed(batch["user_id"], wu_id, q):
            return responses.download_error("bad authenticator")
        if not wu["canonical_resultid"]:
            return responses.download_error(f"no canonical result for wu {wu['name']}")
        res = self.store.result(wu["canonical_resultid"])
        return self._zip([res] if res is not None else [], f"boinc_wu_{wu['name']}")

    def _outputs(self, res: sqlite3.Row | None) -> list[list[str]]:
        return json.loads(res["output_files"]) if res is not None else []

    def _result_file(self, res: sqlite3.Row | None, file_num: int) -> Reply:
        outs = self._outputs(res)
        if not 0 <= file_num < len(outs):
            # BOINC 8.3 does not check the index: the empty file name resolves to a fan-out
            # directory, whose name and size (4096) are announced before the read fails.
            return responses.broken_download(fanout_dir(""), 4096)
        phys, _logical, rel = outs[file_num]
        path = self.store.upload_dir / rel
        if not path.is_file():
            return responses.download_error(f"no such file: {phys}")
        return responses.download(path.read_bytes(), phys)

    def get_output2(self, q: dict[str, str], cookie_auth: str | None = None) -> Reply:
        """get_output2.php: cmd=workunit (wu_id) or cmd=file (result_id, file_num).

        The account is the logged-in one (the ``auth`` cookie naming a user), else the one
        whose authenticator is the ``auth`` argument. Unlike BOINC 8.3, which serves
        ``cmd=workunit`` whatever ``auth`` says, the emulator checks the owner.
        """
        if (
            cookie_auth
            and self.store.one("SELECT id FROM user WHERE authenticator=?", cookie_auth) is not None
        ):
            q = {**q, "auth": cookie_auth}
        commands = {"workunit": self._output2_workunit, "file": self._output2_file}
        command = commands.get(q.get("cmd", ""))
        if command is None:
            return responses.plain("bad cmd\n")
        try:
            return command(q)
        except RequestRefused as e:
            return responses.download_error(e.msg)

    def _output2_workunit(self, q: dict[str, str]) -> Reply:
        """get_output2.php?cmd=workunit: the outputs of a job's canonical instance."""
        wu_id = php_get_int(q, "wu_id")
        if wu_id is None:
            return responses.missing_arg("wu_id")
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", wu_id)
        if wu is None:
            return responses.plain("no workunit for ")  # sic: BOINC 8.3 omits the id
        self._check_auth2(wu, q)
        if not wu["canonical_resultid"]:
            # the archive of no instance's outputs: an empty ".zip"
            return responses.download(b"", ".zip")
        return self._bundle(self.store.result(wu["canonical_resultid"]))

    def _output2_file(self, q: dict[str, str]) -> Reply:
        """get_output2.php?cmd=file: one output file of a job instance."""
        file_num = php_get_int(q, "file_num")
        if file_num is None:
            return responses.missing_arg("file_num")
        result_id = php_get_int(q, "result_id")
        if result_id is None:
            return responses.missing_arg("result_id")
        res = self.store.result(result_id)
        if res is None:
            return responses.plain(f"no result {result_id}")
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", res["workunit_id"])
        self._check_auth2(wu, q)
        if wu is not None and wu["name"] in self.tamper.output_bytes:
            data = self.tamper.output_bytes[wu["name"]]
            return responses.download(data, f"{res['name']}__out")
        outs = self._outputs(res)
        if not 0 <= file_num < len(outs):
            return responses.broken_download(f"{res['name']}__", 4096)
        return self._named_file(res, outs[file_num])

    def _check_auth2(self, wu: sqlite3.Row | None, q: dict[str, str]) -> None:
        owner = self.store.owner_of_wu(wu) if wu is not None else None
        if owner is None or owner["authenticator"] != q.get("auth"):
            raise RequestRefused("bad authenticator")

    def _named_file(self, res: sqlite3.Row, out: list[str]) -> Reply:
        _phys, logical, rel = out
        path = self.store.upload_dir / rel
        if not path.is_file():
            # BOINC reads the size of a missing file as nothing: an empty download (a
            # batch-collect app's outputs have moved to results/)
            return responses.download(b"", f"{res['name']}__{logical}")
        return responses.download(path.read_bytes(), f"{res['name']}__{logical}")

    # -- get_output3.php (batch-collect apps) ----------------------------------------------------

    def get_output3(self, q: dict[str, str], cookie_auth: str | None = None) -> Reply:
        """get_output3.php: ``get_file`` (result_id, index), ``get_batch_zip`` and
        ``get_batch_tar`` (batch_id) of the files in ``results/<batch id>/``; the user is
        the logged-in one (``auth`` cookie) only."""
        user = (
            self.store.one("SELECT * FROM user WHERE authenticator=?", cookie_auth)
            if cookie_auth
            else None
        )
        if user is None:
            return responses.redirect("login_form.php")
        action = q.get("action", "")
        if action == "get_file":
            return self._collected_file(q, user)
        if action in ("get_batch_zip", "get_batch_tar"):
            return self._collected_batch(q, user, action.removeprefix("get_batch_"))
        return responses.plain("")

    def _collected_file(self, q: dict[str, str], user: sqlite3.Row) -> Reply:
        """get_output3.php?action=get_file: one output file of a result, from the batch's
        results directory."""
        result_id, index = php_get_int(q, "result_id"), php_get_int(q, "index")
        if result_id is None or index is None:
            return responses.redirect("missing_arg_result_id.html")
        found = self._owned_result(result_id, user)
        if isinstance(found, Reply):
            return found
        res, wu = found
        outs = self._outputs(res)
        if not 0 <= index < len(outs):
            return responses.error_page("bad index")
        logical = outs[index][1]
        if not re.fullmatch(r"[\w\-. ]{1,255}", wu["name"]):
            return responses.error_page("bad WU name")
        gz = ".gz" if self._app_of(wu).gzip else ""
        folder = self.store.results_dir / str(wu["batch_id"])
        path = folder / f"{wu['name']}__file_{logical}{gz}"
        # a missing file: BOINC announces and sends nothing
        data = path.read_bytes() if path.is_file() else b""
        return responses.download(data, path.name)

    def _owned_result(
        self,
        result_id: int,
        user: sqlite3.Row,
    ) -> tuple[sqlite3.Row, sqlite3.Row] | Reply:
        """A result of ``user``'s and its job, or the error page get_output3.php shows."""
        res = self.store.result(result_id)
        if res is None:
            return responses.error_page("no result")
        wu = self.store.one("SELECT * FROM workunit WHERE id=?", res["workunit_id"])
        batch = self.store.batch(wu["batch_id"]) if wu is not None else None
        if wu is None or batch is None or batch["user_id"] != user["id"]:
            return responses.error_page("not owner")
        return res, wu

    def _collected_batch(self, q: dict[str, str], user: sqlite3.Row, kind: str) -> Reply:
        """get_output3.php?action=get_batch_zip|get_batch_tar (``kind``: zip or tar): the
        batch's results directory as one archive."""
        batch_id = php_get_int(q, "batch_id")
        batch = self.store.batch(batch_id) if batch_id is not None else None
        if batch is None or batch["user_id"] != user["id"]:
            return responses.error_page("not owner")
        folder = self.store.results_dir / str(batch_id)
        if not folder.is_dir():
            return responses.error_page("no batch dir")
        buf = io.BytesIO()
        files = sorted(p for p in folder.iterdir() if p.is_file())
        if kind == "zip":
            with zipfile.ZipFile(buf, "w") as z:
                for f in files:
                    z.write(f, f.name)
        else:
            with tarfile.open(fileobj=buf, mode="w") as t:
                for f in files:
                    t.add(f, f.name)
        return responses.download(buf.getvalue(), f"batch_{batch_id}.{kind}")

    def _app_of(self, wu: sqlite3.Row) -> AppSpec:
        app = self.store.one("SELECT name FROM app WHERE id=?", wu["app_id"])
        return APPS.get(app["name"] if app else "", APPS["worker"])

    def _bundle(self, res: sqlite3.Row | None) -> Reply:
        outs = self._outputs(res)
        assert res is not None
        if len(outs) == 1:
            return self._named_file(res, outs[0])
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for _phys, logical, rel in outs:
                z.writestr(f"{res['name']}__{logical}", (self.store.upload_dir / rel).read_bytes())
        return responses.download(buf.getvalue(), f"{res['name']}.zip")


def _check_allocation_estimates(b: ET.Element) -> None:
    """With allocation_priority set (PHP: an empty element is false, any other true),
    logical_end_time() needs the FLOPs of every job: from the job, its own input template or
    the batch's job_params (the app's template is never reached)."""
    alloc = b.find("allocation_priority")
    if alloc is None or not (alloc.text or len(alloc) or alloc.attrib):
        return
    batch_est = php_double(_text(b.find("job_params"), "rsc_fpops_est"))
    for job_el in b.findall("job"):
        t = job_el.find("input_template/workunit")
        own = php_double(_text(job_el, "rsc_fpops_est")) or (
            php_double(_text(t, "rsc_fpops_est")) if t is not None else 0.0
        )
        if not own and not batch_est:
            raise RequestRefused("no rsc_fpops_est given")
