"""Input modes other than staged files (inline, remote, local, semilocal): refused when BOINC
would corrupt them or they carry a secret, sent as BOINC's submit_batch takes them, and
served by the emulator as the real server serves them (tests/boinc_real has the real one)."""

from __future__ import annotations

import hashlib
import http.server
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from gahp_boinc import (
    InlineInput,
    Job,
    RemoteInput,
    RpcError,
    ServerFile,
    ServerUrl,
    StagingError,
    SyncBoincClient,
)
from gahp_boinc._inputs import (  # private: the XML BOINC gets, unit by unit
    MAX_INLINE_BYTES,
    input_xml,
)
from gahp_boinc.emulator import EmulatorServer

MD5 = "0" * 32


@pytest.mark.parametrize(
    "make",
    [
        lambda: InlineInput(""),
        lambda: InlineInput("a\r\nb"),
        lambda: InlineInput("nul\x00"),
        lambda: InlineInput("x" * (MAX_INLINE_BYTES + 1)),
        lambda: RemoteInput("http://user:pw@example.org/f", 1, MD5),
        lambda: RemoteInput("http://example.org/a b", 1, MD5),
        lambda: RemoteInput("http://example.org/f?a=1&b=2", 1, MD5),
        lambda: RemoteInput("ftp://example.org/f", 1, MD5),
        lambda: RemoteInput("http://example.org/" + "x" * 1100, 1, MD5),
        lambda: RemoteInput("http://example.org/f", 0, MD5),
        lambda: RemoteInput("http://example.org/f", 1, "../../etc/passwd" + "0" * 16),
        lambda: ServerFile("relative/path"),
        lambda: ServerFile("/a/../etc/shadow"),
        lambda: ServerFile("/a\nb"),
        lambda: ServerUrl("file:///etc/passwd"),
    ],
)
def test_inputs_boinc_would_corrupt_or_that_leak_are_refused(make):
    with pytest.raises(ValueError):
        make()


def test_each_mode_is_sent_as_boinc_reads_it():
    def parse(item):
        return ET.fromstring(input_xml(item))

    el = parse(InlineInput("a<b & c\n"))
    assert (el.findtext("mode"), el.findtext("source")) == ("inline", "a<b & c\n")
    el = parse(RemoteInput("https://example.org/x.dat", 12, MD5.upper()))
    assert [el.findtext(k) for k in ("mode", "url", "nbytes", "md5")] == [
        "remote",
        "https://example.org/x.dat",
        "12",
        MD5,
    ]
    assert parse(ServerFile("/srv/in.txt")).findtext("mode") == "local"
    assert parse(ServerUrl("http://example.org/y")).findtext("mode") == "semilocal"
    assert parse("abc.txt").findtext("mode") == "local_staged"
    assert InlineInput("hi\n").physical_name == "jf_" + hashlib.md5(b"hi\n").hexdigest()


def test_an_input_url_holding_the_authenticator_is_refused_before_anything_is_sent(tmp_path):
    with SyncBoincClient("http://127.0.0.1:9/p/", "sekret123") as c:
        job = Job("j", inputs=[RemoteInput("http://example.org/f?k=sekret123", 1, MD5)])
        with pytest.raises(StagingError, match="authenticator"):
            c.submit("b", "worker", [job])
        assert c.calls == {}


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    with EmulatorServer(
        state_dir=tmp_path_factory.mktemp("emu"), job_delay=0.05, inline_apps=True
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A directory served over loopback HTTP (a file host volunteers download from)."""
    root = tmp_path_factory.mktemp("www")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield root, f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


def test_every_mode_reaches_the_job_on_the_emulator(emu, files, tmp_path):
    root, base = files
    (root / "r.txt").write_bytes(b"remote one\n")
    (tmp_path / "srv.txt").write_text("local one\n")
    jobs = [
        Job("m_inline", inputs=[InlineInput("inline one\n")]),
        Job(
            "m_remote",
            inputs=[RemoteInput(base + "r.txt", 11, hashlib.md5(b"remote one\n").hexdigest())],
        ),
        Job("m_local", inputs=[ServerFile(str(tmp_path / "srv.txt"))]),
        Job("m_semi", inputs=[ServerUrl(base + "r.txt")]),
        Job("m_staged", inputs=[tmp_path / "srv.txt"]),
    ]
    with SyncBoincClient(emu.url, emu.authenticator) as c:
        report = c.submit("modes", "worker", jobs)
        assert report.uploaded_files == 1  # only the staged file travels by upload_files
        assert set(c.wait("modes", interval=0.1, timeout=60).values()) == {"DONE"}
        got = {}
        for job in jobs:
            c.fetch_output(job.name, tmp_path, files={"out": f"{job.name}.out"})
            got[job.name] = (tmp_path / f"{job.name}.out").read_text()
    assert got == {
        "m_inline": "INLINE ONE\n",
        "m_remote": "REMOTE ONE\n",
        "m_local": "LOCAL ONE\n",
        "m_semi": "REMOTE ONE\n",
        "m_staged": "LOCAL ONE\n",
    }
    inline = emu.project.store.file_path(InlineInput("inline one\n").physical_name)
    assert inline.read_text() == "inline one\n"


def test_a_remote_input_whose_md5_is_wrong_fails_the_job_not_the_submission(emu, files):
    root, base = files
    (root / "bad.txt").write_bytes(b"not what was promised\n")
    job = Job("m_badmd5", inputs=[RemoteInput(base + "bad.txt", 22, MD5)])
    with SyncBoincClient(emu.url, emu.authenticator) as c:
        c.submit("modes_bad", "worker", [job])
        assert c.wait("modes_bad", interval=0.1, timeout=60) == {"m_badmd5": "ERROR"}


def test_an_unreadable_server_file_is_refused_with_the_servers_text(emu):
    job = Job("m_missing", inputs=[ServerFile("/nonexistent/in.txt")])
    with (
        SyncBoincClient(emu.url, emu.authenticator) as c,
        pytest.raises(RpcError, match="Can't get MD5 of file /nonexistent/in.txt"),
    ):
        c.submit("modes_missing", "worker", [job])
