"""``blahpd install-remote``: the pieces HTCondor's remote_gahp runs on a login node, the
override tree for ``condor_remote_cluster -o``, and what it says is missing."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gahp_blah import remote_install
from gahp_blah.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLAHPD_", "SLURM", "LSF"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), **extra)
    return env


def _cli(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gahp_blah", "install-remote", *args],
        capture_output=True,
        text=True,
        env=_env(home, **extra),
        timeout=120,
        check=False,
    )


def _fake_condor_remote_cluster(glite: Path) -> None:
    """What condor_remote_cluster leaves in ~/bosco/glite (the pieces the installer checks)."""
    for sub in ("bin", "etc", "log"):
        (glite / sub).mkdir(parents=True, exist_ok=True)
    c_blahpd = glite / "bin" / "blahpd"
    c_blahpd.write_text("#!/bin/sh\necho the C blahpd\n")
    c_blahpd.chmod(0o755)
    ft = glite / "bin" / "condor_ft-gahp"
    ft.write_text("#!/bin/sh\nexit 0\n")
    ft.chmod(0o755)
    (glite / "etc" / "condor_config.ft-gahp").write_text("LOG=/tmp\n")


def test_install_over_condor_remote_cluster_then_blahpd_runs_from_the_wrapper(tmp_path):
    home = tmp_path / "home"
    glite = home / "bosco" / "glite"
    _fake_condor_remote_cluster(glite)
    proc = _cli(home, SLURM_CONF="/etc/slurm/site.conf", LSF_ENVDIR="/opt/lsf/conf")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ready" in proc.stdout
    wrapper = glite / "bin" / "blahpd"
    assert remote_install.MARKER in wrapper.read_text()
    assert os.access(wrapper, os.X_OK)
    assert (glite / "bin" / "blahpd.orig").read_text().endswith("echo the C blahpd\n")
    assert (glite / "log").is_dir()
    # The configuration is found where remote_gahp points (BLAHPD_LOCATION) and carries the
    # batch systems' settings of the installer's environment.
    config = load_config(argparse.Namespace(), {"BLAHPD_LOCATION": str(glite)})
    assert config.files == (str(glite / "etc" / "blahpd.toml"),)
    assert config.driver_options["slurm"] == {"slurm_conf": "/etc/slurm/site.conf"}
    assert config.driver_options["lsf"] == {"lsf_envdir": "/opt/lsf/conf"}
    # As remote_gahp runs it: BLAHPD_LOCATION set, through sh; the banner is the first line.
    state = tmp_path / "state"
    run = subprocess.run(
        [str(wrapper)],
        input="COMMANDS\nQUIT\n",
        capture_output=True,
        text=True,
        env=_env(home, BLAHPD_LOCATION=str(glite), BLAHPD_STATE_DIR=str(state)),
        timeout=60,
        check=False,
    )
    lines = run.stdout.splitlines()
    assert lines[0].startswith("$GahpVersion:"), run.stdout + run.stderr
    assert "BLAH_JOB_SUBMIT" in lines[1]
    assert (glite / "log" / "BlahpdLog").stat().st_size > 0


def test_reinstall_keeps_the_c_blahpd_and_the_edited_configuration(tmp_path):
    home = tmp_path / "home"
    glite = home / "bosco" / "glite"
    _fake_condor_remote_cluster(glite)
    assert _cli(home).returncode == 0
    conf = glite / "etc" / "blahpd.toml"
    conf.write_text('drivers = ["slurm"]\n')
    proc = _cli(home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kept" in proc.stdout
    assert conf.read_text() == 'drivers = ["slurm"]\n'
    assert "the C blahpd" in (glite / "bin" / "blahpd.orig").read_text()  # not our wrapper
    assert _cli(home, "--force").returncode == 0
    assert remote_install.MARKER in conf.read_text()


def test_what_is_missing_is_said_and_the_status_is_3(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text("echo Welcome to the cluster\n")
    proc = _cli(home)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    missing = [line for line in proc.stdout.splitlines() if line.startswith("MISSING")]
    assert any("condor_ft-gahp" in m and "condor_remote_cluster" in m for m in missing)
    assert any("condor_config.ft-gahp" in m for m in missing)
    assert any("login shell prints on stdout" in m and "Welcome" in m for m in missing)
    # the pieces are written all the same
    assert (home / "bosco" / "glite" / "bin" / "blahpd").is_file()


def test_a_python_too_old_or_without_the_package_is_missing(tmp_path):
    home = tmp_path / "home"
    glite = home / "bosco" / "glite"
    _fake_condor_remote_cluster(glite)
    old = tmp_path / "python3.6"
    old.write_text("#!/bin/sh\necho old 3.6\n")
    old.chmod(0o755)
    proc = _cli(home, "--python", str(old))
    assert proc.returncode == 3
    assert "Python 3.6; blahpd needs 3.11 or newer" in proc.stdout
    proc = _cli(home, "--python", str(tmp_path / "nothing"))
    assert proc.returncode == 3
    assert "does not run" in proc.stdout
    # and the wrapper says so on stderr, never on stdout
    run = subprocess.run(
        [str(glite / "bin" / "blahpd")], capture_output=True, text=True, timeout=30, check=False
    )
    assert run.returncode == 1 and run.stdout == ""
    assert "is gone" in run.stderr


def test_override_tree_for_condor_remote_cluster(tmp_path):
    out = tmp_path / "override"
    proc = _cli(tmp_path, "--override-tree", str(out), "--python", "/home/u/venv/bin/python")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "condor_remote_cluster -o" in proc.stdout
    wrapper = out / "glite" / "bin" / "blahpd"
    assert "'/home/u/venv/bin/python' -m gahp_blah" in wrapper.read_text()
    assert (out / "glite" / "etc" / "blahpd.toml").is_file()
    assert (out / "glite" / "log").is_dir()
    assert _cli(tmp_path, "--override-tree").returncode == 2


def test_unsafe_places_are_refused(tmp_path):
    home = tmp_path / "home"
    glite = home / "bosco" / "glite"
    glite.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (glite / "bin").symlink_to(elsewhere)
    proc = _cli(home)
    assert proc.returncode == 1
    assert "a link is not followed" in proc.stderr
    assert list(elsewhere.iterdir()) == []
    (glite / "bin").unlink()
    (glite / "bin").mkdir()
    (glite / "bin").chmod(0o777)
    proc = _cli(home)
    assert proc.returncode == 1
    assert "may be written by other users" in proc.stderr


def test_a_python_path_that_is_not_one_is_refused():
    with pytest.raises(remote_install.InstallError):
        remote_install.wrapper_text("/bin/python\n; rm -rf ~")
