"""The RPCs one BOINC_SUBMIT makes, in order, and how a resubmission after a failure fills
the batch it left (over a scripted stand-in for BoincRpc: no server)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gahp_boinc import BoincJob, Project, RpcError, StagingError, SubmitRequest, Templates
from gahp_boinc._staging import Md5Cache  # private: unit test of staging
from gahp_boinc._submit import SubmitState, submit  # private: unit test of submission

PROJECT = Project("http://127.0.0.1:1/p/", "auth")


class _Rpc:
    """Records each RPC; ``fail`` names one to fail once; every file is absent once."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = ""
        self.batches: list[dict[str, str]] = []
        self.present: set[str] = set()

    def _call(self, *call: Any) -> None:
        self.calls.append(call)
        if call[0] == self.fail:
            self.fail = ""
            raise RpcError(f"{call[0]} broke")

    async def get_templates(self, project: Project, app_name: str) -> Templates:
        self._call("get_templates", app_name)
        return Templates(n_inputs=1, output_names=("out",))

    async def create_batch(self, project: Project, name: str, app: str, expire: float) -> int:
        self._call("create_batch", name)
        self.batches.append({"name": name, "state": "0", "id": str(len(self.batches) + 7)})
        return len(self.batches) + 6

    async def query_batches(self, project: Project) -> list[dict[str, str]]:
        self._call("query_batches")
        return self.batches

    async def query_files(self, project: Project, batch_id: int | None, names: list[str]):
        self._call("query_files", batch_id, len(names))
        return [i for i, n in enumerate(names) if n not in self.present]

    async def upload_files(self, project: Project, batch_id: int, files) -> None:
        self._call("upload_files", batch_id, len(files))
        self.present.update(name for name, _ in files)

    async def submit_batch(self, project: Project, batch_id: int, app: str, jobs, params) -> None:
        self._call("submit_batch", batch_id, [(j.name, j.command_line) for j in jobs])
        self.batches[batch_id - 7]["state"] = "1"


def _run_in_worker(fn, *args):
    async def run():
        return fn(*args)

    return run()


def _request(tmp_path: Path, *inputs: str, batch: str = "b") -> SubmitRequest:
    jobs = []
    for i, text in enumerate(inputs):
        src = tmp_path / f"in{i}.txt"
        if text:
            src.write_text(text)
        jobs.append(BoincJob(f"{batch}#{i}", ("-n", str(i)), ((str(src), "in"),)))
    return SubmitRequest(PROJECT, batch, "app", tuple(jobs))


def _submit(rpc: _Rpc, req: SubmitRequest, state: SubmitState):
    return asyncio.run(submit(rpc, req, Md5Cache(), _run_in_worker, state=state))  # type: ignore[arg-type]


def test_one_submission_and_its_report(tmp_path: Path) -> None:
    rpc, state = _Rpc(), SubmitState()
    report = _submit(rpc, _request(tmp_path, "same", "same", "other"), state)
    assert rpc.calls == [
        ("get_templates", "app"),
        ("create_batch", "b"),
        ("query_files", 7, 2),
        ("upload_files", 7, 2),
        ("submit_batch", 7, [("b#0", "-n 0"), ("b#1", "-n 1"), ("b#2", "-n 2")]),
    ]
    assert (report.batch_id, report.distinct_files, report.uploaded_files) == (7, 2, 2)
    assert report.uploaded_bytes == 9 and state.unfinished == {}
    assert state.known_outputs(PROJECT.url, "b#2") == ("out",)


@pytest.mark.parametrize(
    ("step", "link_again"),
    [("query_files", True), ("upload_files", False), ("submit_batch", False)],
)
def test_a_resubmission_fills_the_batch_left_behind(tmp_path: Path, step, link_again) -> None:
    rpc, state = _Rpc(), SubmitState()
    req = _request(tmp_path, "x")
    rpc.fail = step
    with pytest.raises(RpcError, match=f"{step} broke"):
        _submit(rpc, req, state)
    assert state.unfinished == {(PROJECT.url, "b"): not link_again}
    del rpc.calls[:]
    assert _submit(rpc, req, state).batch_id == 7
    assert [c for c in rpc.calls if c[0] in ("create_batch", "query_files")] == [
        ("query_files", 7 if link_again else None, 1)
    ]
    assert state.unfinished == {} and len(rpc.batches) == 1


def test_local_problems_fail_before_any_batch(tmp_path: Path) -> None:
    rpc, state = _Rpc(), SubmitState()
    with pytest.raises(StagingError, match="in1.txt"):
        _submit(rpc, _request(tmp_path, "x", ""), state)  # in1.txt absent
    assert rpc.calls == []
    req = SubmitRequest(PROJECT, "b", "app", (BoincJob("b#0", (), ()),))
    with pytest.raises(StagingError, match="job b#0 has 0 input files but application app"):
        _submit(rpc, req, state)
    assert rpc.calls == [("get_templates", "app")]
