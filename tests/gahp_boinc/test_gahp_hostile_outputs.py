"""boinc-gahp (a subprocess, over pipes) against a hostile project: the emulator with its
answers spoiled on purpose (``EmulatorServer.tamper``): output names that are paths, zip
bombs, archives with hostile members. BOINC_FETCH_OUTPUT answers one clear error and
leaves nothing but the stderr file."""

from __future__ import annotations

import io
import stat
import sys
import time
import zipfile
from pathlib import Path

import pytest

from gahp_boinc.emulator import EmulatorServer
from gahp_core.testing import GahpClient

GAHP = [sys.executable, "-m", "gahp_boinc", "--timeout", "10"]
MiB = 1 << 20


@pytest.fixture
def emulator(tmp_path):
    with EmulatorServer(state_dir=tmp_path / "emu", port=0, job_delay=0.05) as srv:
        yield srv


def run_job(tmp_path: Path, emulator: EmulatorServer, app: str, env: dict[str, str]):
    """A boinc-gahp with ``env``, having run one job ``j#0`` of ``app`` to DONE."""
    gahp = GahpClient([*GAHP, "--log", str(tmp_path / "gahp.log")], env=env)
    (tmp_path / "in.txt").write_text("hello\n")
    assert gahp.command("BOINC_SELECT_PROJECT", emulator.url, emulator.authenticator) == ["S"]
    args = ["j", app, "1", "j#0", "0", "1", str(tmp_path / "in.txt"), "in", *["NULL"] * 6]
    assert gahp.call("BOINC_SUBMIT", *args) == ["NULL"]
    deadline = time.monotonic() + 60
    while (res := gahp.call("BOINC_QUERY_BATCHES", "0", "1", "j"))[4:] != ["DONE"]:
        assert time.monotonic() < deadline, res
        time.sleep(0.1)
    return gahp


def fetch(gahp: GahpClient, out: Path) -> list[str]:
    out.mkdir()
    return gahp.call("BOINC_FETCH_OUTPUT", "j#0", str(out), "err.txt", "ALL", "0", timeout=60)


def zip_of(*members: tuple[str | zipfile.ZipInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


def link(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("/home/victim/.ssh/id_rsa", False),  # said DONE, then "no canonical instance"
        ("/home/victim/.ssh/id_rsa", True),
        ("../escape", True),
        ("two\nlines", True),
        ("x" * 300, True),
    ],
)
def test_a_hostile_output_name_is_an_error(tmp_path, emulator, name, canonical):
    emulator.tamper.template_outputs["uppercase"] = (name,)
    gahp = run_job(tmp_path, emulator, "uppercase", {})
    try:
        if not canonical:
            emulator.tamper.no_canonical.add("j#0")
        res = fetch(gahp, tmp_path / "out")
    finally:
        gahp.close()
    assert len(res) == 1 and "unsafe output file name" in res[0], res
    assert {p.name for p in (tmp_path / "out").iterdir()} <= {"err.txt"}
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize(
    ("archive", "env", "why"),
    [
        # 32 MiB of zeros in a 32 KiB zip, over a limit of 4 MiB
        (
            zip_of(("small", b"fine\n"), ("bomb", bytes(32 * MiB))),
            {"BOINC_GAHP_OUTPUT_ARCHIVE_MAX_BYTES": str(4 * MiB)},
            "more than the limit of 4194304 bytes",
        ),
        # 64 MiB of zeros in a 64 KiB zip: over the default ratio (100 times the archive)
        (zip_of(("bomb", bytes(64 * MiB))), {}, "more than the limit of 100 times its own"),
        # 10,001 entries, over the default limit of 10,000
        (zip_of(*((f"d/{i}", b"") for i in range(10_001))), {}, "more than the limit of 10000"),
        (zip_of(("a", b"a"), (link("key"), b"/home/victim/.ssh/id_rsa")), {}, "symbolic link"),
        (zip_of(("a", b"a"), ("../../escape", b"x")), {}, "not a file name"),
    ],
    ids=["size", "ratio", "entries", "symlink", "dotdot"],
)
def test_a_hostile_zip_output_is_an_error_and_leaves_nothing(tmp_path, emulator, archive, env, why):
    gahp = run_job(tmp_path, emulator, "zipper", env)
    emulator.tamper.output_bytes["j#0"] = archive
    try:
        res = fetch(gahp, tmp_path / "out")
        assert len(res) == 1 and why in res[0], res
        # the limits are per archive: the same process still unpacks a good one
        emulator.tamper.output_bytes["j#0"] = zip_of(("good", b"good\n"))
        res = fetch(gahp, tmp_path / "out2")
        assert res[0] == "NULL", res
    finally:
        gahp.close()
    assert [p.name for p in (tmp_path / "out").rglob("*")] == ["err.txt"]
    assert (tmp_path / "out2" / "good").read_text() == "good\n"
    assert not (tmp_path / "escape").exists()
