"""The emulator held to the real BOINC 8.3 server: the same RPCs, the same replies.

Every step below sends byte-identical HTTP requests (raw httpx, a fixed multipart boundary,
the same authenticators, batch, job and file names) to the real project and to an emulator
started here with the same accounts and app (``worker``: one input ``in``, one output ``out``).
The replies are compared after normalising what must differ (ids, times, hashes, host and
port): HTTP status and version, content type and download headers, and the whole body text
(element names and order, whitespace, error texts).

Differences the emulator keeps on purpose are listed in ``KNOWN`` with the reason (and in
docs/emulator.md); a listed step that no longer differs fails, so the list stays exact.

Finished jobs: the real volunteer takes 30-60 s a job, so the module reuses a DONE and a
failed single-job batch of the submitter when the project's database has them (earlier runs
leave them); otherwise it submits its own at the start and waits for them at the end. The
emulator gets a batch and job of the same names that end the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import io
import os
import re
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from gahp_boinc.emulator import EmulatorServer

if TYPE_CHECKING:
    from conftest import RealBoinc

BOUNDARY = "------------------------gahpdifferential0123456789"
RUN = f"diff{int(time.time())}x{hashlib.md5(str(time.monotonic_ns()).encode()).hexdigest()[:6]}"
IN_A = f"differential input A {RUN}\n".encode()  # present after upload
IN_B = f"differential input B {RUN}\n".encode()  # never uploaded
IN_OK = f"differential job {RUN}\n".encode()  # a job of our own that ends DONE
LONG = f"this input is longer than thirty characters: {RUN}\n".encode()  # --early_exit fails
EXPIRE = "1900000000.500000"
BIG = bytes(range(256)) * (8 * 1024 * 4 + 16)  # a little over PHP's 8 MB post_max_size


def phys(data: bytes, ext: str = ".txt") -> str:
    """The content-addressed physical name the GAHP uses."""
    return hashlib.md5(data).hexdigest() + ext


# ---- the two sides -----------------------------------------------------------------------------


@dataclass
class Raw:
    """One HTTP reply as received (decoded from any Content-Encoding)."""

    status_code: int
    http_version: str
    headers: httpx.Headers
    content: bytes
    complete: bool

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


@dataclass
class Reply:
    """One HTTP reply, normalised for comparison."""

    status: int
    version: str
    headers: dict[str, str]
    body: str

    def shape(self) -> str:
        heads = "".join(f"{k}: {v}\n" for k, v in sorted(self.headers.items()))
        return f"{self.version} {self.status}\n{heads}\n{self.body}"


#: headers whose values must agree (others: Date, Server, Content-Length, keep-alive, ...)
COMPARED_HEADERS = (
    "content-type",
    "content-encoding",
    "content-disposition",
    "content-description",
    "content-transfer-encoding",
    "expires",
    "cache-control",
    "pragma",
    "location",
)
#: elements whose non-zero value is an id or a time of one side
VOLATILE = (
    "id",
    "batch_id",
    "create_time",
    "completion_time",
    "server_time",
    "canonical_resultid",
    "canonical_instance_id",
    "elapsed_time",
    "cpu_time",
    "total_cpu_time",
    "credit_canonical",
)


@dataclass
class Side:
    """One project (real or emulated) and what a scenario learnt about it."""

    name: str
    url: str
    project_dir: str  # where its files are (named in some error texts)
    http: httpx.Client
    ids: dict[str, int] = field(default_factory=dict)
    #: seconds to retry a request the project refuses or answers "Can't connect to database"
    #: (others' tests stop the real project's web server or database for a while; such a
    #: request did nothing)
    patience: float = 0.0

    def post(self, page: str, request: str, files: Sequence[tuple[str, str, bytes]] = ()) -> Raw:
        """POST ``request`` (and file parts: field, filename, data) as multipart/form-data."""
        parts = [
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="request"\r\n\r\n'.encode()
            + request.encode()
            + b"\r\n"
        ]
        for fld, fname, data in files:
            parts.append(
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{fld}"; '
                f'filename="{fname}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
                + data
                + b"\r\n"
            )
        body = b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()
        return self._fetch(
            "POST",
            page,
            content=body,
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        )

    def post_form(self, page: str, request: str) -> Raw:
        """POST ``request`` urlencoded (as curl -d does)."""
        return self._fetch(
            "POST",
            page,
            content=urlencode({"request": request}).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    def get(self, page_and_query: str) -> Raw:
        return self._fetch("GET", page_and_query)

    def _fetch(self, method: str, page: str, **kw: Any) -> Raw:
        deadline = time.monotonic() + self.patience
        while True:
            try:
                raw = self._fetch_once(method, page, **kw)
                if b"Can't connect to database" not in raw.content:
                    return raw
                why = "its database is down"
            except httpx.ConnectError as exc:
                why = f"it refuses connections ({exc})"
            if time.monotonic() > deadline:
                why = f"{self.name} project unavailable for {self.patience:g} s: {why}"
                if os.environ.get("GAHP_REQUIRE_BOINC_SERVER") == "1" or not self.patience:
                    pytest.fail(why)
                pytest.skip(why)
            time.sleep(1)

    def _fetch_once(self, method: str, page: str, **kw: Any) -> Raw:
        """One request on a new connection (BOINC 8.3 sends more bytes than it announces in
        some replies, which would spoil the next reply on a kept-alive connection); a reply
        cut short is kept, marked incomplete."""
        kw["headers"] = {**kw.get("headers", {}), "Connection": "close"}
        with self.http.stream(method, self.url + page, **kw) as resp:
            data, complete = b"", True
            try:
                for chunk in resp.iter_bytes():
                    data += chunk
            except httpx.RemoteProtocolError:
                complete = False
            return Raw(resp.status_code, resp.http_version, resp.headers, data, complete)

    def normalise(self, resp: Raw) -> Reply:
        headers = {k: resp.headers[k] for k in COMPARED_HEADERS if k in resp.headers}
        if "content-disposition" in headers:
            headers["content-disposition"] = re.sub(  # random parts of file names
                r"_r\d+_(\d+)$|_[A-Za-z0-9]{6}(\.zip)$",
                lambda m: f"_rN_{m[1]}" if m[1] else f"_R{m[2]}",
                headers["content-disposition"],
            )
        if not resp.complete:
            headers["incomplete"] = f"{len(resp.content)} of {resp.headers['content-length']}"
        text = resp.content.decode("utf-8", "replace")
        if resp.content.startswith(b"PK"):  # a zip: its members, not its bytes (times, ids)
            with zipfile.ZipFile(io.BytesIO(resp.content)) as z:
                text = "".join(
                    f"zip member {re.sub(r'_r[0-9]+_', '_rN_', i.filename)}: {z.read(i)!r}\n"
                    for i in z.infolist()
                )
        text = text.replace(self.url, "<URL>")
        for tag in VOLATILE:
            text = re.sub(
                rf"(<{tag}>)([^<]*)(</{tag}>)",
                lambda m: m[0] if m[2].strip() in ("", "0") else f"{m[1]}#{m[3]}",
                text,
            )
        # what the app wrote (the layout around it is compared)
        text = re.sub(
            r"(&lt;stderr_txt&gt;\n).*?(\n?\n&lt;/stderr_txt&gt;)", r"\1#\2", text, flags=re.S
        )
        text = text.replace(self.project_dir, "<PROJECT>")
        text = re.sub(r"<address>.* Server at \S+ Port \d+</address>", "<address>#</address>", text)
        # create_work's report of a failed insert quotes the whole SQL (ids, times, XML)
        text = re.sub(
            r"\nquery=insert into workunit values .*?\n(wu\.insert_batch)",
            r"\nquery=#\n\1",
            text,
            flags=re.S,
        )
        return Reply(resp.status_code, resp.http_version, headers, text)


def wrap(cmd: str, inner: str = "", auth: str | None = "") -> str:
    """A request as our GAHP writes it (``auth=None``: no authenticator element)."""
    a = "" if auth is None else f"<authenticator>{auth}</authenticator>\n"
    return f"<{cmd}>\n{a}{inner}</{cmd}>\n"


def el(tag: str, value: object) -> str:
    return f"<{tag}>{value}</{tag}>\n"


def tag_value(resp: Raw, tag: str) -> str:
    m = re.search(rf"<{tag}>([^<]*)</{tag}>", resp.text)
    assert m, (tag, resp.status_code, resp.text[:500])
    return m[1].strip()


# ---- finished jobs ----------------------------------------------------------------------------


@dataclass
class Finished:
    """A single-job batch of the submitter on the real server that is (or will be) over."""

    batch: str
    job: str
    failed: bool
    expire_time: str = EXPIRE
    retired: bool = False
    output: bytes = b""  # the DONE job's output (uppercase: the emulator's input for it)


def _single_job_batches(real: RealBoinc, done: bool) -> list[dict[str, str]]:
    # (a DONE job named with a dot, as HTCondor's "...#1.0", gets an empty zip from
    # get_output.php?cmd=workunit_files on BOINC 8.3, a fault not reproduced: docs/emulator.md)
    # (a batch retired while its job still ran keeps completion_time 0 on the real server, a
    # history the mirror cannot replay: only batches that completed before any retire)
    # (only the worker app's: the batch-collect app's outputs are no longer in upload/)
    cond = (
        (
            "w.canonical_resultid>0 AND w.error_mask=0 AND w.name NOT LIKE '%.%'"
            " AND (b.state<>4 OR b.completion_time>0)"
        )
        if done
        else (
            "w.canonical_resultid=0 AND w.error_mask=8 AND EXISTS (SELECT 1 FROM result r"
            " WHERE r.workunitid=w.id AND r.outcome=3 AND r.exit_status=246)"
        )
    )  # --early_exit
    return real.sql(
        "SELECT b.id, b.name AS batch, w.name AS job, b.expire_time, b.state FROM batch b"
        " JOIN workunit w ON w.batch=b.id"
        f" JOIN user u ON u.id=b.user_id JOIN app a ON a.id=b.app_id"
        f" WHERE u.authenticator='{real.auth}' AND a.name='{real.app}' AND {cond}"
        " AND b.name NOT LIKE '%\\_dup' AND (SELECT COUNT(*) FROM workunit x WHERE x.batch=b.id)=1"
        " AND (SELECT COUNT(*) FROM batch c WHERE c.name=b.name)=1"
        " ORDER BY b.id DESC LIMIT 5"
    )


def _submit_single(
    real: Side, auth: str, batch: str, job: str, data: bytes, args: str, expire: str = EXPIRE
) -> None:
    """create_batch + upload + submit_batch of one worker job (helper, not compared)."""
    r = real.post(
        "submit_rpc_handler.php",
        wrap(
            "create_batch",
            el("batch_name", batch) + el("app_name", "worker") + el("expire_time", expire),
            auth,
        ),
    )
    bid = tag_value(r, "batch_id")
    name = phys(data)
    r = real.post(
        "job_file.php", wrap("query_files", el("batch_id", bid) + el("phys_name", name), auth)
    )
    if "<file>0</file>" in r.text:
        r = real.post(
            "job_file.php",
            wrap("upload_files", el("batch_id", bid) + el("phys_name", name), auth),
            [("file_0", "in.txt", data)],
        )
        assert "<success" in r.text, r.text
    r = real.post(
        "submit_rpc_handler.php",
        wrap(
            "submit_batch",
            (
                "<batch>\n"
                + el("batch_id", bid)
                + el("app_name", "worker")
                + el("app_version_num", 0)
                + "<job_params>\n</job_params>\n"
                + "<job>\n"
                + el("name", job)
                + el("command_line", args)
                + "<input_file>\n<mode>local_staged</mode>\n"
                + el("source", name)
                + "</input_file>\n"
                + "</job>\n</batch>\n"
            ),
            auth,
        ),
    )
    assert "<batch_id>" in r.text, r.text


class FinishedJobs:
    """The DONE and the failed job of the real server (found, or submitted and awaited)."""

    def __init__(self, real: RealBoinc, side: Side) -> None:
        self.real = real
        self.side = side
        self.pending: list[Finished] = []
        self.waited = 0.0  # seconds spent waiting for the real volunteer
        self.done = self._find(True) or self._submit(True)
        self.failed = self._find(False) or self._submit(False)

    def _find(self, done: bool) -> Finished | None:
        if os.environ.get("GAHP_DIFF_FRESH_JOBS") == "1":  # as on a fresh server
            return None
        try:
            rows = _single_job_batches(self.real, done)
        except AssertionError:  # no database access: submit
            return None
        if not rows:
            return None
        row = rows[0]
        return Finished(row["batch"], row["job"], not done, row["expire_time"], row["state"] == "4")

    def _submit(self, done: bool) -> Finished:
        kind = "ok" if done else "bad"
        f = Finished(f"{RUN}_fresh_{kind}", f"{RUN}_fresh_{kind}_job", not done)
        _submit_single(
            self.side,
            self.real.auth,
            f.batch,
            f.job,
            IN_OK if done else LONG,
            "--cpu_time 1" if done else "--early_exit --cpu_time 1",
        )
        self.pending.append(f)
        return f

    def wait(self, timeout: float = 150.0) -> None:
        """Until the jobs submitted here are over (the DONE one with its output fetched)."""
        started = time.monotonic()
        deadline = started + timeout
        for f in self.pending:
            want = "ERROR" if f.failed else "DONE"
            while True:
                r = self.side.post(
                    "submit_rpc_handler.php",
                    wrap(
                        "query_batch2",
                        el("min_mod_time", "0") + el("batch_name", f.batch),
                        self.real.auth,
                    ),
                )
                if f"<status>{want}</status>" in r.text:
                    break
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"real job {f.job} not {want} within {timeout:g} s (the "
                        f"project's volunteer is busy?): {r.text[-200:]}"
                    )
                time.sleep(2)
        self.pending.clear()
        self.waited = time.monotonic() - started
        if not self.done.output:
            r = self.side.get(
                f"get_output.php?cmd=workunit_file&auth_str={self.real.auth}"
                f"&wu_name={quote(self.done.job, safe='')}&file_num=0"
            )
            assert r.headers.get("content-type") == "application/octet-stream", r.text
            self.done.output = r.content


def mirror(emu: EmulatorServer, side: Side, auth: str, fin: FinishedJobs) -> None:
    """Give the emulator the same two finished single-job batches."""
    for f in (fin.done, fin.failed):
        data, args = (LONG, "--early_exit") if f.failed else (fin.done.output, "--cpu_time 0.05")
        _submit_single(side, auth, f.batch, f.job, data, args, f.expire_time)
    assert emu.wait_idle(30), "emulator jobs did not finish"
    for f in (fin.done, fin.failed):
        if f.retired:
            r = side.post(
                "submit_rpc_handler.php", wrap("retire_batch", el("batch_name", f.batch), auth)
            )
            assert "<success>" in r.text, r.text


# ---- the scenario -----------------------------------------------------------------------------


@dataclass
class Ctx:
    """What every step may use: the side, accounts, finished jobs."""

    side: Side
    auth: str
    nosubmit: str
    fin: FinishedJobs


Step = Callable[[Ctx], Raw]
STEPS: dict[str, Step] = {}


def step(name: str) -> Callable[[Step], Step]:
    def add(fn: Step) -> Step:
        STEPS[name] = fn
        return fn

    return add


def rpc(c: Ctx, cmd: str, inner: str = "", auth: str | None = "", page: str = "") -> Raw:
    a = c.auth if auth == "" else auth
    return c.side.post(page or "submit_rpc_handler.php", wrap(cmd, inner, a))


B1, B2, B3, B4, B5 = (f"{RUN}_b{i}" for i in range(1, 6))
J1, J2, J3, J4, J5, J6, J7, J8 = (f"{RUN}_j{i}" for i in range(1, 9))


# -- no account needed
step("ping")(lambda c: c.side.post("submit_rpc_handler.php", "<ping> </ping>\n"))
step("ping_get_no_request")(lambda c: c.side.get("submit_rpc_handler.php"))
step("ping_urlencoded")(lambda c: c.side.post_form("submit_rpc_handler.php", "<ping> </ping>"))
step("ping_in_query_string")(
    lambda c: c.side.get("submit_rpc_handler.php?request=%3Cping%3E%20%3C%2Fping%3E")
)
step("no_such_page")(lambda c: c.side.get("submit_rpc_handler2.php"))
step("malformed_request")(
    lambda c: c.side.post(
        "submit_rpc_handler.php", "<query_batch2>\n<authenticator>x</authenticator>\n"
    )
)
step("bad_command")(lambda c: rpc(c, "launch_rockets"))
step("job_file_bad_command")(lambda c: rpc(c, "delete_files", page="job_file.php"))
step("job_file_get")(lambda c: c.side.get("job_file.php"))
step("job_file_malformed")(lambda c: c.side.post("job_file.php", "<query_files>\n"))

# -- accounts
step("get_templates")(lambda c: rpc(c, "get_templates", el("app_name", "worker")))
step("get_templates_no_authenticator")(
    lambda c: rpc(c, "get_templates", el("app_name", "worker"), auth=None)
)
step("get_templates_bad_authenticator")(
    lambda c: rpc(c, "get_templates", el("app_name", "worker"), auth="0" * 32)
)
step("get_templates_non_submitter")(
    lambda c: rpc(c, "get_templates", el("app_name", "worker"), auth=c.nosubmit)
)
step("get_templates_nothing_named")(lambda c: rpc(c, "get_templates"))
step("get_templates_unknown_app")(lambda c: rpc(c, "get_templates", el("app_name", "nosuchapp")))
step("get_templates_unknown_job")(lambda c: rpc(c, "get_templates", el("job_name", f"{RUN}_no")))
step("query_batches_bad_authenticator")(lambda c: rpc(c, "query_batches", auth="0" * 32))
step("query_batches_non_submitter")(lambda c: rpc(c, "query_batches", auth=c.nosubmit))


def _create(c: Ctx, name: str, app: str = "worker", auth: str = "") -> Raw:
    return rpc(
        c,
        "create_batch",
        el("batch_name", name) + el("app_name", app) + el("expire_time", EXPIRE),
        auth,
    )


@step("create_batch")
def _create_batch(c: Ctx) -> Raw:
    r = _create(c, B1)
    c.side.ids["b1"] = int(tag_value(r, "batch_id"))
    return r


step("create_batch_unknown_app")(lambda c: _create(c, f"{RUN}_x", app="nosuchapp"))
step("create_batch_non_submitter")(lambda c: _create(c, f"{RUN}_x", auth=c.nosubmit))
step("create_batch_bad_authenticator")(lambda c: _create(c, f"{RUN}_x", auth="f" * 32))


def _files(
    c: Ctx,
    cmd: str,
    names: list[str],
    batch: str | None = "b1",
    auth: str = "",
    files: list[tuple[str, str, bytes]] = (),
) -> Raw:
    inner = el("batch_id", c.side.ids[batch]) if batch else ""
    inner += "".join(el("phys_name", n) for n in names)
    a = c.auth if auth == "" else auth
    return c.side.post("job_file.php", wrap(cmd, inner, a), files)


step("query_files_absent")(lambda c: _files(c, "query_files", [phys(IN_A), phys(IN_B)]))
step("query_files_non_submitter")(lambda c: _files(c, "query_files", [phys(IN_A)], auth=c.nosubmit))
step("query_files_bad_authenticator")(
    lambda c: _files(c, "query_files", [phys(IN_A)], auth="1" * 32)
)
step("query_files_bad_name")(lambda c: _files(c, "query_files", ["../etc/passwd"], batch=None))
step("upload_files_count_mismatch")(
    lambda c: _files(c, "upload_files", [phys(IN_A), phys(IN_B)], files=[("file_0", "a.txt", IN_A)])
)
step("upload_files_non_submitter")(
    lambda c: _files(
        c, "upload_files", [phys(IN_A)], auth=c.nosubmit, files=[("file_0", "a.txt", IN_A)]
    )
)
step("upload_files")(
    lambda c: _files(c, "upload_files", [phys(IN_A)], files=[("file_0", "a.txt", IN_A)])
)
step("query_files_present")(lambda c: _files(c, "query_files", [phys(IN_A)], batch=None))
step("query_files_unknown_batch")(
    lambda c: c.side.post(
        "job_file.php",
        wrap("query_files", el("batch_id", 999999999) + el("phys_name", phys(IN_A)), c.auth),
    )
)
step("upload_files_unknown_batch")(
    lambda c: c.side.post(
        "job_file.php",
        wrap(
            "upload_files", el("batch_id", 999999999) + el("phys_name", phys(IN_B + b"u")), c.auth
        ),
        [("file_0", "u.txt", IN_B + b"u")],
    )
)
step("upload_files_immutability")(
    lambda c: _files(c, "upload_files", [phys(IN_A)], batch=None, files=[("file_0", "a.txt", IN_B)])
)
step("query_files_same_batch_twice")(lambda c: _files(c, "query_files", [phys(IN_A)]))
step("query_files_name_twice")(
    lambda c: _files(c, "query_files", [phys(IN_A + b"2"), phys(IN_A + b"2")], batch=None)
)
step("query_files_later_delete_time")(
    lambda c: c.side.post(
        "job_file.php",
        wrap("query_files", el("delete_time", "2000000000") + el("phys_name", phys(IN_A)), c.auth),
    )
)
step("upload_files_already_there")(
    lambda c: _files(c, "upload_files", [phys(IN_A)], batch=None, files=[("file_0", "a.txt", IN_A)])
)
step("upload_files_name_twice")(
    lambda c: _files(
        c,
        "upload_files",
        [phys(IN_B + b"2"), phys(IN_B + b"2")],
        batch=None,
        files=[("file_0", "b.txt", IN_B + b"2"), ("file_1", "b.txt", IN_B + b"2")],
    )
)
step("upload_files_too_many")(
    lambda c: _files(
        c,
        "upload_files",
        [f"{RUN}_{i}.txt" for i in range(21)],
        batch=None,
        files=[(f"file_{i}", f"f{i}.txt", b"%d" % i) for i in range(21)],
    )
)
step("upload_files_too_big")(
    lambda c: _files(
        c,
        "upload_files",
        [f"{RUN}_big.bin"],
        batch=None,
        files=[("file_0", "big.bin", BIG[: 2 * 1024 * 1024 + 1])],
    )
)
step("post_too_big")(
    lambda c: _files(
        c, "upload_files", [f"{RUN}_huge.bin"], batch=None, files=[("file_0", "huge.bin", BIG)]
    )
)
step("upload_files_bad_name")(
    lambda c: _files(c, "upload_files", ["a/b.txt"], batch=None, files=[("file_0", "b.txt", IN_B)])
)


def _submit(
    c: Ctx, batch: str, jobs: list[tuple[str, str, list[str]]], app: str = "worker", auth: str = ""
) -> Raw:
    bid = c.side.ids.get(batch, batch)
    body = "<batch>\n" + el("batch_id", bid) + el("app_name", app) + el("app_version_num", 0)
    # a memory bound no volunteer host has: the jobs stay UNSENT on both sides
    body += (
        "<job_params>\n"
        + el("rsc_fpops_est", "1000000000.000000")
        + el("rsc_memory_bound", "1000000000000000.000000")
        + "</job_params>\n"
    )
    for name, args, inputs in jobs:
        body += "<job>\n" + el("name", name) + el("command_line", args)
        body += "".join(
            "<input_file>\n<mode>local_staged</mode>\n" + el("source", s) + "</input_file>\n"
            for s in inputs
        )
        body += "</job>\n"
    return rpc(c, "submit_batch", body + "</batch>\n", auth)


def _input(mode: str, source: str) -> str:
    return "<input_file>\n" + el("mode", mode) + el("source", source) + "</input_file>\n"


REMOTE_INPUT = (
    "<input_file>\n<mode>remote</mode>\n<url>http://127.0.0.1:9/in.txt</url>\n"
    f"<nbytes>{len(IN_A)}</nbytes>\n<md5>{hashlib.md5(IN_A).hexdigest()}</md5>\n"
    "</input_file>\n"
)


def _submit_inputs(c: Ctx, batch: str, jobs: list[tuple[str, list[str]]]) -> Raw:
    """submit_batch of one-input jobs whose <input_file> elements are given whole."""
    bid = c.side.ids.get(batch, batch)
    body = (
        "<batch>\n"
        + el("batch_id", bid)
        + el("app_name", "worker")
        + el("app_version_num", 0)
        + "<job_params>\n"
        + el("rsc_fpops_est", "1000000000.000000")
        + el("rsc_memory_bound", "1000000000000000.000000")
        + "</job_params>\n"
    )
    for name, files in jobs:
        body += "<job>\n" + el("name", name) + el("command_line", "--cpu_time 1")
        body += "".join(files) + "</job>\n"
    return rpc(c, "submit_batch", body + "</batch>\n")


# input modes other than local_staged: refused as stage_files() refuses them (before the
# batch is looked up), and accepted into a batch of their own (b5, below)
step("submit_batch_unsupported_mode")(
    lambda c: _submit_inputs(c, "b1", [(J1, [_input("ftp", "x")])])
)
step("submit_batch_sandbox_unknown")(
    lambda c: _submit_inputs(c, "b1", [(J1, [_input("sandbox", f"{RUN}_none")])])
)
step("submit_batch_local_missing")(
    lambda c: _submit_inputs(c, "b1", [(J1, [_input("local", f"/nonexistent/{RUN}")])])
)
step("submit_batch_wrong_input_count")(
    lambda c: _submit(c, "b1", [(J1, "--cpu_time 1", [phys(IN_A), phys(IN_A)])])
)
step("submit_batch_non_submitter")(
    lambda c: _submit(c, "b1", [(J1, "--cpu_time 1", [phys(IN_A)])], auth=c.nosubmit)
)
step("submit_batch_unknown_app")(
    lambda c: _submit(c, "b1", [(J1, "--cpu_time 1", [phys(IN_A)])], app="nosuchapp")
)
step("submit_batch_missing_file")(lambda c: _submit(c, "b1", [(J1, "--cpu_time 1", [phys(IN_B)])]))
step("submit_batch_double_quotes")(
    lambda c: _submit(c, "b1", [(J1, '--cpu_time "1"', [phys(IN_A)])])
)
step("submit_batch_duplicate_job")(
    lambda c: _submit(
        c, "b1", [(J1, "--cpu_time 1", [phys(IN_A)]), (J1, "--cpu_time 1", [phys(IN_A)])]
    )
)
step("submit_batch_nothing")(lambda c: rpc(c, "submit_batch"))
step("submit_batch_unknown_batch")(
    lambda c: _submit(c, "999999999", [(J1, "--cpu_time 1", [phys(IN_A)])])
)


@step("submit_batch")
def _submit_batch(c: Ctx) -> Raw:
    return _submit(
        c, "b1", [(J1, "--cpu_time 1", [phys(IN_A)]), (J2, "--cpu_time 1", [phys(IN_A)])]
    )


step("submit_batch_again")(lambda c: _submit(c, "b1", [(J3, "--cpu_time 1", [phys(IN_A)])]))
step("query_batches")(lambda c: _only_run(rpc(c, "query_batches")))
step("query_batches_cpu_time")(lambda c: _only_run(rpc(c, "query_batches", el("get_cpu_time", 1))))
step("query_batch2")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0.000000") + el("batch_name", B1))
)
step("query_batch2_no_batch")(lambda c: rpc(c, "query_batch2", el("min_mod_time", "0")))
step("query_batch2_unknown_batch")(
    lambda c: rpc(
        c,
        "query_batch2",
        el("min_mod_time", "0.000000") + el("batch_name", B1) + el("batch_name", f"{RUN}_nob"),
    )
)
step("query_batch2_min_mod_time_now")(
    lambda c: rpc(
        c, "query_batch2", el("min_mod_time", f"{time.time() + 5:f}") + el("batch_name", B1)
    )
)
step("query_batch2_future_min_mod_time")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "2000000000.000000") + el("batch_name", B1))
)
step("query_batch2_non_submitter")(
    lambda c: rpc(
        c, "query_batch2", el("min_mod_time", "0.000000") + el("batch_name", B1), auth=c.nosubmit
    )
)
step("query_batch_unsent")(
    lambda c: rpc(c, "query_batch", el("batch_id", c.side.ids["b1"]) + el("get_job_details", 1))
)
step("query_batch_non_submitter")(
    lambda c: rpc(c, "query_batch", el("batch_id", c.side.ids["b1"]), auth=c.nosubmit)
)
step("query_batch_unspecified")(lambda c: rpc(c, "query_batch", el("get_job_details", 1)))
step("query_batch_unknown")(
    lambda c: rpc(c, "query_batch", el("batch_name", f"{RUN}_nob") + el("get_job_details", 1))
)
step("query_completed_job_unsent")(lambda c: rpc(c, "query_completed_job", el("job_name", J1)))
step("query_completed_job_non_submitter")(
    lambda c: rpc(c, "query_completed_job", el("job_name", J1), auth=c.nosubmit)
)
step("query_completed_job_unknown")(
    lambda c: rpc(c, "query_completed_job", el("job_name", f"{RUN}_no"))
)
step("get_output_unsent")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}&wu_name={J1}&file_num=0"
    )
)
step("abort_jobs_none")(lambda c: rpc(c, "abort_jobs"))
step("abort_jobs_unknown")(
    lambda c: rpc(c, "abort_jobs", el("job_name", J1) + el("job_name", f"{RUN}_no"))
)
step("abort_jobs_non_submitter")(
    lambda c: rpc(c, "abort_jobs", el("job_name", J1), auth=c.nosubmit)
)
step("abort_jobs")(lambda c: rpc(c, "abort_jobs", el("job_name", J1) + el("job_name", J2)))
step("query_batch2_after_abort")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0.000000") + el("batch_name", B1))
)
step("query_batch_after_abort")(
    lambda c: rpc(c, "query_batch", el("batch_name", B1) + el("get_job_details", 1))
)
step("query_completed_job_aborted")(lambda c: rpc(c, "query_completed_job", el("job_name", J1)))
step("set_expire_time")(
    lambda c: rpc(
        c, "set_expire_time", el("batch_name", B1) + el("expire_time", "1950000000.250000")
    )
)
step("query_batch_after_set_expire_time")(
    lambda c: rpc(c, "query_batch", el("batch_name", B1) + el("get_cpu_time", 1))
)
step("set_expire_time_unknown")(
    lambda c: rpc(
        c,
        "set_expire_time",
        el("batch_name", f"{RUN}_nob") + el("expire_time", "1950000000.000000"),
    )
)
step("set_expire_time_non_submitter")(
    lambda c: rpc(
        c, "set_expire_time", el("batch_name", B1) + el("expire_time", "1"), auth=c.nosubmit
    )
)
step("retire_batch_unknown")(lambda c: rpc(c, "retire_batch", el("batch_name", f"{RUN}_nob")))
step("retire_batch_non_submitter")(
    lambda c: rpc(c, "retire_batch", el("batch_name", B1), auth=c.nosubmit)
)
step("retire_batch")(lambda c: rpc(c, "retire_batch", el("batch_name", B1)))


def _new_batch(key: str, name: str) -> Step:
    def create(c: Ctx) -> Raw:
        r = _create(c, name)
        c.side.ids[key] = int(tag_value(r, "batch_id"))
        return r

    return create


def _after(seconds: float, fn: Step) -> Step:
    """``fn``, then a pause (for what either side does in the background)."""

    def run(c: Ctx) -> Raw:
        r = fn(c)
        time.sleep(seconds)
        return r

    return run


# a batch past its expire time: BOINC 8.3 as deployed runs no expiry daemon, so its job stays
step("create_batch_3")(_new_batch("b3", B3))
step("submit_batch_3")(lambda c: _submit(c, "b3", [(J4, "--cpu_time 1", [phys(IN_A)])]))
step("set_expire_time_past")(
    _after(
        1.5,
        lambda c: rpc(
            c, "set_expire_time", el("batch_name", B3) + el("expire_time", "1700000000.123456")
        ),
    )
)
step("query_batch2_expired")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0") + el("batch_name", B3))
)
step("abort_jobs_expired")(lambda c: rpc(c, "abort_jobs", el("job_name", J4)))
# retiring a batch whose job was never sent cancels it
step("create_batch_4")(_new_batch("b4", B4))
step("submit_batch_4")(lambda c: _submit(c, "b4", [(J5, "--cpu_time 1", [phys(IN_A)])]))
step("retire_batch_unsent")(lambda c: rpc(c, "retire_batch", el("batch_name", B4)))
step("query_batch2_retired_unsent")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0") + el("batch_name", B4))
)
step("query_batch_retired_unsent")(
    lambda c: rpc(c, "query_batch", el("batch_name", B4) + el("get_job_details", 1))
)
# every mode but sandbox into a new batch: the jobs exist, UNSENT (no host has the memory)
step("create_batch_5")(_new_batch("b5", B5))
step("submit_batch_input_modes")(
    lambda c: _submit_inputs(
        c,
        "b5",
        [
            (J6, [_input("inline", f"inline input {RUN}\n")]),
            (J7, [REMOTE_INPUT]),
            (J8, [_input("local", "/etc/hostname")]),
        ],
    )
)
step("query_batch2_input_modes")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0") + el("batch_name", B5))
)
step("retire_batch_input_modes")(lambda c: rpc(c, "retire_batch", el("batch_name", B5)))
step("query_batches_after_retire")(lambda c: _only_run(rpc(c, "query_batches")))
step("query_batch2_retired")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0.000000") + el("batch_name", B1))
)


def _only_run(r: Raw) -> Raw:
    """query_batches lists every batch of the user: keep only this run's batches."""
    mine = [f"<name>{b}</name>" for b in (B1, B2, B3, B4, B5)]
    text = re.sub(
        r"    <batch>\n.*?   </batch>\n",
        lambda m: m[0] if any(n in m[0] for n in mine) else "",
        r.text,
        flags=re.S,
    )
    return dataclasses.replace(r, content=text.encode())


# -- finished jobs (the real ones are awaited first)
def _done_batch(c: Ctx) -> Raw:
    r = rpc(c, "query_batch", el("batch_name", c.fin.done.batch) + el("get_job_details", 1))
    c.side.ids["done_batch"] = int(re.search(r"<id>(\d+)</id>", r.text)[1])
    c.side.ids["done_wu"] = int(re.search(r"<job>\s*<id>(\d+)</id>", r.text)[1])
    c.side.ids["done_res"] = int(tag_value(r, "canonical_instance_id"))
    return r


step("query_batch_done")(_done_batch)


@step("create_batch_2")
def _create_batch_2(c: Ctx) -> Raw:
    r = _create(c, B2)
    c.side.ids["b2"] = int(tag_value(r, "batch_id"))
    return r


step("submit_batch_existing_job")(
    lambda c: _submit(c, "b2", [(c.fin.done.job, "--cpu_time 1", [phys(IN_A)])])
)
ODD = f"{RUN}_x&amp;y&lt;z&gt;"  # a job name with XML's special characters (escaped here)
step("submit_batch_odd_name")(lambda c: _submit(c, "b2", [(ODD, "--cpu_time 1", [phys(IN_A)])]))
step("query_batch2_odd_name")(
    lambda c: rpc(c, "query_batch2", el("min_mod_time", "0") + el("batch_name", B2))
)
step("query_completed_job_odd_name")(lambda c: rpc(c, "query_completed_job", el("job_name", ODD)))
step("abort_jobs_odd_name")(lambda c: rpc(c, "abort_jobs", el("job_name", ODD)))
step("abort_jobs_odd_name_unknown")(
    lambda c: rpc(c, "abort_jobs", el("job_name", ODD.replace("x", "w")))
)


def _failed_batch(c: Ctx) -> Raw:
    r = rpc(c, "query_batch", el("batch_name", c.fin.failed.batch) + el("get_job_details", 1))
    c.side.ids["failed_wu"] = int(re.search(r"<job>\s*<id>(\d+)</id>", r.text)[1])
    return r


step("query_batch_failed")(_failed_batch)
step("query_batch2_done_and_failed")(
    lambda c: rpc(
        c,
        "query_batch2",
        el("min_mod_time", "0.000000")
        + el("batch_name", c.fin.done.batch)
        + el("batch_name", c.fin.failed.batch),
    )
)
step("query_completed_job_done")(
    lambda c: rpc(c, "query_completed_job", el("job_name", c.fin.done.job))
)
step("query_completed_job_failed")(
    lambda c: rpc(c, "query_completed_job", el("job_name", c.fin.failed.job))
)
step("get_templates_by_job")(lambda c: rpc(c, "get_templates", el("job_name", c.fin.done.job)))
step("get_templates_by_job_non_submitter")(
    lambda c: rpc(c, "get_templates", el("job_name", c.fin.failed.job), auth=c.nosubmit)
)
step("get_output")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}"
        f"&wu_name={quote(c.fin.done.job, safe='')}&file_num=0"
    )
)
step("get_output_failed_job")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}"
        f"&wu_name={quote(c.fin.failed.job, safe='')}&file_num=0"
    )
)
step("get_output_bad_authenticator")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={'0' * 32}"
        f"&wu_name={quote(c.fin.done.job, safe='')}&file_num=0"
    )
)
step("get_output_non_owner")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.nosubmit}"
        f"&wu_name={quote(c.fin.done.job, safe='')}&file_num=0"
    )
)
step("get_output_unknown_job")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}&wu_name={RUN}_no&file_num=0"
    )
)
step("get_output_bad_file_num")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}"
        f"&wu_name={quote(c.fin.done.job, safe='')}&file_num=3"
    )
)
step("get_output_file_num_not_numeric")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}"
        f"&wu_name={quote(c.fin.done.job, safe='')}&file_num=abc"
    )
)
step("get_output_file_num_negative")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_file&auth_str={c.auth}"
        f"&wu_name={quote(c.fin.done.job, safe='')}&file_num=-1"
    )
)
step("get_output_bad_command")(
    lambda c: c.side.get(f"get_output.php?cmd=nothing&auth_str={c.auth}")
)


def _signed(c: Ctx, thing: object) -> str:
    return hashlib.md5(f"{c.auth}{thing}".encode()).hexdigest()


step("get_output_result_file")(
    lambda c: c.side.get(
        f"get_output.php?cmd=result_file&result_name={quote(c.fin.done.job, safe='')}_0"
        f"&file_num=0&auth_str={_signed(c, c.fin.done.job + '_0')}"
    )
)
step("get_output_result_file_unsigned")(
    lambda c: c.side.get(
        f"get_output.php?cmd=result_file&result_name={quote(c.fin.done.job, safe='')}_0"
        f"&file_num=0&auth_str={c.auth}"
    )
)
step("get_output_result_file_unknown")(
    lambda c: c.side.get(
        f"get_output.php?cmd=result_file&result_name={RUN}_no_0&file_num=0&auth_str={c.auth}"
    )
)
step("get_output_batch_files")(
    lambda c: c.side.get(
        f"get_output.php?cmd=batch_files&batch_id={c.side.ids['done_batch']}"
        f"&auth_str={_signed(c, c.side.ids['done_batch'])}"
    )
)
step("get_output_batch_files_unsigned")(
    lambda c: c.side.get(
        f"get_output.php?cmd=batch_files&batch_id={c.side.ids['done_batch']}&auth_str={c.auth}"
    )
)
step("get_output_batch_files_unknown")(
    lambda c: c.side.get(f"get_output.php?cmd=batch_files&batch_id=999999999&auth_str={c.auth}")
)
step("get_output_batch_files_not_numeric")(
    lambda c: c.side.get(f"get_output.php?cmd=batch_files&batch_id=x&auth_str={c.auth}")
)
step("get_output_workunit_files")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_files&wu_id={c.side.ids['done_wu']}"
        f"&auth_str={_signed(c, c.side.ids['done_wu'])}"
    )
)
step("get_output_workunit_files_failed")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_files&wu_id={c.side.ids['failed_wu']}"
        f"&auth_str={_signed(c, c.side.ids['failed_wu'])}"
    )
)
step("get_output_workunit_files_unsigned")(
    lambda c: c.side.get(
        f"get_output.php?cmd=workunit_files&wu_id={c.side.ids['done_wu']}&auth_str={c.auth}"
    )
)
step("get_output_workunit_files_unknown")(
    lambda c: c.side.get(f"get_output.php?cmd=workunit_files&wu_id=999999999&auth_str={c.auth}")
)
step("get_output2_workunit")(
    lambda c: c.side.get(
        f"get_output2.php?cmd=workunit&wu_id={c.side.ids['done_wu']}&auth={c.auth}"
    )
)
step("get_output2_file")(
    lambda c: c.side.get(
        f"get_output2.php?cmd=file&result_id={c.side.ids['done_res']}&file_num=0&auth={c.auth}"
    )
)
step("get_output2_failed_job")(
    lambda c: c.side.get(
        f"get_output2.php?cmd=workunit&wu_id={c.side.ids['failed_wu']}&auth={c.auth}"
    )
)
step("get_output2_unknown_job")(
    lambda c: c.side.get(f"get_output2.php?cmd=workunit&wu_id=999999999&auth={c.auth}")
)
step("get_output2_unknown_instance")(
    lambda c: c.side.get(f"get_output2.php?cmd=file&result_id=999999999&file_num=0&auth={c.auth}")
)
step("get_output2_bad_file_num")(
    lambda c: c.side.get(
        f"get_output2.php?cmd=file&result_id={c.side.ids['done_res']}&file_num=2&auth={c.auth}"
    )
)
step("get_output2_file_num_not_numeric")(
    lambda c: c.side.get(
        f"get_output2.php?cmd=file&result_id={c.side.ids['done_res']}&file_num=x&auth={c.auth}"
    )
)
step("get_output2_wu_id_not_numeric")(
    lambda c: c.side.get(f"get_output2.php?cmd=workunit&wu_id=x&auth={c.auth}")
)
step("get_output2_bad_command")(lambda c: c.side.get(f"get_output2.php?cmd=zip&auth={c.auth}"))
step("get_output2_bad_authenticator")(
    lambda c: c.side.get(
        f"get_output2.php?cmd=workunit&wu_id={c.side.ids['done_wu']}&auth={'0' * 32}"
    )
)


def _logged_in(c: Ctx, page_and_query: str, auth: str = "") -> Raw:
    """A GET with BOINC's login cookie (get_output3.php knows no other authentication)."""
    return c.side._fetch("GET", page_and_query, headers={"Cookie": f"auth={auth or c.auth}"})


# get_output3.php (batch-collect outputs) asked about a job of an ordinary app: its outputs
# were never moved to results/<batch>/
step("get_output3_file_not_collected")(
    lambda c: _logged_in(
        c, f"get_output3.php?action=get_file&result_id={c.side.ids['done_res']}&index=0&download=1"
    )
)
step("get_output3_bad_index")(
    lambda c: _logged_in(
        c, f"get_output3.php?action=get_file&result_id={c.side.ids['done_res']}&index=4"
    )
)
step("get_output3_unknown_instance")(
    lambda c: _logged_in(c, "get_output3.php?action=get_file&result_id=999999999&index=0")
)
step("get_output3_not_owner")(
    lambda c: _logged_in(
        c,
        f"get_output3.php?action=get_file&result_id={c.side.ids['done_res']}&index=0",
        auth=c.nosubmit,
    )
)
step("get_output3_batch_zip_no_dir")(
    lambda c: _logged_in(
        c, f"get_output3.php?action=get_batch_zip&batch_id={c.side.ids['done_batch']}"
    )
)
step("get_output3_batch_tar_no_dir")(
    lambda c: _logged_in(
        c, f"get_output3.php?action=get_batch_tar&batch_id={c.side.ids['done_batch']}"
    )
)

#: steps that need the finished jobs, and the ids found on the way
FINISHED_FROM = "query_batch_done"

#: Differences kept on purpose: step -> (why, what the real server's reply holds, what the
#: emulator's holds instead); see docs/emulator.md. A listed step whose replies agree, or
#: differ otherwise, fails the test, so that the list stays exact.
KNOWN: dict[str, tuple[str, str, str]] = {
    "get_output2_bad_authenticator": (
        "BOINC 8.3's get_output2.php serves any job's outputs whatever `auth` says; the "
        "emulator checks it is the owner's authenticator",
        "content-type: application/octet-stream",
        "\n\nERROR: bad authenticator",
    ),
}


@dataclass
class Run:
    """The normalised replies of both sides, and how long it took (waits for the real
    volunteer aside)."""

    real: dict[str, Reply]
    emu: dict[str, Reply]
    seconds: float


@pytest.fixture(scope="module")
def run(real_boinc: RealBoinc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Every step on the real server, then on the emulator; the normalised replies."""
    start = time.monotonic()
    state = tmp_path_factory.mktemp("emulator")
    # the emulator's defaults: a stock project (no expiry of leased batches, retire cancels
    # only unsent jobs), as the real one
    emu = EmulatorServer(state_dir=state, job_delay=0.05, volunteers=2)
    with emu, httpx.Client(timeout=60) as rh, httpx.Client(timeout=60) as eh:
        emu.add_user("gahpuser", True, authenticator=real_boinc.auth)
        emu.add_user("nosubmit", False, authenticator=real_boinc.nosubmit_auth)
        real = Side("real", real_boinc.url, str(real_boinc.project_dir), rh, patience=90)
        side = Side("emulator", emu.url, str(state), eh)
        fin = FinishedJobs(real_boinc, real)
        replies: dict[str, dict[str, Reply]] = {"real": {}, "emulator": {}}
        names = list(STEPS)
        cut = names.index(FINISHED_FROM)
        for s in (real, side):
            ctx = Ctx(s, real_boinc.auth, real_boinc.nosubmit_auth, fin)
            for i, name in enumerate(names):
                if i == cut:
                    if s is real:
                        fin.wait()
                    else:
                        mirror(emu, side, real_boinc.auth, fin)
                replies[s.name][name] = s.normalise(STEPS[name](ctx))
        assert not emu.errors, emu.errors
        if os.environ.get("GAHP_DIFF_DUMP"):  # to read both sides' replies side by side
            out = Path(os.environ["GAHP_DIFF_DUMP"])
            out.mkdir(parents=True, exist_ok=True)
            for side_name, got in replies.items():
                for i, (name, reply) in enumerate(got.items()):
                    (out / f"{i:03d}-{name}.{side_name}").write_text(reply.shape())
        yield Run(replies["real"], replies["emulator"], time.monotonic() - start - fin.waited)


#: Steps that log in by cookie: the real server's error page then carries the project's whole
#: navigation bar for the user (site decoration, configured per project); the emulator's has
#: the visitor's short head. Their status, headers and error message are compared.
LOGGED_IN_PAGES = {name for name in STEPS if name.startswith("get_output3_")}


def _page_message(shape: str) -> str:
    """A reply's status and headers, and of an error page only its message."""
    head, sep, _ = shape.partition("<!DOCTYPE")
    found = re.search(r"<h2>Unable to handle request</h2>\s*(.*?)<br>", shape, re.S)
    return head + (f"error page: {found[1].strip()}" if sep and found else shape[len(head) :])


@pytest.mark.parametrize("name", list(STEPS))
def test_same_reply(run: Run, name: str) -> None:
    real, emu = run.real[name].shape(), run.emu[name].shape()
    if name in LOGGED_IN_PAGES:
        real, emu = _page_message(real), _page_message(emu)
    if name in KNOWN:
        why, real_has, emu_has = KNOWN[name]
        assert real != emu, f"{name}: listed in KNOWN but the replies now agree; unlist it"
        assert real_has in real and emu_has in emu, (
            f"{name}: not the listed difference ({why}):\n--- real\n{real}\n--- emulator\n{emu}"
        )
        pytest.skip(f"known difference: {why}")
    diff = "".join(
        difflib.unified_diff(real.splitlines(True), emu.splitlines(True), "real server", "emulator")
    )
    assert emu == real, f"{name}: the emulator differs from the real server:\n{diff}"


def test_fast_enough(run: Run) -> None:
    """The scenario (both sides, without waiting for the real volunteer) is quick."""
    assert run.seconds < 60, run.seconds
