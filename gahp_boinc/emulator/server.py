"""The HTTP side: a threaded server on loopback and the :class:`EmulatorServer` API."""

from __future__ import annotations

import contextlib
import gzip
import ipaddress
import re
import shutil
import socket
import struct
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO
from urllib.parse import urlsplit

from . import responses
from .faults import BEFORE, Fault, FaultInjector
from .forms import Form, cookie_auth, parse_form, parse_query
from .handlers import ProjectConfig, ProjectPages
from .responses import Reply
from .store import Store
from .tamper import Tampering
from .volunteer import Volunteer

SERVER_HEADER = "Apache/2.4 (boinc-emulator)"
_DEFLATE_TYPES = frozenset({"text/html", "text/plain", "text/xml", "application/xml"})
_DEFLATE_MIN = 68  # mod_deflate leaves bodies of at most this many bytes alone
_ROOT_TAG = re.compile(rb"^\s*(?:<\?xml[^>]*\?>\s*)?<([A-Za-z_][\w.-]*)")
_SECRET = re.compile(r"((?:auth|auth_str|authenticator)=)[^&\s]*")


def is_loopback(host: str) -> bool:
    """True if every address ``host`` resolves to is a loopback address."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback for i in infos
    )


def _accepts_gzip(value: str) -> bool:
    """True when an Accept-Encoding header value admits gzip."""
    for item in value.split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() in ("gzip", "x-gzip", "*"):
            q = params.strip().removeprefix("q=").strip()
            try:
                return not q or float(q) > 0
            except ValueError:
                return True
    return False


def _rpc_name(endpoint: str, request: str) -> str:
    """The name a request is counted and faulted under: the root tag of an RPC's
    request document, else the page's name."""
    if endpoint in ("submit_rpc_handler.php", "job_file.php"):
        m = _ROOT_TAG.match(request.encode("utf-8", "replace"))
        if m:
            return m.group(1).decode()
    return endpoint.removesuffix(".php")


def _status_line(reply: Reply) -> str:
    """The status line: a crashed PHP's is Apache's bare HTTP/1.0 500."""
    if reply.crashed:
        return "HTTP/1.0 500 Internal Server Error"
    return f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Every reply closes its connection (as the reference server does), so a burst of
    # requests is a burst of connects: socketserver's default backlog of 5 drops them
    # (1 s SYN retransmits, resets). Apache listens with 511.
    request_queue_size = 511
    block_on_close = False

    def __init__(self, addr: tuple[str, int], emu: EmulatorServer, family: int) -> None:
        self.address_family = family
        self.emu = emu
        super().__init__(addr, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 120  # idle keep-alive connections are closed after this

    def setup(self) -> None:
        super().setup()
        self.server.emu._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.emu._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        self.server.emu._log(_SECRET.sub(r"\1***", format % args))

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch(b"")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch(self._read_body())

    # -- request --

    def _read_body(self) -> bytes | None:
        """The POST body, or None when larger than post_max_size (PHP then drops it)."""
        limit = self.server.emu.config.max_post_size
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body, total = self._read_chunked()
            return body if total <= limit else None
        length = int(self.headers.get("Content-Length") or 0)
        if length <= limit:
            return self.rfile.read(length)
        self._discard(length)
        return None

    def _read_chunked(self) -> tuple[bytes, int]:
        """A chunked body and the sum of its declared chunk sizes; the trailer is dropped."""
        chunks, total = [], 0
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
            total += size
        while self.rfile.readline().strip():
            pass
        return b"".join(chunks), total

    def _discard(self, length: int) -> None:
        """Read and drop ``length`` bytes of body (or up to the end of the stream)."""
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 20))
            if not chunk:
                break
            length -= len(chunk)

    def _dispatch(self, body: bytes | None) -> None:
        emu = self.server.emu
        try:
            url = urlsplit(self.path)
            if not url.path.startswith(emu.project_path):
                self._send(self._not_found())
                return
            endpoint = url.path[len(emu.project_path) :]
            form = parse_form(self.headers.get("Content-Type", ""), body) if body else Form({})
            request = form.fields.get("request", "")  # $_POST only: a query string is ignored
            rpc = _rpc_name(endpoint, request)
            emu._count(rpc, sum(len(f.data) for f in form.files))
            fault = emu.faults.take(rpc, endpoint)
            if fault is not None and fault.kind in BEFORE:
                self._fault_before(fault, endpoint, rpc)
                return
            if fault is not None and fault.kind == "delay":
                emu._stopping.wait(fault.seconds if fault.seconds is not None else 1.0)
            self._send(self._page(endpoint, parse_query(url.query), request, form), fault)
        except Exception:  # noqa: BLE001 - report, never kill the server thread
            emu.errors.append(traceback.format_exc())
            emu._log(traceback.format_exc())
            with contextlib.suppress(OSError):
                self._send(Reply(b"internal emulator error", 500, responses.HTML_TYPE))

    def _page(self, endpoint: str, query: dict[str, str], request: str, form: Form) -> Reply:
        """The reply of the project page at ``endpoint`` (Apache's 404 for no page)."""
        project = self.server.emu.project
        auth = cookie_auth(self.headers.get("Cookie", ""))
        pages: dict[str, Callable[[], Reply | None]] = {
            "submit_rpc_handler.php": lambda: project.submit_rpc(request),
            "job_file.php": lambda: project.job_file(request, form.files),
            "get_output.php": lambda: project.get_output(query),
            "get_output2.php": lambda: project.get_output2(query, auth),
            "get_output3.php": lambda: project.get_output3(query, auth),
            "server_status.php": lambda: project.server_status(query),
        }
        page = pages.get(endpoint)
        reply = page() if page is not None else None
        return reply or self._not_found()

    def _not_found(self) -> Reply:
        """Apache's page for a URL it has no file for."""
        host, port = self.server.server_address[:2]
        return Reply(
            responses.apache_not_found(SERVER_HEADER, str(host), int(port)),
            404,
            "text/html; charset=iso-8859-1",
        )

    # -- reply --

    def _send(self, reply: Reply, fault: Fault | None = None) -> None:
        body = reply.body
        kind = fault.kind if fault is not None else None
        if kind == "reset_after":
            self._reset()
            return
        if kind == "malformed_xml":
            body = body[: max(1, len(body) // 2)]
        closing = bool(
            reply.crashed
            or self.close_connection
            or kind == "truncated"
            or reply.declared_length is not None
        )
        head, body = self._head(reply, body, closing)
        if kind == "truncated":
            body = body[: len(body) // 2]
        self.wfile.write(head + (b"" if self.command == "HEAD" else body))
        self.wfile.flush()
        self.log_request(reply.status, len(body))
        if closing:
            self.close_connection = True

    def _head(self, reply: Reply, body: bytes, closing: bool) -> tuple[bytes, bytes]:
        """The status line and headers of ``reply``, and its body as sent."""
        headers, body = self._deflated(reply, body)
        headers += list(reply.headers)
        length = reply.declared_length if reply.declared_length is not None else len(body)
        headers.append(("Content-Length", str(length)))
        if closing:
            headers.append(("Connection", "close"))
        headers.append(("Content-Type", reply.content_type))
        head = _status_line(reply) + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        return (head + "\r\n").encode("latin-1"), body

    def _deflated(self, reply: Reply, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        """The leading headers and the body as Apache's mod_deflate (Debian's default
        configuration) sends them: text pages longer than 68 bytes vary on Accept-Encoding
        and are gzipped for clients that accept it (not Apache's own error pages, nor a
        crashed PHP's)."""
        headers = [("Date", formatdate(usegmt=True)), ("Server", SERVER_HEADER)]
        text = reply.content_type.split(";")[0].strip() in _DEFLATE_TYPES
        if not text or reply.status != 200 or reply.crashed or len(body) <= _DEFLATE_MIN:
            return headers, body
        headers.append(("Vary", "Accept-Encoding"))
        if _accepts_gzip(self.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body, mtime=0)
            headers.append(("Content-Encoding", "gzip"))
        return headers, body

    def _fault_before(self, fault: Fault, endpoint: str = "", rpc: str = "") -> None:
        if fault.kind == "database":
            # BOINC 8.3 without its database: the RPC pages answer error -138 inside the
            # command element; the download pages show the project's error page
            if endpoint in ("submit_rpc_handler.php", "job_file.php"):
                cmd = rpc if rpc != endpoint.removesuffix(".php") else None
                self._send(responses.error("Can't connect to database", -138, cmd))
            else:
                self._send(responses.error_page("Can't connect to database"))
        elif fault.kind == "reset":
            self._reset()
        elif fault.kind == "http500":
            self._send(
                Reply(
                    b"<html><body><h1>500 Internal Server Error</h1></body></html>",
                    500,
                    responses.HTML_TYPE,
                )
            )
        elif fault.kind == "http503":
            retry = str(max(0, round(fault.seconds))) if fault.seconds is not None else "1"
            self._send(
                Reply(
                    b"<html><body><h1>503 Service Unavailable</h1></body></html>",
                    503,
                    responses.HTML_TYPE,
                    (("Retry-After", retry),),
                )
            )
        elif fault.kind == "maintenance":
            self._send(responses.error("project down for maintenance", -183))

    def _reset(self) -> None:
        """Drop the connection with a TCP RST and no reply."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True


class EmulatorServer:
    """An emulated BOINC 8.3 project serving remote job submission on loopback.

    >>> with EmulatorServer(state_dir=tmp) as srv:      # doctest: +SKIP
    ...     httpx.post(srv.url + "submit_rpc_handler.php", data={"request": "<ping/>"})
    """

    def __init__(
        self,
        state_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        job_delay: float = 0.5,
        volunteers: int = 2,
        quorum: int = 1,
        project_path: str = "/boinctest/",
        *,
        allow_remote: bool = False,
        inline_apps: bool = False,
        paused: bool = False,
        completed_job_mode: str = "crash",
        mod_time_resolution: float = 1.0,
        expire_batches: bool = False,
        max_upload_files: int = 20,
        max_file_size: int = 2 * 1024 * 1024,
        max_post_size: int = 8 * 1024 * 1024,
        log: TextIO | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not allow_remote and not is_loopback(host):
            raise ValueError(
                f"refusing to serve on non-loopback host {host!r} "
                "(pass allow_remote=True / --allow-remote)"
            )
        if completed_job_mode not in ("crash", "full"):
            raise ValueError("completed_job_mode must be 'crash' or 'full'")
        if quorum < 1:
            raise ValueError("quorum must be >= 1")
        self._tmp = state_dir is None
        self.state_dir = (
            Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="boinc-emulator-"))
        )
        self.host = host
        self.port = port
        self.project_path = "/" + project_path.strip("/") + "/" if project_path.strip("/") else "/"
        self.config = ProjectConfig(
            quorum=quorum,
            max_upload_files=max_upload_files,
            max_file_size=max_file_size,
            max_post_size=max_post_size,
            completed_job_mode=completed_job_mode,
        )
        self.job_delay = job_delay
        self.nvolunteers = volunteers
        self.inline_apps = inline_apps
        self.mod_time_resolution = mod_time_resolution
        #: abort and retire a batch past its expire_time, as a project that runs BOINC's
        #: html/ops/expire_batches from cron (BOINC master; not in 8.3); False (default): as a
        #: plainly created project, which never does
        self.expire_batches = expire_batches
        #: the project's wall clock (tests pin it to replay a captured session)
        self.clock = clock
        self.faults = FaultInjector()
        self.errors: list[str] = []
        self._log_stream = log
        self._start_paused = paused
        self._stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.store: Store | None = None
        self.volunteer: Volunteer | None = None
        self._project: ProjectPages | None = None
        #: Test-only: answers spoiled on purpose (a hostile project); nothing by default.
        self.tamper = Tampering()

    # -- lifecycle --

    def start(self) -> EmulatorServer:
        """Open the state, bind, and serve in background threads."""
        self._stopping.clear()
        self.store = Store(self.state_dir, self.mod_time_resolution, clock=self.clock)
        self.store.default_authenticator()
        self._project = ProjectPages(self.store, self.config, self.tamper)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._httpd = _HTTPServer((self.host.strip("[]"), self.port), self, family)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="boinc-emulator-http",
            daemon=True,
        )
        self._thread.start()
        self.volunteer = Volunteer(
            self.store,
            self.job_delay,
            self.nvolunteers,
            inline=self.inline_apps,
            expire=self.expire_batches,
        )
        if self._start_paused:
            self.volunteer.pause()
        self.volunteer.start()
        return self

    def stop(self) -> None:
        """Stop HTTP and volunteer threads; close the database."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            with self._conns_lock:
                for c in list(self._conns):
                    with contextlib.suppress(OSError):
                        c.shutdown(socket.SHUT_RDWR)
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self.volunteer is not None:
            self.volunteer.stop()
            self.errors += self.volunteer.errors
            self.volunteer = None
        if self.store is not None:
            self.store.close()
            self.store = None
            self._project = None
        if self._tmp:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> EmulatorServer:
        return self.start() if self._httpd is None else self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- public API -------------------------------------------------------------------------------

    @property
    def project(self) -> ProjectPages:
        if self._project is None:
            raise RuntimeError("emulator not started")
        return self._project

    @property
    def url(self) -> str:
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.project_path}"

    @property
    def authenticator(self) -> str:
        """The default user's authenticator (submit access)."""
        return self._store().default_authenticator()

    def add_user(
        self, name: str, submit_access: bool = True, authenticator: str | None = None
    ) -> str:
        """Create (or update) a user; return its authenticator (``authenticator``, e.g. a real
        project's, or a random one)."""
        return self._store().add_user(name, submit_access, authenticator=authenticator)

    def pause_volunteer(self) -> None:
        """No job instance is sent after this returns; running ones finish."""
        if self.volunteer is not None:
            self.volunteer.pause()
        else:
            self._start_paused = True

    def resume_volunteer(self) -> None:
        if self.volunteer is not None:
            self.volunteer.resume()
        self._start_paused = False

    def inject_fault(
        self, kind: str, count: int = 1, rpc: str | None = None, seconds: float | None = None
    ) -> None:
        """Make the next ``count`` requests (of RPC or endpoint ``rpc``) fail with ``kind``."""
        self.faults.add(kind, count, rpc, seconds)

    def clear_faults(self) -> None:
        self.faults.clear()

    @property
    def stats(self) -> dict[str, int]:
        """Requests handled per RPC name (or endpoint), plus ``bytes_uploaded``."""
        with self._stats_lock:
            d = dict(self._stats)
        d.setdefault("bytes_uploaded", 0)
        return d

    def reset_stats(self) -> None:
        with self._stats_lock:
            self._stats.clear()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no job is UNSENT or IN_PROGRESS; False on timeout."""
        deadline = time.monotonic() + timeout
        store = self._store()
        while True:
            if store.count_active() == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    # -- internals --

    def _store(self) -> Store:
        if self.store is None:
            raise RuntimeError("emulator not started")
        return self.store

    def _count(self, rpc: str, uploaded: int) -> None:
        with self._stats_lock:
            self._stats[rpc] += 1
            self._stats["requests"] += 1
            self._stats["bytes_uploaded"] += uploaded

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._conns_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _log(self, line: str) -> None:
        if self._log_stream is not None:
            with contextlib.suppress(ValueError, OSError):
                self._log_stream.write(_SECRET.sub(r"\1***", line).rstrip("\n") + "\n")
                self._log_stream.flush()
