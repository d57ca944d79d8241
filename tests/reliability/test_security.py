"""Security properties: secrets kept out of logs and results, confined output paths, TLS
verification by default, no shell on user values, safe file permissions."""

from __future__ import annotations

import http.server
import io
import json
import ssl
import stat
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import attrs
import pytest
from relkit import BLAHPD, BOINC_GAHP, select, submit_args, wait_done

from gahp_boinc import OutputError
from gahp_boinc._outputs import safe_logical_name  # private: unit test of output fetching
from gahp_boinc._rpc import BoincRpc  # private: unit test of the RPC layer
from gahp_boinc.emulator import EmulatorServer, apps, handlers, responses
from gahp_core.testing import GahpClient

# ---- the authenticator stays secret ------------------------------------------------------------


@pytest.fixture
def request_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every request line (method, URL, version) the in-process emulator receives."""
    from gahp_boinc.emulator import server

    seen: list[str] = []
    plain = server._Handler.log_request

    def record(self: server._Handler, *args: object, **kwargs: object) -> None:
        seen.append(self.requestline)
        plain(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(server._Handler, "log_request", record)
    return seen


def test_no_request_url_carries_the_authenticator(
    gahp: GahpClient,
    emulator: EmulatorServer,
    input_file: Path,
    tmp_path: Path,
    request_lines: list[str],
) -> None:
    """A job's whole life through boinc-gahp, then every download BoincClient offers: the
    authenticator is in no URL (it would land in the project's access log)."""
    from gahp_boinc import SyncBoincClient

    auth = emulator.authenticator
    select(gahp, emulator)
    assert gahp.call("BOINC_SUBMIT", *submit_args("u", "uppercase", [("u#0", input_file)])) == [
        "NULL"
    ]
    wait_done(gahp, "u", 1)
    res = gahp.call("BOINC_FETCH_OUTPUT", "u#0", str(tmp_path), "e", "ALL", "0")
    assert res[0] == "NULL", res
    assert gahp.call("BOINC_SET_LEASE", "u", str(int(time.time()) + 3600)) == ["NULL"]
    assert gahp.call("BOINC_RETIRE_BATCH", "u") == ["NULL"]
    with SyncBoincClient(emulator.url, auth) as c:
        c.submit("v", "uppercase", [c_job("v#0", input_file)])
        c.wait(["v"], interval=0.1, timeout=30)
        (tmp_path / "v").mkdir()
        c.fetch_output("v#0", tmp_path / "v")
        c.get_output("v#0", 0, tmp_path / "v0")
        c.get_batch_outputs("v", tmp_path / "v.zip")
        c.get_instance_output("v#0_0", 0, tmp_path / "v1")
        c.abort_jobs(["v#0"])
        c.retire("v")
    downloads = [line for line in request_lines if "get_output" in line]
    assert len(downloads) >= 5, request_lines
    assert len(request_lines) >= 15, request_lines
    leaked = [line for line in request_lines if auth in line]
    assert not leaked, leaked


def c_job(name: str, path: Path) -> object:
    from gahp_boinc import Job

    return Job(name, inputs=[path])


def test_authenticator_never_in_debug_log_nor_error_results(
    gahp: GahpClient,
    emulator: EmulatorServer,
    input_file: Path,
    tmp_path: Path,
    gahp_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    auth = emulator.authenticator
    select(gahp, emulator)
    assert gahp.call("BOINC_SUBMIT", *submit_args("s", "uppercase", [("s#0", input_file)])) == [
        "NULL"
    ]
    wait_done(gahp, "s", 1)
    results: list[list[str]] = []
    # output download failures of every kind (the authenticator travels in a cookie)
    for kind in ("http500", "reset", "truncated", "http503"):
        emulator.inject_fault(kind, count=1, rpc="get_output2")
        results.append(gahp.call("BOINC_FETCH_OUTPUT", "s#0", str(tmp_path), "e", "ALL", "0"))
    # a server that echoes the whole query string and the cookie in its error text
    monkeypatch.setattr(
        handlers.ProjectPages,
        "get_output2",
        lambda self, q, cookie=None: responses.download_error(
            f"cannot serve {urlencode(q)} for {cookie}"
        ),
    )
    results.append(gahp.call("BOINC_FETCH_OUTPUT", "s#0", str(tmp_path), "e", "ALL", "0"))
    assert "cannot serve" in results[-1][0], results[-1]
    # and an RPC error that echoes the request (with its <authenticator>)
    monkeypatch.setattr(
        handlers.ProjectPages,
        "submit_rpc",
        lambda self, req: responses.error(f"can't parse request message: {req}"),
    )
    results.append(gahp.call("BOINC_PING"))
    results.append(gahp.call("BOINC_QUERY_BATCHES", "0", "1", "s"))
    for res in results:
        assert len(res) == 1 and res[0] != "NULL", res
        assert auth not in res[0], res
    log = gahp_log.read_text()
    assert "DEBUG" in log and "get_output" in log
    assert auth not in log


# ---- output names from the server cannot escape the destination --------------------------------


@pytest.mark.parametrize("name", ["../evil", "/tmp/evil", "a/b", "..", ".", "", "x\\y", "n\0l"])
def test_safe_logical_name_refuses_paths(name: str) -> None:
    with pytest.raises(OutputError):
        safe_logical_name(name)


def test_template_output_name_escaping_the_directory(
    gahp: GahpClient,
    emulator: EmulatorServer,
    input_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    select(gahp, emulator)
    assert gahp.call("BOINC_SUBMIT", *submit_args("t", "uppercase", [("t#0", input_file)])) == [
        "NULL"
    ]
    wait_done(gahp, "t", 1)
    out = tmp_path / "deep" / "out"
    out.mkdir(parents=True)
    for evil in ("../evil", str(tmp_path / "abs-evil")):
        spec = attrs.evolve(apps.APPS["uppercase"], outputs=(evil,))
        monkeypatch.setitem(apps.APPS, "uppercase", spec)
        monkeypatch.setattr(handlers, "APPS", apps.APPS)
        # A GAHP that did not submit the job (restarted) asks the server for its outputs.
        with GahpClient(BOINC_GAHP) as fresh:
            select(fresh, emulator)
            res = fresh.call("BOINC_FETCH_OUTPUT", "t#0", str(out), "e", "ALL", "0")
        assert len(res) == 1 and "unsafe output file name" in res[0], res
    assert not (tmp_path / "deep" / "evil").exists() and not (tmp_path / "abs-evil").exists()
    assert sorted(p.name for p in out.iterdir()) == ["e"]


def _zip(entries: list[tuple[str, bytes, bool]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, link in entries:
            info = zipfile.ZipInfo(name)
            if link:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, data)
    return buf.getvalue()


def _replace_output(srv: EmulatorServer, job: str, data: bytes) -> None:
    """Overwrite the stored output of a finished job (a malicious or corrupted project)."""
    store = srv.store
    assert store is not None
    wu = store.wu_by_name(job)
    res = store.result(wu["canonical_resultid"])
    for _phys, _logical, rel in json.loads(res["output_files"]):
        (store.upload_dir / rel).write_bytes(data)


@pytest.mark.parametrize(
    "entries,reason",
    [
        ([("ok.txt", b"1", False), ("../evil", b"x", False)], "unsafe output archive"),
        ([("ok.txt", b"1", False), ("/tmp/gahp-abs-evil", b"x", False)], "unsafe output archive"),
        ([("sub/../../evil", b"x", False)], "unsafe output archive"),
        # a link member is refused whole: never made a link, nor a file naming its target
        ([("ok.txt", b"1", False), ("link", b"/etc/passwd", True)], "is a symbolic link"),
    ],
)
def test_zip_output_entries_stay_inside(
    gahp: GahpClient,
    emulator: EmulatorServer,
    input_file: Path,
    tmp_path: Path,
    entries: list[tuple[str, bytes, bool]],
    reason: str,
) -> None:
    select(gahp, emulator)
    assert gahp.call("BOINC_SUBMIT", *submit_args("z", "zipper", [("z#0", input_file)])) == ["NULL"]
    wait_done(gahp, "z", 1)
    _replace_output(emulator, "z#0", _zip(entries))
    out = tmp_path / "a" / "out"
    out.mkdir(parents=True)
    res = gahp.call("BOINC_FETCH_OUTPUT", "z#0", str(out), "e", "ALL", "0")
    assert len(res) == 1 and reason in res[0], res
    assert sorted(p.name for p in out.iterdir()) == ["e"]  # nothing unpacked, no temp
    assert not (tmp_path / "a" / "evil").exists() and not Path("/tmp/gahp-abs-evil").exists()


# ---- TLS --------------------------------------------------------------------------------------


def test_make_client_verifies_by_default() -> None:
    import inspect

    assert inspect.signature(BoincRpc.make_client).parameters["verify"].default is True


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[str]:
    """An https server on 127.0.0.1 with a self-signed certificate answering ping."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<ping>\n<success>1</success>\n</ping>\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}/p/"
    httpd.shutdown()
    httpd.server_close()


def test_self_signed_certificate_is_refused_unless_insecure(tls_server: str) -> None:
    with GahpClient([*BOINC_GAHP, "--retries", "3", "--timeout", "5"]) as c:
        assert c.command("BOINC_SELECT_PROJECT", tls_server, "authxyz1") == ["S"]
        start = time.monotonic()
        res = c.call("BOINC_PING", timeout=60)
        assert len(res) == 1 and "certificate verify failed" in res[0], res
        assert time.monotonic() - start < 3  # a certificate error is final: not retried
    with GahpClient([*BOINC_GAHP, "--insecure"]) as c:
        assert c.command("BOINC_SELECT_PROJECT", tls_server, "authxyz1") == ["S"]
        assert c.call("BOINC_PING") == ["NULL"]


# ---- no shell on ClassAd values, safe permissions (blahpd) -------------------------------------


def _ad(**kv: str) -> str:
    return (
        "[ "
        + "; ".join(
            f'{k} = "' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for k, v in kv.items()
        )
        + " ]"
    )


def _wait_finished(c: GahpClient, jobid: str, timeout: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        res = c.call("BLAH_JOB_STATUS", jobid, timeout=60)
        assert res[0] == "0", res
        if res[2] in ("3", "4"):
            return res
        assert time.monotonic() < deadline, res
        time.sleep(0.3)


@pytest.mark.parametrize("lrms", ["fork", "slurm"])
def test_classad_values_never_reach_a_shell(tmp_path: Path, lrms: str, batch_env) -> None:
    env = batch_env(lrms)
    work = tmp_path / "work"
    work.mkdir()
    marker = work / "PWNED"
    m = str(marker)
    nasty = [f"$(touch {m})", f"`touch {m}`", f"x; touch {m}", f"x && touch {m}", f"|touch {m}"]
    arguments = " ".join("'" + a.replace("'", "''") + "'" for a in nasty)
    with GahpClient([*BLAHPD, "--state-dir", str(tmp_path / "state")], env=env) as c:
        ids = []
        good = _ad(
            gridtype=lrms,
            Cmd="/bin/echo",
            Arguments=arguments,
            Iwd=str(work),
            Environment=f"'A=$(touch {m})' 'B=`touch {m}`'",
            In="/dev/null",
            Out="out $(touch PWNED)",
            Err="err;touch PWNED",
        )
        res = c.call("BLAH_JOB_SUBMIT", good, timeout=60)
        assert res[0] == "0", res
        ids.append(res[2])
        # Each value is taken literally: a program of that name does not exist (127), the
        # arguments are echoed as text (0).
        for attr, value, exit_code in (
            ("Cmd", f"/bin/true;touch {m}", 127),
            ("Cmd", f"$(touch {m})", 127),
            ("Args", f"`touch {m}` ;touch {m}", 0),
        ):
            kv = {"gridtype": lrms, "Cmd": "/bin/echo", "Iwd": str(work), attr: value}
            res = c.call("BLAH_JOB_SUBMIT", _ad(**kv), timeout=60)
            assert res[0] == "0", (attr, res)
            final = _wait_finished(c, res[2])
            assert final[2] == "4" and f"ExitCode = {exit_code};" in final[3], (attr, final)
        nasty_iwd = _ad(gridtype=lrms, Cmd="/bin/true", Iwd=f"{work};touch {m}")
        res = c.call("BLAH_JOB_SUBMIT", nasty_iwd, timeout=60)
        if lrms == "fork":  # the fork driver checks the directory before it starts the job
            assert res[0] == "1" and "does not exist" in res[1], res
        else:  # Slurm accepts a missing directory; the job then fails
            assert res[0] == "0", res
            final = _wait_finished(c, res[2])
            assert final[2] == "4" and "ExitCode = 1;" in final[3], final
        for jobid in ids:
            _wait_finished(c, jobid)
    assert not marker.exists()
    out = work / "out $(touch PWNED)"
    assert out.exists(), sorted(p.name for p in work.iterdir())
    assert out.read_text() == " ".join(nasty) + "\n"  # each value passed as literal text


def test_state_log_and_output_permissions(tmp_path: Path) -> None:
    """Under a permissive umask: state and log files 0600, nothing world-writable."""
    state = tmp_path / "state"
    log = tmp_path / "blah.log"
    proxy = tmp_path / "proxy.pem"
    proxy.write_text("PROXY")
    proxy.chmod(0o600)
    work = tmp_path / "work"
    work.mkdir()
    argv = [
        "sh",
        "-c",
        'umask 000 && exec "$@"',
        "sh",
        *BLAHPD,
        "--state-dir",
        str(state),
        "--log",
        str(log),
        "--log-level",
        "DEBUG",
    ]
    with GahpClient(argv) as c:
        res = c.call(
            "BLAH_JOB_SUBMIT",
            _ad(
                gridtype="fork",
                Cmd="/bin/echo",
                Args="hi",
                Iwd=str(work),
                Out="o.txt",
                Err="e.txt",
                x509UserProxy=str(proxy),
            ),
            timeout=60,
        )
        assert res[0] == "0", res
        (record,) = (state / "proxies").iterdir()  # kept until the job's end is answered
        assert record.stat().st_mode & 0o777 == 0o600
        _wait_finished(c, res[2])
        assert c.call("BLAH_JOB_HOLD", "fork/20240101/nosuchjob")[0] == "1"
    assert (work / "o.txt").read_text() == "hi\n"
    assert not record.exists()
    files = [p for p in [*state.rglob("*"), log, work / "o.txt", work / "e.txt"] if p.is_file()]
    for p in files:
        mode = p.stat().st_mode & 0o777
        assert not mode & 0o002, f"{p} is world-writable ({oct(mode)})"
        if p.parent.name in ("proxies",) or p.suffix in (".json", ".log") or p == log:
            assert mode == 0o600, f"{p} has mode {oct(mode)}"
    assert state.stat().st_mode & 0o077 == 0


def test_boinc_outputs_and_log_permissions(
    emulator: EmulatorServer, input_file: Path, tmp_path: Path
) -> None:
    log = tmp_path / "boinc.log"
    argv = ["sh", "-c", 'umask 000 && exec "$@"', "sh", *BOINC_GAHP, "--log", str(log)]
    out = tmp_path / "out"
    out.mkdir()
    with GahpClient(argv) as c:
        select(c, emulator)
        jobs = [("p#0", input_file)]
        assert c.call("BOINC_SUBMIT", *submit_args("p", "uppercase", jobs)) == ["NULL"]
        assert c.call("BOINC_SUBMIT", *submit_args("pz", "zipper", [("pz#0", input_file)])) == [
            "NULL"
        ]
        wait_done(c, "p", 1)
        wait_done(c, "pz", 1)
        assert c.call("BOINC_FETCH_OUTPUT", "p#0", str(out), "err", "ALL", "0")[0] == "NULL"
        assert c.call("BOINC_FETCH_OUTPUT", "pz#0", str(out), "err2", "ALL", "0")[0] == "NULL"
    assert sorted(p.name for p in out.iterdir()) == ["err", "err2", "input.txt", "out", "upper.txt"]
    for p in out.iterdir():
        assert not p.stat().st_mode & 0o022, f"{p}: {oct(p.stat().st_mode)}"
    assert log.stat().st_mode & 0o777 == 0o600


def test_no_shell_in_the_code() -> None:
    """No module of the servers runs a shell: no shell=True, os.system or os.popen."""
    root = Path(__file__).resolve().parents[2]
    bad = []
    for pkg in ("gahp_core", "gahp_boinc", "gahp_blah", "gahp_lrms"):
        for path in (root / pkg).rglob("*.py"):
            text = path.read_text()
            for needle in ("shell=True", "os.system(", "os.popen(", "getoutput("):
                if needle in text:
                    bad.append(f"{path.name}: {needle}")
    assert not bad, bad
