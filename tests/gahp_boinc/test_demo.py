"""boinc-gahp-demo, through the GAHP and through the client library."""

from __future__ import annotations

from gahp_boinc.demo import run_demo, run_library_demo


def test_library_demo(tmp_path, capsys):
    assert run_library_demo(tmp_path / "out", jobs=3, job_delay=0.05) == 0
    text = capsys.readouterr().out
    assert "summary: 3 jobs, 3 done and fetched: OK" in text
    assert "'upload_files': 1" in text and "'submit_batch': 1" in text
    assert (tmp_path / "out" / "job2.out").read_text() == "VOLUNTEER NUMBER 0\n"


def test_gahp_demo_shows_the_projects_view(tmp_path, capsys):
    assert run_demo(tmp_path / "out", jobs=2, job_delay=0.05, failing=False) == 0
    text = capsys.readouterr().out
    assert "the project's view: batch 1, 2 jobs, 0 failed, 100% done, complete" in text


def test_gahp_demo_with_a_job_failing_on_purpose(tmp_path, capsys):
    assert run_demo(tmp_path / "out", jobs=3, job_delay=0.05) == 0
    text = capsys.readouterr().out
    assert "a job of an application that fails on purpose ends as: ERROR" in text
    assert "  and fetching its output answers: job condor#demo#uppercase#" in text
    assert "no output to fetch" in text
    assert "retire: NULL" in text and "fetched outputs of 3 jobs into" in text
    assert "summary: 3 jobs, 3 done and fetched, 0 failed: OK" in text
    assert (tmp_path / "out" / "job2.out").read_text() == "VOLUNTEER NUMBER 0\n"
