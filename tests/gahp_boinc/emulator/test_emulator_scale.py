"""Large batches: a 10,000-job submit_batch and query_batch2 over 100,000 jobs, whole and
right (their speed is measured in benchmarks/boinc_submit.py, not asserted here)."""

from __future__ import annotations

from emu_helpers import Boinc


def submit_many(boinc: Boinc, batch: str, njobs: int, src: str) -> None:
    bid = boinc.create_batch(batch, "uppercase")
    jobs = "".join(
        f"<job><name>{batch}_{i}</name><command_line>--n {i}</command_line><input_file>"
        f"<mode>local_staged</mode><source>{src}</source></input_file></job>\n"
        for i in range(njobs)
    )
    r = boinc.call(
        "submit_batch",
        f"<batch><batch_id>{bid}</batch_id><app_name>uppercase</app_name>{jobs}</batch>",
    )
    assert f"<batch_id>{bid}</batch_id>" in r.text, r.text[:500]


def test_big_batches(make_server) -> None:
    srv = make_server(paused=True)
    boinc = Boinc(srv)
    [src] = boinc.stage(b"big")
    for k in range(10):
        submit_many(boinc, f"big{k}", 10_000, src)
    names = "".join(f"<batch_name>big{k}</batch_name>" for k in range(10))
    r = boinc.call("query_batch2", f"<min_mod_time>0</min_mod_time>{names}")
    assert r.text.count("<status>UNSENT</status>") == 100_000
    assert r.text.count("<batch_size>10000</batch_size>") == 10
    for k in (0, 9):
        assert f"<job_name>big{k}_9999</job_name>" in r.text
    boinc.close()
