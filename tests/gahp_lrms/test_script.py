"""The generated batch script, executed here by /bin/sh."""

from __future__ import annotations

import json
import subprocess
import sys

import attrs
from lrms_helpers import ECHO_PROGRAM, TRICKY_ARGS, TRICKY_ENV

from gahp_lrms import JobSpec
from gahp_lrms.script import render_script


def _run(script: str, tmp_path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "job.sh"
    path.write_text(script)
    return subprocess.run(["/bin/sh", str(path)], capture_output=True, text=True, timeout=30)


def test_script_passes_everything_intact(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(f"#!{sys.executable}\n{ECHO_PROGRAM}")
    prog.chmod(0o755)
    work = tmp_path / "w d"
    work.mkdir()
    (work / "in").write_text("abc")
    spec = JobSpec(
        str(prog),
        TRICKY_ARGS,
        environment={**TRICKY_ENV, "GAHP_T_EXIT": "2"},
        stdin="in",
        stdout="o'ut",
        stderr="err",
        workdir=str(work),
    )
    script = render_script(spec, header=["#SBATCH --x"])
    assert script.startswith("#!/bin/sh\n#SBATCH --x\n")
    proc = _run(script, tmp_path)
    assert proc.returncode == 2
    got = json.loads((work / "o'ut").read_text())
    assert got["argv"] == list(TRICKY_ARGS)
    assert got["env"] == {**TRICKY_ENV, "GAHP_T_EXIT": "2"}
    assert got["cwd"] == str(work) and got["stdin"] == "abc"
    assert (work / "err").read_text() == "to stderr\n"


def test_count_loop_waits_for_all_and_reports_first_failure(tmp_path):
    out = tmp_path / "out"
    spec = JobSpec(
        "/bin/sh",
        ("-c", 'read x; echo "$x $$"; exit 3'),
        stdin=str(tmp_path / "in"),
        stdout=str(out),
        stderr=str(out),
        count=3,
        environment={"IFS": "x"},
    )
    # (not cat: GNU cat's copy_file_range races on an output offset shared by the instances)
    (tmp_path / "in").write_text("in\n")
    proc = _run(render_script(spec), tmp_path)
    assert proc.returncode == 3
    text = out.read_text()  # instances run concurrently: their output may interleave
    assert text.count("in") == 3 and len(text.split()) >= 3


def test_launcher_used_for_count(tmp_path):
    script = render_script(JobSpec("-weird", ("a",), count=2), launcher=["srun", "-x"])
    assert script.rstrip().endswith("exec srun -x ./-weird a")


def test_missing_workdir_fails_the_job(tmp_path):
    proc = _run(render_script(JobSpec("/bin/true", workdir=str(tmp_path / "nope"))), tmp_path)
    assert proc.returncode != 0


def test_one_line_values_start_no_line_with_user_text(tmp_path):
    """bsub reads "#BSUB" lines anywhere in a script: with one_line_values no value spans
    lines, and the values still reach the program intact."""
    prog = tmp_path / "prog.py"
    prog.write_text(f"#!{sys.executable}\n{ECHO_PROGRAM}")
    prog.chmod(0o755)
    work = tmp_path / "w\n#BSUB -q x"
    work.mkdir()
    args = (*TRICKY_ARGS, "a\n#BSUB -H\n", "\n", "x\n\n  #BSUB -m h")
    # gahp_nl, the script's own newline variable, is also a variable of the job here.
    env = {**TRICKY_ENV, "GAHP_T_D": "\n#BSUB -J j\n", "gahp_nl": "mine"}
    spec = JobSpec(
        str(prog),
        args,
        environment=env,
        stdout="out\n#BSUB -o x",
        stderr="err",
        workdir=str(work),
    )
    for count in (1, 3):
        script = render_script(attrs.evolve(spec, count=count), one_line_values=True)
        assert not [line for line in script.splitlines() if line.lstrip().startswith("#BSUB")]
    assert [line for line in render_script(spec).splitlines() if line.startswith("#BSUB")]
    assert _run(render_script(spec, one_line_values=True), tmp_path).returncode == 0
    got = json.loads((work / "out\n#BSUB -o x").read_text())
    assert got["argv"] == list(args)
    assert got["env"] == {k: v for k, v in env.items() if k.startswith("GAHP_T_")}
    assert got["cwd"] == str(work)
    assert "#BSUB" in render_script(spec).split("#BSUB", 1)[0] + "#BSUB"  # (plain: it does)
