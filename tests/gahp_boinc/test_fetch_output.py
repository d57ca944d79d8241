"""What fetch_output downloads, and where, for each kind of BOINC_FETCH_OUTPUT request
(over a scripted stand-in for BoincRpc: no server)."""

from __future__ import annotations

import asyncio
import io
import os
import zipfile
from pathlib import Path

import pytest

from gahp_boinc import CompletedJob, FetchRequest, OutputError, Project, Templates
from gahp_boinc._outputs import fetch_output  # private: unit test of output fetching

PROJECT = Project("http://127.0.0.1:1/p/", "auth")


class _Rpc:
    """Answers query_completed_job and get_templates; writes ``output <i>`` (or the zip)
    for download_output, and records what was asked."""

    def __init__(self, names: tuple[str, ...], canonical: int = 1, archive: bytes = b"") -> None:
        self.names, self.canonical, self.archive = names, canonical, archive
        self.asked: list[str] = []
        self.downloads: list[tuple[int, Path]] = []

    async def query_completed_job(self, project: Project, job: str) -> CompletedJob:
        return CompletedJob(0, 1.0, 1.0, "the stderr\n", canonical_resultid=self.canonical)

    async def get_templates(self, project: Project, job_name: str) -> Templates:
        self.asked.append(job_name)
        return Templates(n_inputs=1, output_names=self.names)

    async def download_output(
        self, project: Project, job: str, i: int, dest: Path, result_id: int = 0
    ) -> int:
        self.downloads.append((i, dest))
        data = self.archive or f"output {i}".encode()
        dest.write_bytes(data)
        return len(data)


def _fetch(rpc: _Rpc, iwd: Path, mode: str, *specs: tuple[str, str], known=None):
    req = FetchRequest(PROJECT, "job#0", str(iwd), "job.err", mode, tuple(specs))
    return asyncio.run(fetch_output(rpc, req, known))  # type: ignore[arg-type]


def _zip(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _files(iwd: Path) -> dict[str, str]:
    return {str(p.relative_to(iwd)): p.read_text() for p in sorted(iwd.rglob("*")) if p.is_file()}


def test_all_outputs_some_renamed(tmp_path: Path) -> None:
    rpc = _Rpc(("a", "b", "c"))
    (tmp_path / "sub").mkdir()
    done = _fetch(rpc, tmp_path, "ALL", ("b", "sub/b.txt"))
    assert done.canonical_resultid == 1 and rpc.asked == ["job#0"]
    assert _files(tmp_path) == {
        "a": "output 0",
        "job.err": "the stderr\n",
        "sub/b.txt": "output 1",
        "c": "output 2",
    }


def test_some_outputs_only_those_named(tmp_path: Path) -> None:
    rpc = _Rpc(("a", "b", "c"))
    _fetch(rpc, tmp_path, "SOME", ("c", "c.out"), known=("a", "b", "c"))
    assert rpc.asked == [] and rpc.downloads == [(2, tmp_path / "c.out")]


@pytest.mark.parametrize(
    ("canonical", "mode", "specs"),
    [
        (0, "ALL", (("a", "a"),)),
        (1, "SOME", ()),
        (1, "SOME", (("job.out", "job.out"), ("job.err", "job.err"))),
    ],
)
def test_only_the_stderr_file(tmp_path: Path, canonical, mode, specs) -> None:
    """A failed job, a SOME request naming nothing, or naming only HTCondor's Out/Err."""
    rpc = _Rpc(("a",), canonical=canonical)
    _fetch(rpc, tmp_path, mode, *specs)
    assert rpc.downloads == [] and _files(tmp_path) == {"job.err": "the stderr\n"}


def test_stdio_pairs_are_not_outputs_but_a_real_output_named_so_is(tmp_path: Path) -> None:
    rpc = _Rpc(("job.out", "b"))
    _fetch(rpc, tmp_path, "SOME", ("b", "b"), ("job.out", "job.out"), ("job.err", "job.err"))
    assert rpc.downloads == [(0, tmp_path / "job.out"), (1, tmp_path / "b")]


def test_discarded_outputs_are_not_downloaded(tmp_path: Path) -> None:
    rpc = _Rpc(("a", "b"))
    _fetch(rpc, tmp_path, "ALL", ("a", os.devnull))
    assert rpc.downloads == [(1, tmp_path / "b")]


@pytest.mark.parametrize(
    ("names", "iwd", "specs", "match"),
    [
        (("a", "b"), "", (("x", "x"), ("a", "a")), r"has no output file named x \(outputs: a, b\)"),
        ((), "", (("x", "x"),), r"no output file named x \(outputs: none\)"),
        (("a",), "", (("a", "no/such/dir/a"),), "directory .*no/such/dir does not exist"),
        (("../a",), "", (), "unsafe output file name"),
        (("a",), "absent", (), "output directory .*absent does not exist"),
    ],
)
def test_refused_requests(tmp_path: Path, names, iwd, specs, match) -> None:
    rpc = _Rpc(names)
    with pytest.raises(OutputError, match=match):
        _fetch(rpc, tmp_path / iwd, "ALL", *specs)
    assert rpc.downloads == []


def test_a_zip_output_is_unpacked_and_its_members_renamed(tmp_path: Path) -> None:
    rpc = _Rpc(("out.zip",), archive=_zip(a=b"member a", b=b"member b", c=b"member c"))
    _fetch(rpc, tmp_path, "SOME", ("a", "a.txt"), ("b", "b"))
    assert _files(tmp_path) == {"a.txt": "member a", "b": "member b", "job.err": "the stderr\n"}
    _fetch(rpc, tmp_path, "ALL")
    assert set(_files(tmp_path)) == {"a", "a.txt", "b", "c", "job.err"}


def test_a_zip_output_asked_by_name_is_kept_whole(tmp_path: Path) -> None:
    rpc = _Rpc(("out.ZIP",), archive=_zip(a=b"member a"))
    _fetch(rpc, tmp_path, "SOME", ("out.ZIP", "all.zip"), ("other", "other"))
    assert rpc.downloads == [(0, tmp_path / "all.zip")]
    assert zipfile.ZipFile(tmp_path / "all.zip").namelist() == ["a"]
