"""The C blahp's blah.config, read as the C blahp reads it when no TOML is given: the search
order, blah.config.d and ~/.blah/user.config, shell quoting, hostile content (never run),
warnings for what is not honoured, --show-config, the site script found where the C blahp
finds it, and a blahpd installed without the ClassAd library."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from blah_helpers import Blah, ad_string

from gahp_blah import blah_config
from gahp_blah.config import load_config
from gahp_blah.shellvars import parse_assignments
from gahp_blah.show_config import render
from gahp_core import ConfigError
from gahp_core.testing import GahpClient

BLAHPD = [sys.executable, "-m", "gahp_blah"]
NO_OPTIONS = argparse.Namespace(config=None, state_dir=None)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A clean environment: HOME in tmp_path, no /etc/blah.config, no TOML named."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(blah_config, "SYSTEM_CONFIG", tmp_path / "etc-blah.config")
    monkeypatch.setenv("HOME", str(home))
    for name in (
        "BLAHPD_CONFIG",
        "BLAHPD_CONFIG_LOCATION",
        "BLAHPD_LOCATION",
        "GLITE_LOCATION",
        "BLAHPD_STATE_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    return {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def config(env: dict[str, str]):
    return load_config(NO_OPTIONS, env)


def slurm_bin(c) -> str:
    return str(c.driver_options["slurm"]["bin_dir"])


# ---- where blah.config is found ----------------------------------------------------------


def test_search_order_follows_the_c_blahp(env, tmp_path):
    system = write(blah_config.SYSTEM_CONFIG, "slurm_binpath=/from/etc\n")
    assert slurm_bin(config(env)) == "/from/etc"
    # $BLAHPD_LOCATION/etc/blah.config before /etc/blah.config (remote_gahp sets it)
    loc = tmp_path / "loc"
    write(loc / "etc" / "blah.config", "slurm_binpath=/from/location\n")
    assert slurm_bin(config({**env, "BLAHPD_LOCATION": str(loc)})) == "/from/location"
    # ... and $GLITE_LOCATION when BLAHPD_LOCATION is unset
    assert slurm_bin(config({**env, "GLITE_LOCATION": str(loc)})) == "/from/location"
    # a BLAHPD_LOCATION without the file: /etc/blah.config
    assert slurm_bin(config({**env, "BLAHPD_LOCATION": str(tmp_path)})) == "/from/etc"
    # $BLAHPD_CONFIG_LOCATION first of all
    named = write(tmp_path / "named.config", "slurm_binpath=/from/named\n")
    c = config({**env, "BLAHPD_LOCATION": str(loc), "BLAHPD_CONFIG_LOCATION": str(named)})
    assert slurm_bin(c) == "/from/named" and c.files == (str(named),)
    assert c.origins["driver.slurm.bin_dir"] == f"{named}, line 1: slurm_binpath=/from/named"
    system.unlink()
    assert "slurm" not in config(env).driver_options  # no file at all: defaults


def test_named_config_that_is_missing_is_an_error(env, tmp_path):
    with pytest.raises(ConfigError, match="cannot read .*nowhere.config: No such file"):
        config({**env, "BLAHPD_CONFIG_LOCATION": str(tmp_path / "nowhere.config")})


def test_dot_d_in_name_order_then_user_config(env, tmp_path):
    main = write(
        tmp_path / "blah.config",
        "slurm_binpath=/main\npbs_binpath=/main\nlsf_binpath=/main\nsge_binpath=/main\n",
    )
    d = tmp_path / "blah.config.d"
    write(d / "20-second", "pbs_binpath=/second\nlsf_binpath=/second\n")
    write(d / "10-first", "pbs_binpath=/first\nslurm_binpath=/first\n")
    write(d / ".hidden", "sge_binpath=/hidden\n")
    write(Path(env["HOME"]) / ".blah" / "user.config", "lsf_binpath=/user\n")
    c = config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})
    opts = {k: str(v["bin_dir"]) for k, v in c.driver_options.items()}
    assert opts == {"slurm": "/first", "pbs": "/second", "lsf": "/user", "sge": "/main"}
    assert c.files == (
        str(main),
        str(d / "10-first"),
        str(d / "20-second"),
        str(Path(env["HOME"]) / ".blah" / "user.config"),
    )


def test_dot_d_skips_what_is_not_a_file_and_refuses_too_many_files(env, tmp_path):
    main = write(tmp_path / "blah.config", "slurm_binpath=/main\n")
    d = tmp_path / "blah.config.d"
    (d / "10-a-directory").mkdir(parents=True)
    write(d / "20-file", "slurm_binpath=/d\n")
    c = config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})
    assert c.files == (str(main), str(d / "20-file")) and slurm_bin(c) == "/d"
    for n in range(256):  # 257 entries: over the limit
        write(d / f"{n:03}", "")
    with pytest.raises(ConfigError, match="blah.config.d holds more than 256 files"):
        config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})


def test_a_toml_wins(env, tmp_path):
    main = write(tmp_path / "blah.config", "slurm_binpath=/from/blah\n")
    toml = write(tmp_path / "blahpd.toml", '[driver.slurm]\nbin_dir = "/from/toml"\n')
    e = {**env, "BLAHPD_CONFIG_LOCATION": str(main)}
    assert slurm_bin(config({**e, "BLAHPD_CONFIG": str(toml)})) == "/from/toml"
    c = load_config(argparse.Namespace(config=str(toml), state_dir=None), e)
    assert slurm_bin(c) == "/from/toml" and c.files == (str(toml),)
    # $BLAHPD_LOCATION/etc/blahpd.toml is a TOML location too
    loc = tmp_path / "loc"
    write(loc / "etc" / "blahpd.toml", '[driver.slurm]\nbin_dir = "/from/location/toml"\n')
    write(loc / "etc" / "blah.config", "slurm_binpath=/from/location/blah\n")
    assert slurm_bin(config({**env, "BLAHPD_LOCATION": str(loc)})) == "/from/location/toml"


# ---- what the keys become ----------------------------------------------------------------


def test_keys_map_to_the_drivers_and_the_site(env, tmp_path):
    main = write(
        tmp_path / "blah.config",
        """\
supported_lrms=slurm
pbs_pro=yes
lsf_confpath=/opt/lsf/conf
sge_rootpath=/opt/sge
sge_cellname=$SGE_CELL
sge_pe_policy=smp
export SLURM_CONF=/etc/slurm/other.conf
export CONDOR_CONFIG=/opt/pool/condor_config
condor_binpath=/opt/pool/bin
blah_libexec_directory=/opt/site
local_submit_attributes_setup_args[0]=Walltime
local_submit_attributes_setup_args[1]=Queue
blah_pass_submit_attributes[0]="x509UserProxySubject"
blah_pass_all_submit_attributes=no
""",
    )
    c = config({**env, "BLAHPD_CONFIG_LOCATION": str(main), "SGE_CELL": "cell9"})
    d = c.driver_options
    assert d["pbs"]["flavor"] == "pbspro"
    assert d["lsf"] == {"lsf_envdir": "/opt/lsf/conf"}
    assert d["sge"] == {"sge_root": "/opt/sge", "sge_cell": "cell9", "parallel_environment": "smp"}
    assert d["slurm"] == {"slurm_conf": "/etc/slurm/other.conf"}
    assert d["condor"] == {"condor_config": "/opt/pool/condor_config"}
    assert "condor" in c.drivers
    assert c.drivers == tuple(sorted(c.drivers)) and "pbs" in c.drivers  # filters nothing
    assert c.supported_lrms == ("slurm",)
    site = c.site
    assert site.local_submit_attributes_setup_args == ("Walltime", "Queue")
    assert site.passed_attributes() == ("x509UserProxySubject", "VirtualOrganisation")
    assert site.script_search() == (
        Path(env["HOME"]) / ".blah",
        Path("/opt/site"),
        Path("/etc/blahp"),
    )
    assert c.warnings == ()


def test_not_honoured_and_unknown_keys_are_warned_harmless_ones_are_not(env, tmp_path):
    main = write(
        tmp_path / "blah.config",
        """\
blah_max_threaded_cmds=50
bupdater_debug_level=1
pbs_BLPserver1=
job_registry=
condor_binpath=/usr/bin
blah_disable_limited_proxy=yes
blah_run_in_workdir=yes
blah_shared_directories=/
blah_run_in_workdir=no
blah_shared_directories=/home
blah_require_proxy_on_submit=yes
condor_expand_home_env=yes
slurm_bin_path=/typo
export SOME_SITE_VAR=1
export LD_PRELOAD=/tmp/evil.so
""",
    )
    c = config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})
    text = "\n".join(c.warnings)
    assert len(c.warnings) == 6, text
    assert "line 9: blah_run_in_workdir=no: not honoured: jobs run in their Iwd" in text
    assert "line 10: blah_shared_directories=/home: not honoured" in text
    assert "blah_require_proxy_on_submit=yes: not honoured" in text
    assert "condor_expand_home_env=yes: not honoured: $HOME in a condor job's" in text
    assert "line 13: slurm_bin_path=/typo: unknown key slurm_bin_path: ignored" in text
    assert "export LD_PRELOAD=/tmp/evil.so: exported LD_PRELOAD is not passed on" in text
    assert c.exports == {"SOME_SITE_VAR": "1"}  # set in blahpd's environment, as sourced


def test_the_packaged_blah_config_needs_no_warning(env, tmp_path):
    tarball = Path("/work/shared/blahp/blahp-25.0.13-debian12-x86_64.tar.xz")
    if not tarball.exists():
        pytest.skip("the packaged C blahp is not here")
    subprocess.run(
        ["tar", "-xJf", str(tarball), "-C", str(tmp_path), "blahp-25.0.13/etc/blah.config"],
        check=True,
    )
    loc = tmp_path / "blahp-25.0.13"
    c = config({**env, "BLAHPD_LOCATION": str(loc)})
    assert c.warnings == ()
    assert str(c.driver_options["slurm"]["bin_dir"]) == "/usr/bin"
    assert c.driver_options["sge"] == {"parallel_environment": "*"}  # $SGE_* unset: empty
    assert c.driver_options["pbs"]["flavor"] == "auto"  # pbs_pro=no: detected


def test_a_bad_value_names_its_line(env, tmp_path):
    main = write(tmp_path / "blah.config", "# port\nexport SGE_QMASTER_PORT=lots\n")
    with pytest.raises(ConfigError) as info:
        config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})
    assert "driver.sge.sge_qmaster_port must be a port number, not 'lots'" in str(info.value)
    assert f"{main}, line 2: export SGE_QMASTER_PORT=lots" in str(info.value)


def test_a_world_writable_file_is_refused(env, tmp_path):
    main = write(tmp_path / "blah.config", "slurm_binpath=/x\n")
    main.chmod(0o666)
    with pytest.raises(ConfigError, match="may be written by every user"):
        config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})
    main.chmod(0o644)
    d = tmp_path / "blah.config.d"
    d.mkdir(mode=0o755)
    d.chmod(0o1777)  # anyone could add a file
    with pytest.raises(ConfigError, match="blah.config.d may be written by every user"):
        config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})


# ---- the shell syntax, never run ---------------------------------------------------------


def test_shell_quoting_comments_and_expansion():
    text = r"""
# a comment
  a=plain   # trailing comment
b='single $HOME quoted'
c="double $HOME ${HOME}/x ${UNSET:-dflt} \"q\" \$lit"
d=back\ slash\
ed
e=$a-$b
export f=exported
g=(one "two three" 'four')
h[0]=x
h[2]=z
i=~/dir
"""
    out = parse_assignments(text, "f", {"HOME": "/home/u"})
    v = {k: a.value for k, a in out.values.items()}
    assert v == {
        "a": "plain",
        "b": "single $HOME quoted",
        "c": 'double /home/u /home/u/x dflt "q" $lit',
        "d": "back slashed",
        "e": "plain-single $HOME quoted",
        "f": "exported",
        "g": ("one", "two three", "four"),
        "h": ("x", "z"),
        "i": "/home/u/dir",
    }
    assert out.values["f"].exported and not out.values["a"].exported
    assert out.values["c"].line == 5 and out.notes == []


def test_hostile_content_is_text_never_run(env, tmp_path):
    marker = tmp_path / "ran"
    main = write(
        tmp_path / "blah.config",
        f"""\
slurm_binpath=$(touch {marker})
pbs_binpath="`touch {marker}`"
touch {marker}
. {tmp_path}/other; touch {marker}
lsf_binpath=/ok; touch {marker} | cat
""",
    )
    c = config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})
    assert slurm_bin(c) == f"$(touch {marker})"
    assert str(c.driver_options["pbs"]["bin_dir"]) == f"`touch {marker}`"
    assert str(c.driver_options["lsf"]["bin_dir"]) == "/ok"
    assert not marker.exists()
    text = "\n".join(c.warnings)
    assert "line 1: command substitution" in text and "line 3: not an assignment" in text
    # and through blahpd itself
    proc = subprocess.run(
        [*BLAHPD, "--show-config"],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "BLAHPD_CONFIG_LOCATION": str(main)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert f"driver.slurm.bin_dir = $(touch {marker})" in proc.stdout


# ---- --show-config -------------------------------------------------------------------------


def test_show_config_prints_each_setting_and_where_it_came_from(env, tmp_path):
    main = write(
        tmp_path / "etc" / "blah.config",
        "supported_lrms=slurm,pbs\nslurm_binpath=/usr/bin\nblah_run_in_workdir=no\n",
    )
    write(tmp_path / "etc" / "blah.config.d" / "50-site", "pbs_pro=yes\n")
    run_env = {**os.environ, **env, "BLAHPD_LOCATION": str(tmp_path)}
    run_env.pop("BLAHPD_CONFIG", None)
    proc = subprocess.run(
        [*BLAHPD, "--show-config"], capture_output=True, text=True, env=run_env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"# configuration files read: {main}, {main}.d/50-site"
    at = lines.index("driver.slurm.bin_dir = /usr/bin")
    assert lines[at + 1] == f" # at: {main}, line 2: slurm_binpath=/usr/bin"
    at = lines.index("driver.pbs.flavor = pbspro")
    assert lines[at + 1] == f" # at: {main}.d/50-site, line 1: pbs_pro=yes"
    at = lines.index("driver.slurm.command_timeout = 30.0")
    assert lines[at + 1] == " # at: <default>"
    assert "supported_lrms (filters nothing, as in the C blahp) = slurm pbs" in lines
    assert any(ln.startswith("# WARNING: ") and "blah_run_in_workdir=no" in ln for ln in lines)
    assert "# ClassAd library: installed" in lines


def test_show_config_sections_site_scripts_exports_and_warnings(env, tmp_path):
    libexec = tmp_path / "libexec"
    write(libexec / "slurm_local_submit_attributes.sh", "echo\n")
    write(libexec / "pbs_local_submit_attributes.sh", "echo\n").chmod(0o666)
    main = write(
        tmp_path / "blah.config",
        f"supported_lrms=slurm,pbs\nexport FOO=1\nblah_libexec_directory={libexec}\n"
        "blah_run_in_workdir=no\n",
    )
    lines = list(render(config({**env, "BLAHPD_CONFIG_LOCATION": str(main)})))
    heads = [line.split(" = ")[0].split(".")[0] for line in lines if " = " in line]
    firsts = [
        heads.index(h)
        for h in (
            "state_dir",
            "supported_lrms (filters nothing, as in the C blahp)",
            "default_gridtype",
            "driver",
            "site",
            "site script for slurm",
            "export FOO",
        )
    ]
    assert firsts == sorted(firsts), heads
    assert f"site script for slurm = {libexec}/slurm_local_submit_attributes.sh" in lines
    refused = [line for line in lines if line.startswith("# pbs: site script")]
    assert len(refused) == 1 and "may be changed by other users" in refused[0]
    assert lines[lines.index("export FOO = 1") + 1] == f" # at: {main}, line 2: export FOO=1"
    assert lines[-1].startswith("# WARNING: ") and "blah_run_in_workdir=no" in lines[-1]


def test_show_config_of_a_bad_file_exits_non_zero(env, tmp_path):
    main = write(tmp_path / "blah.config", "export SGE_QMASTER_PORT=0\n")
    run_env = {**os.environ, **env, "BLAHPD_CONFIG_LOCATION": str(main)}
    run_env.pop("BLAHPD_CONFIG", None)
    proc = subprocess.run(
        [*BLAHPD, "--show-config"], capture_output=True, text=True, env=run_env, timeout=60
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert "sge_qmaster_port must be a port number, not 0" in proc.stderr
    assert f"{main}, line 1" in proc.stderr


def test_startup_warnings_on_stderr_and_exports_reach_the_job(env, tmp_path):
    """blahpd names what it does not honour on stderr (stdout is the protocol) and passes
    blah.config's exported variables on, as the C blahp's scripts (which source it) do."""
    main = write(
        tmp_path / "blah.config",
        "blah_run_in_workdir=no\nexport BT_FROM_BLAH_CONFIG='site value'\n",
    )
    run_env = {**os.environ, **env, "BLAHPD_CONFIG_LOCATION": str(main)}
    run_env.pop("BLAHPD_CONFIG", None)
    with Blah("--state-dir", tmp_path / "state", env=run_env) as b:
        jobid = b.submit_ok(Cmd="/usr/bin/env", Iwd=str(tmp_path), Out="env.txt", gridtype="fork")
        b.wait(jobid, 4)
        assert b.c.quit() == 0
        err = b.c.stderr_text
    assert "BT_FROM_BLAH_CONFIG=site value" in (tmp_path / "env.txt").read_text().splitlines()
    lines = [ln for ln in err.splitlines() if "blah_run_in_workdir=no: not honoured" in ln]
    assert len(lines) == 1 and f"{main}, line 1" in lines[0], err


def test_the_log_names_the_configuration_files_read(env, tmp_path):
    """An operator (and the CE test) can see in blahpd's log which files it runs from."""
    main = write(tmp_path / "blahp" / "etc" / "blah.config", "slurm_binpath=/usr/bin\n")
    write(tmp_path / "blahp" / "etc" / "blah.config.d" / "50-site", "pbs_pro=yes\n")
    run_env = {**os.environ, **env, "BLAHPD_LOCATION": str(tmp_path / "blahp")}
    run_env.pop("BLAHPD_CONFIG", None)
    log = tmp_path / "blahpd.log"
    c = GahpClient(
        [*BLAHPD, "--state-dir", str(tmp_path / "state"), "--log", str(log)], env=run_env
    )
    assert c.quit() == 0
    lines = [ln for ln in log.read_text().splitlines() if "configuration files read:" in ln]
    assert len(lines) == 1 and lines[0].endswith(f"read: {main}, {main}.d/50-site"), lines


# ---- the site script, found where the C blahp finds it -------------------------------------


def test_site_script_in_blah_libexec_directory_drives_a_slurm_job(batch_env, env, tmp_path):
    """No TOML at all: blah.config (found through BLAHPD_LOCATION, as remote_gahp and the
    gridmanager set it) gives the Slurm commands' directory and configuration and the site
    script's directory; the script sees the passed VirtualOrganisation and CERequirements."""
    slurm = batch_env("slurm")
    assert slurm is not None
    loc = tmp_path / "blahp"
    site = tmp_path / "site scripts"
    write(
        site / "slurm_local_submit_attributes.sh",
        'echo "#SBATCH --comment=site-$VirtualOrganisation-$CondorCE"\n',
    )
    sbatch = shutil.which("sbatch", path=slurm.get("PATH"))
    assert sbatch
    write(
        loc / "etc" / "blah.config",
        f"""\
supported_lrms=pbs,slurm
slurm_binpath={os.path.dirname(sbatch)}
export SLURM_CONF={slurm.get("SLURM_CONF", "/etc/slurm/slurm.conf")}
blah_libexec_directory="{site}"
""",
    )
    run_env = {k: v for k, v in slurm.items() if k not in ("SLURM_CONF", "BLAHPD_CONFIG")}
    run_env.update(HOME=env["HOME"], BLAHPD_LOCATION=str(loc))
    c = GahpClient([*BLAHPD, "--state-dir", str(tmp_path / "state")], env=run_env)
    try:
        ad = (
            ad_string(
                Cmd="/bin/true", Iwd=str(tmp_path), gridtype="slurm", VirtualOrganisation="myvo"
            )[:-1]
            + "; CERequirements = CondorCE == 1 ]"
        )
        res = c.call("BLAH_JOB_SUBMIT", ad, timeout=60)
        assert res[0] == "0", res
        native = res[2].split("/")[-1]
        show = subprocess.run(
            ["scontrol", "show", "job", native],
            env=slurm,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "Comment=site-myvo-1" in show.stdout, show.stdout
    finally:
        c.quit()


def test_user_site_script_comes_first_and_a_writable_one_is_refused(env, tmp_path):
    from gahp_blah.local_attributes import LocalAttributesError, find_site_script

    lib = tmp_path / "libexec"
    user = Path(env["HOME"]) / ".blah"
    write(lib / "slurm_local_submit_attributes.sh", "echo lib\n")
    assert find_site_script((user, lib), "slurm") == lib / "slurm_local_submit_attributes.sh"
    mine = write(user / "slurm_local_submit_attributes.sh", "echo user\n")
    assert find_site_script((user, lib), "slurm") == mine
    mine.chmod(0o666)
    with pytest.raises(LocalAttributesError, match="may be changed by other users"):
        find_site_script((user, lib), "slurm")


# ---- without the ClassAd library ---------------------------------------------------------


def test_without_classad2_blahpd_says_so_and_refuses_submit_and_ping(env, tmp_path):
    blocker = tmp_path / "blocker" / "classad2"
    write(blocker / "__init__.py", "raise ImportError(\"No module named 'classad2'\")\n")
    run_env = {
        **os.environ,
        **env,
        "PYTHONPATH": os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")]),
    }
    run_env.pop("BLAHPD_CONFIG", None)
    c = GahpClient([*BLAHPD, "--state-dir", str(tmp_path / "state")], env=run_env)
    try:
        res = c.call("BLAH_JOB_SUBMIT", '[Cmd="/bin/true"; gridtype="fork"; Iwd="/tmp"]')
        assert len(res) == 3 and res[0] == "1" and res[2] == "N/A", res
        assert "pip install 'gahp[blah]'" in res[1] and "classad2" in res[1], res
        res = c.call("BLAH_PING", "fork")
        assert len(res) == 2 and res[0] == "1" and "'blah' extra" in res[1], res
        res = c.call("BLAH_JOB_STATUS", "fork/20260101/123")  # still answered
        assert len(res) == 4, res
    finally:
        assert c.quit() == 0
    assert "ClassAd library is not installed" in c.stderr_text, c.stderr_text
    assert "Traceback" not in c.stderr_text


def test_show_config_through_gahp_server(env, tmp_path):
    main = write(tmp_path / "blah.config", "slurm_binpath=/opt/slurm/bin\n")
    run_env = {**os.environ, **env, "BLAHPD_CONFIG_LOCATION": str(main)}
    run_env.pop("BLAHPD_CONFIG", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gahp_core._cli import main; main()",
            "--backend",
            "blah",
            "--show-config",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=run_env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "driver.slurm.bin_dir = /opt/slurm/bin" in proc.stdout.splitlines()
    assert "$GahpVersion" not in proc.stdout


def test_shell_declarations_defaults_and_what_is_skipped():
    text = r"""declare -r a=1 b
typeset c=x; readonly d=y
export e
e=later
f[x]=bad
g=${UNSET-dflt} h=${EMPTY-dflt} i=${EMPTY:-dflt} j=$1 k=${a#x} l=$$ m=$
s=1 | echo 'two
lines' "and \" two
more" \
still skipped (a backslash-newline joins the lines)
n=(1 [5]=2 # comment
 3)
o=`date` p="$(date) `id`"
r=after
q='unclosed
"""
    out = parse_assignments(text, "f", {"HOME": "/home/u", "EMPTY": ""})
    v = {k: (a.value, a.line) for k, a in out.values.items()}
    assert v == {
        "a": ("1", 1),
        "c": ("x", 2),
        "d": ("y", 2),
        "e": ("later", 4),
        "g": ("dflt", 6),
        "h": ("", 6),
        "i": ("dflt", 6),
        "j": ("$1", 6),
        "k": ("${a#x}", 6),
        "l": ("$$", 6),
        "m": ("$", 6),
        "n": (("1", "2", "3"), 11),
        "o": ("`date`", 13),
        "p": ("$(date) `id`", 13),
        "r": ("after", 14),
    }
    assert out.values["e"].exported and "e" in out.exported
    assert not out.values["a"].exported and not out.values["c"].exported
    assert out.notes == [
        "f, line 5: array index 'x' of f is not a number: skipped",
        "f, line 6: $1 kept as text (not expanded)",
        "f, line 6: ${a#x} kept as text (not expanded)",
        "f, line 6: $$ kept as text (not expanded)",
        "f, line 7: not an assignment: skipped (blah.config is read, never run)",
        "f, line 13: command substitution `...` kept as text, not run",
        "f, line 13: command substitution $(date) kept as text, not run",
        "f, line 13: command substitution `...` kept as text, not run",
        "f, line 15: not an assignment: skipped (blah.config is read, never run)",
    ]


def test_declare_x_exports_as_export_does():
    """``declare -x``, ``typeset -rx`` export the name as the shell does; ``declare -r``
    and ``readonly`` do not."""
    text = "declare -x a=1\ntypeset -rx b=2\ndeclare -r c=3\nreadonly d=4\nexport e=5\n"
    out = parse_assignments(text, "f", {})
    assert {name for name, a in out.values.items() if a.exported} == {"a", "b", "e"}
