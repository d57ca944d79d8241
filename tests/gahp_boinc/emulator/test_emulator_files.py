"""job_file.php: staging limits, immutability, file names."""

from __future__ import annotations

from emu_helpers import Boinc, phys_name

from gahp_boinc.emulator import EmulatorServer


def test_twenty_files_per_request(boinc: Boinc) -> None:
    files = [(phys_name(b"f%d" % i), b"f%d" % i) for i in range(21)]
    r = boinc.upload(files)
    assert (
        "<error_msg># of uploaded files (20) doesn't agree with request (21)</error_msg>" in r.text
    )
    assert b"<success/>" in boinc.upload(files[:20]).content
    absent = boinc.query_files([n for n, _ in files]).text
    assert absent.count("<file>") == 1 and "<file>20</file>" in absent


def test_immutability_and_names(server: EmulatorServer, boinc: Boinc) -> None:
    assert b"<success/>" in boinc.upload([("same.txt", b"one")]).content
    r = boinc.upload([("same.txt", b"two")])
    assert "<error_msg>file immutability violation for same.txt</error_msg>" in r.text
    assert "<error_msg>bad filename</error_msg>" in boinc.upload([("../x", b"1")]).text
    assert "<error_msg>bad filename</error_msg>" in boinc.upload([("a#b", b"1")]).text
    assert b"<success/>" in boinc.upload([("with space-_.txt", b"1")]).content
    assert (server.state_dir / "download" / "with space-_.txt").read_bytes() == b"1"
    r = boinc.upload([("x.txt", b"1"), ("y.txt", b"2")])
    assert "(2) doesn't agree" not in r.text and b"<success/>" in r.content
    # parts are paired with names by order: file_1 missing -> count mismatch
    r = boinc.call(
        "upload_files",
        "<phys_name>p.txt</phys_name>\n<phys_name>q.txt</phys_name>\n",
        endpoint="job_file.php",
        files={"file_0": ("p", b"p")},
    )
    assert "# of uploaded files (1) doesn't agree with request (2)" in r.text


def test_size_limits(make_server) -> None:
    srv = make_server(max_file_size=1000, max_post_size=5000)
    b = Boinc(srv)
    assert b"<success/>" in b.upload([("ok.bin", b"x" * 1000)]).content
    assert (
        "<error_msg>in0.txt upload failed because: The uploaded file exceeds "
        "upload_max_filesize of php.ini.</error_msg>"
    ) in b.upload([("big.bin", b"x" * 1001)]).text
    r = b.upload([("huge.bin", b"x" * 6000)])
    assert "<error_msg>can't parse request message: </error_msg>" in r.text
    assert b.rpc("<ping/>").status_code == 200  # connection still usable
    b.close()


def test_few_megabyte_request(boinc: Boinc) -> None:
    blobs = [bytes([i]) * 1_500_000 for i in range(4)]
    files = [(phys_name(x, ".bin"), x) for x in blobs]
    assert b"<success/>" in boinc.upload(files).content
    assert boinc.srv.stats["bytes_uploaded"] == 6_000_000
