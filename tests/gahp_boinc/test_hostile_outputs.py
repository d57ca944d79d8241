"""fetch_output against a hostile server (a scripted stand-in for BoincRpc): output names
that would escape the directory, zip bombs by size and by entry count, archives whose
headers lie, hostile members. Each is refused as UnsafeOutput and leaves nothing behind."""

from __future__ import annotations

import asyncio
import io
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from gahp_boinc import (
    ArchiveLimits,
    CompletedJob,
    FetchRequest,
    OutputError,
    Project,
    Templates,
    UnsafeOutput,
)
from gahp_boinc._outputs import fetch_output  # private: unit test of output fetching

PROJECT = Project("http://127.0.0.1:1/p/", "auth")
MiB = 1 << 20


class _Rpc:
    """A server whose only output is ``archive`` (or ``output <i>``) under ``names``."""

    def __init__(self, names: tuple[str, ...], canonical: int = 1, archive: bytes = b"") -> None:
        self.names, self.canonical, self.archive = names, canonical, archive
        self.downloads: list[Path] = []

    async def query_completed_job(self, project: Project, job: str) -> CompletedJob:
        return CompletedJob(0, 1.0, 1.0, "the stderr\n", canonical_resultid=self.canonical)

    async def get_templates(self, project: Project, job_name: str) -> Templates:
        return Templates(n_inputs=1, output_names=self.names)

    async def download_output(
        self, project: Project, job: str, i: int, dest: Path, result_id: int = 0
    ) -> int:
        self.downloads.append(dest)
        data = self.archive or f"output {i}".encode()
        dest.write_bytes(data)
        return len(data)


def fetch(rpc: _Rpc, iwd: Path, limits: ArchiveLimits | None = None, known=None):
    req = FetchRequest(PROJECT, "job#0", str(iwd), "job.err", "ALL", (), limits or ArchiveLimits())
    return asyncio.run(fetch_output(rpc, req, known))  # type: ignore[arg-type]


def left(iwd: Path) -> set[str]:
    """Everything in ``iwd`` but the stderr file (written before the outputs)."""
    return {str(p.relative_to(iwd)) for p in iwd.rglob("*")} - {"job.err"}


def zip_of(*members: tuple[str | zipfile.ZipInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


def lie_about_sizes(archive: bytes, size: int) -> bytes:
    """The archive with every central directory entry declaring ``size`` bytes."""
    data = bytearray(archive)
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        struct.pack_into("<L", data, at + 24, size)
        at = data.find(b"PK\x01\x02", at + 4)
    return bytes(data)


@pytest.mark.parametrize("canonical", [1, 0])
@pytest.mark.parametrize("name", ["/home/victim/.ssh/id_rsa", "../escape", "new\nline", "x" * 300])
def test_a_hostile_output_name_is_refused_before_any_use(tmp_path, name, canonical):
    # with canonical_resultid 0 (a job said DONE without outputs) the name is refused too
    rpc = _Rpc((name,), canonical=canonical)
    for known in (None, (name,)):
        with pytest.raises(UnsafeOutput, match="unsafe output file name"):
            fetch(rpc, tmp_path, known=known if canonical else (name,))
    assert rpc.downloads == [] and left(tmp_path) == set()


def test_a_zip_bomb_by_size_is_refused_and_leaves_nothing(tmp_path):
    bomb = zip_of(("small", b"fine\n"), ("bomb", bytes(32 * MiB)))
    assert len(bomb) < 64 * 1024
    with pytest.raises(UnsafeOutput, match=f"more than the limit of {4 * MiB} bytes"):
        fetch(_Rpc(("out.zip",), archive=bomb), tmp_path, ArchiveLimits(max_bytes=4 * MiB))
    assert left(tmp_path) == set()  # neither the small member nor a part of the bomb


def test_a_zip_bomb_by_ratio_is_refused_with_the_default_limits(tmp_path):
    # reproduction 8: a zip of a few tens of KiB wrote hundreds of MiB
    bomb = zip_of(("bomb", bytes(64 * MiB)))
    assert len(bomb) < 100 * 1024
    with pytest.raises(UnsafeOutput, match=f"more than the limit of 100 times its own {len(bomb)}"):
        fetch(_Rpc(("out.zip",), archive=bomb), tmp_path)
    assert left(tmp_path) == set()


def test_the_ratio_limit_spares_small_archives_and_follows_its_setting(tmp_path):
    tight = zip_of(("zeros", bytes(8 * MiB)))  # a thousandfold, under the 16 MiB floor
    (tmp_path / "a").mkdir()
    fetch(_Rpc(("out.zip",), archive=tight), tmp_path / "a")
    assert (tmp_path / "a" / "zeros").stat().st_size == 8 * MiB
    (tmp_path / "b").mkdir()
    bomb = zip_of(("bomb", bytes(32 * MiB)))
    fetch(_Rpc(("out.zip",), archive=bomb), tmp_path / "b", ArchiveLimits(max_ratio=10_000))
    assert (tmp_path / "b" / "bomb").stat().st_size == 32 * MiB


def test_a_zip_bomb_by_entry_count_is_refused_with_the_default_limits(tmp_path):
    many = zip_of(*((f"d/{i}", b"") for i in range(10_001)))
    with pytest.raises(UnsafeOutput, match="10001 entries, more than the limit of 10000"):
        fetch(_Rpc(("out.zip",), archive=many), tmp_path)
    assert left(tmp_path) == set()


def test_an_archive_declaring_more_than_the_limit_is_refused_before_unpacking(tmp_path):
    # each member says almost 4 GiB (default limit: 4 GiB in all); the data is tiny
    liar = lie_about_sizes(zip_of(("a", b"a"), ("b", b"b")), 0xFFFF_FFF0)
    with pytest.raises(UnsafeOutput, match="declares 8589934560 bytes, more than the limit"):
        fetch(_Rpc(("out.zip",), archive=liar), tmp_path)
    assert left(tmp_path) == set()


def test_a_member_longer_than_its_header_says_is_refused(tmp_path):
    # the central directory says 10 bytes; the data holds 1 MiB: at most 10 are read
    liar = lie_about_sizes(zip_of(("first", b"0123456789"), ("big", bytes(MiB))), 10)
    with pytest.raises(UnsafeOutput, match="'big' does not match its header"):
        fetch(_Rpc(("out.zip",), archive=liar), tmp_path)
    assert left(tmp_path) == set()


def _link(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (_link("key"), "'key' is a symbolic link"),
        ("/tmp/gahp-absolute-member", "absolute path"),
        ("../escaped", "not a file name"),
        ("a/../../escaped", "not a file name"),
        ("bad\x01name", "control character"),
    ],
)
def test_a_hostile_member_is_refused_and_nothing_is_unpacked(tmp_path, member, why):
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    archive = zip_of(("good", b"good\n"), (member, b"/home/victim/.ssh/id_rsa"))
    with pytest.raises(UnsafeOutput, match=why):
        fetch(_Rpc(("out.zip",), archive=archive), iwd)
    assert left(iwd) == set()
    assert {p.name for p in tmp_path.iterdir()} == {"iwd"}
    assert not Path("/tmp/gahp-absolute-member").exists()


def test_a_member_under_a_planted_link_is_refused(tmp_path):
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    (iwd / "sub").symlink_to(tmp_path)
    with pytest.raises(UnsafeOutput, match="leads out of"):
        fetch(_Rpc(("out.zip",), archive=zip_of(("sub/x", b"x"))), iwd)
    assert not (tmp_path / "x").exists()


def test_members_that_cannot_all_be_placed_leave_nothing(tmp_path):
    # "sub" is a file and the directory of "sub/x": one of them cannot be placed
    with pytest.raises(OutputError, match="cannot be unpacked"):
        fetch(_Rpc(("out.zip",), archive=zip_of(("sub", b"f"), ("sub/x", b"x"))), tmp_path)
    assert left(tmp_path) == set()


def test_an_archive_within_the_limits_is_unpacked(tmp_path):
    archive = zip_of(("a", b"a" * 1000), ("sub/b", b"b"))
    fetch(_Rpc(("out.zip",), archive=archive), tmp_path, ArchiveLimits(1001, 3))
    assert left(tmp_path) == {"a", "sub", "sub/b"}
    assert (tmp_path / "a").stat().st_mode & 0o022 == 0
