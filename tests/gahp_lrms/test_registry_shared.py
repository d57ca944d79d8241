"""One status journal written by several processes at once, as when blahpd runs on several
login nodes of a shared home (or two gridmanagers reach one cluster account): no process
loses another's jobs, whether it appends or compacts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gahp_lrms import JobStatus
from gahp_lrms.registry import StatusRegistry

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from gahp_lrms import JobInfo, JobStatus
    from gahp_lrms.registry import StatusRegistry

    journal, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    registry = StatusRegistry(
        lambda ids: {}, lambda i: JobInfo(JobStatus.IDLE), journal=journal, name=tag
    )
    for k in range(n):
        registry.track(f"{tag}.{k}", JobInfo(JobStatus.IDLE))
        if k % 2:
            registry.forget(f"{tag}.{k}")  # the journal grows: compactions run meanwhile
        elif k % 3 == 0:
            registry.track(f"{tag}.{k}", JobInfo(JobStatus.COMPLETED, exit_code=k % 256))
    print("done", flush=True)
    """
)


def _writer(journal: Path, tag: str, n: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(journal), tag, str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_processes_on_one_journal_keep_each_others_jobs(tmp_path):
    journal = tmp_path / "state" / "status-registry.jsonl"
    n = 3000  # each process compacts its journal several times
    writers = [_writer(journal, tag, n) for tag in ("login1", "login2")]
    for w in writers:
        out, err = w.communicate(timeout=600)
        assert w.returncode == 0 and out.strip() == "done", err
    reader = StatusRegistry(lambda ids: {}, lambda i: None, journal=journal)  # type: ignore[arg-type,return-value]
    tracked = set(reader.tracked())
    expected = {f"{tag}.{k}" for tag in ("login1", "login2") for k in range(0, n, 2)}
    assert tracked == expected, (
        f"{len(expected - tracked)} jobs lost, {len(tracked - expected)} forgotten ones back"
    )
    entries = reader._entries
    for k in range(0, n, 6):
        info = entries[f"login2.{k}"].info
        assert info is not None and info.status == JobStatus.COMPLETED
        assert info.exit_code == k % 256
    # nothing left behind but the journal and its lock file
    assert sorted(p.name for p in journal.parent.iterdir()) == [
        "status-registry.jsonl",
        "status-registry.jsonl.lock",
    ]
