"""CERequirements -> shell variables, the site's local-submit-attributes hook, X509_USER_PROXY."""

from __future__ import annotations

import argparse
import tempfile
import time

import pytest

from gahp_blah.config import load_config
from gahp_blah.local_attributes import (
    LocalAttributesError,
    hook_script,
    run_hook,
    shell_variables,
    unwind,
)
from gahp_blah.submit_ad import SubmitError, parse_submit_ad
from gahp_core import ConfigError
from gahp_lrms import JobSpec
from gahp_lrms.script import render_script
from gahp_lrms.sge import qsub_options, sge_script


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # what HTCondor-CE always sends
        ("CondorCE == 1", [("CondorCE", "1")]),
        # as the C blahp 25.0.13 writes them (observed with its -C file)
        (
            "Walltime == 60 && Mem >= 2000 && Cores <= 8 && M2 > 3 && M3 < 4",
            [
                ("Walltime", "60"),
                ("Mem_Min", "2000"),
                ("Cores_Max", "8"),
                ("M2_Min", "3"),
                ("M3_Max", "4"),
            ],
        ),
        ('foo == "bar baz" && s == "a\\"b"', [("foo", '"bar baz"'), ("s", '"a\\"b"')]),
        (
            "5 == five && 5 >= a && 6 < b && other =?= 7",
            [("five", "5"), ("a_Max", "5"), ("b_Min", "6"), ("other", "7")],
        ),
        (
            "d == -1 && (x == 1 || y == 2) && !(g == 1)",
            [("d", "-1"), ("x", "1"), ("y", "2"), ("g", "1")],
        ),
        # nothing from these
        (
            "r == 1.5 && t == true && u == undefined && c != 3 && h =!= 2 && e == other_attr"
            " && i == 1 + 2 && l == {1, 2}",
            [],
        ),
        ("dup == 1 && dup == 2", [("dup", "1"), ("dup", "2")]),
        ("MY.m == 3 && member(k == 4, {}) && z is 5", [("m", "3"), ("k", "4"), ("z", "5")]),
        # records, selections, quoted names, indexes and calls are looked through, never named
        (
            "[a = b == 1; c = 2].a == 1 && 'q' == 3 && TARGET.t >= 4 && l[0] == 5 && f() == 6"
            " && h == 0x1F",
            [("b", "1"), ("t_Min", "4"), ("h", "31")],
        ),
        ("", []),
    ],
)
def test_unwind_like_the_c_blahp(expression, expected):
    assert unwind(expression) == expected


def test_unwind_refuses_garbage_clearly():
    with pytest.raises(LocalAttributesError, match="CERequirements"):
        unwind("a == (1")
    with pytest.raises(LocalAttributesError, match="unexpected ']'"):
        unwind("a == ]")


def test_shell_variables_are_quoted_and_reserved_names_left_out():
    lines = shell_variables(
        [("a", "1"), ("q", "it's $(x)"), ("PATH", "/x"), ("BASH_ENV", "/y"), ("LD_PRELOAD", "z")]
    )
    assert lines == ["a='1'", "q='it'\"'\"'s $(x)'"]


def _site_script(tmp_path, body: str, lrms: str = "slurm"):
    path = tmp_path / f"{lrms}_local_submit_attributes.sh"
    path.write_text("#!/bin/bash\n" + body)
    return path


def test_hook_gets_the_variables_and_its_output_becomes_directives(tmp_path):
    script = _site_script(
        tmp_path,
        (
            'echo "#SBATCH --comment=$CondorCE.$Mem_Min.$blah_opt_mpinodes.$(pwd)"\n'
            '[ -z "$(printenv CondorCE)" ] && echo "# not exported, as with the C blahp"\n'
            'echo "#SBATCH --x=$q"\n'
            "echo\n"
        ),
    )
    assert hook_script(tmp_path, "slurm") == script
    assert hook_script(tmp_path, "pbs") is None
    assert hook_script(None, "slurm") is None
    work = tmp_path / "work"
    work.mkdir()
    pairs = unwind('CondorCE == 1 && Mem >= 2000 && q == "$(touch pwned)"')
    lines = run_hook(script, shell_variables(pairs), mpinodes=4, cwd=str(work), timeout=10)
    assert lines == (
        f"#SBATCH --comment=1.2000.4.{work}",
        "# not exported, as with the C blahp",
        '#SBATCH --x="$(touch pwned)"',
    )
    assert not (work / "pwned").exists()


def test_failing_hook_is_a_clear_error(tmp_path):
    script = _site_script(tmp_path, "echo '#SBATCH -p x'\necho 'no such partition' >&2\nexit 3\n")
    with pytest.raises(LocalAttributesError, match=r"failed \(exit status 3\): no such partition"):
        run_hook(script, [], timeout=10)


def test_hanging_hook_is_killed_with_its_children(tmp_path):
    script = _site_script(tmp_path, "sleep 60 &\nsleep 60\n")
    start = time.monotonic()
    with pytest.raises(LocalAttributesError, match="did not finish within 0.5 s"):
        run_hook(script, [], timeout=0.5)
    assert time.monotonic() - start < 5


def test_hook_file_is_written_in_gahp_temp_and_removed(tmp_path, monkeypatch):
    script = _site_script(tmp_path, 'echo "$0"\necho "$PWD"\n')
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("GAHP_TEMP", str(temp))
    monkeypatch.chdir(tmp_path)
    hook_file, cwd = run_hook(script, [], cwd=str(tmp_path / "missing"), timeout=10)
    assert hook_file.startswith(f"{temp}/blahpd-attributes-") and hook_file.endswith(".sh")
    assert cwd == str(tmp_path)  # a working directory that does not exist: blahpd's own
    assert list(temp.iterdir()) == []
    monkeypatch.setenv("GAHP_TEMP", str(tmp_path / "not-a-directory"))
    hook_file, _ = run_hook(script, [], timeout=10)
    assert hook_file.startswith(f"{tempfile.gettempdir()}/blahpd-attributes-")


def test_site_config(tmp_path):
    conf = tmp_path / "blahpd.toml"
    conf.write_text(
        '[site]\nlocal_submit_attributes_dir = "/etc/blahp"\n'
        "local_submit_attributes_timeout = 5\n"
        'local_submit_attributes_setup_args = "A B"\n'
    )
    site = load_config(argparse.Namespace(config=str(conf), state_dir=str(tmp_path))).site
    assert str(site.local_submit_attributes_dir) == "/etc/blahp"
    assert site.local_submit_attributes_timeout == 5
    assert site.local_submit_attributes_setup_args == ("A", "B")
    conf.write_text("[site]\nlocal_submit_attribute_dir = 1\n")
    with pytest.raises(ConfigError, match="unknown configuration key site.local_submit_attr"):
        load_config(argparse.Namespace(config=str(conf), state_dir=str(tmp_path)))


def test_submit_ad_sets_x509_user_proxy_and_keeps_cerequirements(tmp_path):
    (tmp_path / "x509up").write_text("proxy")
    ad = parse_submit_ad(
        f'[ Cmd = "/bin/true"; gridtype = "fork"; Iwd = "{tmp_path}"; x509UserProxy = "x509up";'
        ' Environment = "X509_USER_PROXY=/wrong A=b"; CERequirements = CondorCE == 1;'
        " NodeNumber = 4 ]",
        expressions=("Missing", "CERequirements"),
    )
    assert ad.spec.environment["X509_USER_PROXY"] == str(tmp_path / "x509up")
    assert ad.proxy == str(tmp_path / "x509up")
    assert ad.expressions == (("CERequirements", "CondorCE == 1"),)
    assert ad.node_number == 4
    gone = parse_submit_ad('[ Cmd = "/bin/true"; gridtype = "fork"; x509UserProxy = "/none" ]')
    assert "X509_USER_PROXY" not in gone.spec.environment
    with pytest.raises(SubmitError, match="relative"):
        parse_submit_ad('[ Cmd = "/bin/true"; gridtype = "fork"; x509UserProxy = "x509up" ]')


def test_directives_head_the_batch_script():
    spec = JobSpec("/bin/true", directives=["#SBATCH --partition=short", "#PBS -l x=1"])
    script = render_script(spec)
    assert script.startswith("#!/bin/sh\n#SBATCH --partition=short\n#PBS -l x=1\n# Generated")
    with pytest.raises(ValueError, match="one line"):
        JobSpec("/bin/true", directives=["#SBATCH -p a\nrm -rf /"])
    with pytest.raises(TypeError):
        JobSpec("/bin/true", directives="#SBATCH -p a")  # type: ignore[arg-type]


def test_sge_directives_only_from_the_site():
    user = JobSpec("/bin/true", arguments=["x\n#$ -l h_rt=1"], environment={"E": "\n#$ -q evil"})
    script, prefix = sge_script(user)
    assert prefix == "" and qsub_options(user)[1:3] == ["-C", ""]
    site = JobSpec(
        user.executable,
        user.arguments,
        user.environment,
        directives=["#$ -l h_rt=600", "# a comment"],
    )
    script, prefix = sge_script(site)
    assert prefix.startswith("#gahp") and len(prefix) == 21
    assert qsub_options(site, directive_prefix=prefix)[1:3] == ["-C", prefix]
    read = [line for line in script.split("\n") if line.startswith(prefix)]
    assert read == [prefix + " -l h_rt=600"]
    assert "\n#$ -q evil" in script  # the user's line stays inert: "#$" is not the prefix
