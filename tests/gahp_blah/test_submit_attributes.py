"""Every attribute of the gridmanager's submit ad (INFNBatchJob::buildSubmitAd) is read into
the job or refused with a reason; an attribute blahpd does not know is logged once, with the
job id."""

from __future__ import annotations

import os
import subprocess

import pytest
from blah_helpers import Blah, ad_string

from gahp_blah.submit_ad import KNOWN_ATTRIBUTES, SubmitError, parse_submit_ad

BASE = '[ Cmd = "/bin/true"; gridtype = "slurm"; '


def ad(extra: str):  # type: ignore[no-untyped-def]
    return parse_submit_ad(BASE + extra + " ]")


def test_gpus_mics_and_whole_nodes_reach_the_job():
    s = ad(
        'GPUNumber = 2; GPUModel = "ci"; GPUMode = "exclusive_process"; MICNumber = 1;'
        " WholeNodes = true; HostNumber = 3"
    ).spec
    assert (s.gpus, s.gpu_model, s.gpu_mode, s.mics) == (2, "ci", "exclusive_process", 1)
    assert s.whole_nodes and s.nodes == 3


def test_zero_gpus_and_hosts_are_none_and_whole_nodes_defaults_to_false():
    s = ad("GPUNumber = 0; MICNumber = 0; HostNumber = 0; WholeNodes = false").spec
    assert (s.gpus, s.mics, s.nodes, s.whole_nodes) == (None, None, None, False)
    assert ad("").spec.whole_nodes is False


@pytest.mark.parametrize(
    "attrs,nodes,cpus",
    [
        ("NodeNumber = 8; HostNumber = 2", 2, 4),  # the CPUs shared out over the hosts
        ("NodeNumber = 7; HostNumber = 2", 2, 4),
        ("HostNumber = 2", 2, None),
        ("NodeNumber = 8; SMPGranularity = 4; HostNumber = 2", 2, 4),
        ("HostNumber = 2; HostSMPSize = 16", 2, 16),
    ],
)
def test_host_number_is_the_node_count(attrs, nodes, cpus):
    s = ad(attrs).spec
    assert (s.nodes, s.cpus_per_node) == (nodes, cpus)


@pytest.mark.parametrize(
    "text,words",
    [
        ("--qos=high", ("--qos=high",)),
        ("--qos=high  -A acct", ("--qos=high", "-A", "acct")),
        ('--comment=\\"two words\\" -C haswell', ("--comment=two words", "-C", "haswell")),
        ("#SBATCH --qos=high", ("--qos=high",)),  # the prefix, as the C blahp takes it
        ("   ", ()),
    ],
)
def test_extra_submit_args_are_split_as_a_shell_would(text, words):
    assert ad(f'BatchExtraSubmitArgs = "{text}"').spec.extra_args == words


@pytest.mark.parametrize(
    "text,match",
    [
        ("--qos=high\\n#SBATCH --uid=0", "line break"),
        ("--qos=high\\r-A x", "line break"),
        ('--comment=\\"open', "cannot be split"),
        ("$(reboot)", "start with an option"),
        ("--comment=a#b", "'#'"),
        ("LONG", "over 4096"),
    ],
)
def test_hostile_extra_submit_args_are_refused(text, match):
    text = "-x " * 2000 if text == "LONG" else text
    with pytest.raises(SubmitError, match=match):
        ad(f'BatchExtraSubmitArgs = "{text}"')


def test_a_nul_in_extra_submit_args_is_refused():
    # a ClassAd string cannot hold a NUL: checked on the text, beyond what classad2 passes
    from gahp_blah.submit_ad import extra_submit_args

    with pytest.raises(SubmitError, match="NUL"):
        extra_submit_args("--qos=a\0b")


def test_transfer_output_remaps_are_refused_with_a_reason():
    with pytest.raises(SubmitError, match="TransferOutputRemaps is not supported"):
        ad('TransferOutput = "o"; TransferOutputRemaps = "o=/elsewhere/o"')
    assert ad('TransferOutputRemaps = ""').spec.executable == "/bin/true"


@pytest.mark.parametrize(
    "attr,value,match",
    [
        ("WholeNodes", '"yes"', "boolean"),
        ("GPUNumber", '"two"', "number"),
        ("GPUModel", "3", "string"),
        ("GPUModel", '"a b"', "plain name"),
    ],
)
def test_bad_values_are_refused(attr, value, match):
    with pytest.raises(SubmitError, match=match):
        ad(f"{attr} = {value}")


BUILD_SUBMIT_AD = [
    "Arguments",
    "Args",
    "Env",
    "EnvDelim",
    "Environment",
    "In",
    "Out",
    "Err",
    "TransferInput",
    "TransferOutput",
    "TransferOutputRemaps",
    "Iwd",
    "GridResource",
    "RequestMemory",
    "NodeNumber",
    "HostNumber",
    "SMPGranularity",
    "WholeNodes",
    "HostSMPSize",
    "BatchExtraSubmitArgs",
    "StageCmd",
    "BatchProject",
    "BatchRuntime",
    "GPUNumber",
    "GPUMode",
    "GPUModel",
    "MICNumber",
    "CERequirements",
    "Queue",
    "Cmd",
    "x509UserProxy",
    "JobDirectory",
    "gridtype",
]


def test_every_attribute_of_the_gridmanager_is_known():
    assert {a.lower() for a in BUILD_SUBMIT_AD} <= KNOWN_ATTRIBUTES


def test_unknown_attributes_are_listed():
    got = ad('Foo = 1; GPUNumber = 1; bar = "x"; JobDirectory = "d"')
    assert got.unknown == ("Foo", "bar")


def test_unknown_attributes_are_logged_once_with_the_job_id(tmp_path):
    log = tmp_path / "blahpd.log"
    env = {**os.environ, "BLAHPD_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    with Blah("--state-dir", tmp_path / "state", "--log", log, env=env) as b:
        jid = b.submit_ok(Cmd="/bin/true", gridtype="fork", Iwd=str(tmp_path), SiteColour="blue")
        for _ in range(3):
            b.status_fields(jid)
    lines = [line for line in log.read_text().splitlines() if "SiteColour" in line]
    assert len(lines) == 1, lines
    assert jid in lines[0] and " INFO " in lines[0]


def test_requests_a_driver_cannot_give_fail_at_submit_with_the_reason(tmp_path):
    env = {**os.environ, "BLAHPD_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    with Blah("--state-dir", tmp_path / "state", env=env) as b:
        res = b.submit(Cmd="/bin/true", gridtype="fork", GPUNumber=2)
        assert res[0] != "0" and "GPUs" in res[1], res
        raw = '[ Cmd = "/bin/true"; gridtype = "fork"; BatchExtraSubmitArgs = "--x\\n-y" ]'
        res = b.c.call("BLAH_JOB_SUBMIT", raw, timeout=60)
        assert res[0] != "0" and "line break" in res[1], res


# ---------------------------------------------------------------------- real batch systems
def _live_blah(tmp_path, env, config: str = "") -> Blah:  # type: ignore[no-untyped-def]
    conf = tmp_path / "blahpd.toml"
    conf.write_text(config)
    return Blah(
        "--state-dir", tmp_path / "state", env={**os.environ, **env, "BLAHPD_CONFIG": str(conf)}
    )


def test_gridmanager_attributes_reach_slurm(batch_env, tmp_path):
    """What `request_gpus = 2`, a whole-node CE route and `batch_extra_submit_args` send,
    as Slurm sees the job."""
    env = batch_env("slurm")
    out = tmp_path / "cvd"
    with _live_blah(tmp_path, env) as b:
        res = b.c.call(
            "BLAH_JOB_SUBMIT",
            ad_string(
                Cmd="/bin/sh",
                Arguments=f"-c 'echo $CUDA_VISIBLE_DEVICES > {out}'",
                Iwd=str(tmp_path),
                gridtype="slurm",
                GPUNumber=2,
                WholeNodes=True,
                HostNumber=1,
                BatchExtraSubmitArgs='--comment="from the CE" --nice=3',
            ),
            timeout=60,
        )
        assert res[0] == "0", res
        native = res[2].split("/")[-1]
        show = subprocess.run(
            ["scontrol", "show", "job", native],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        assert "gres:gpu:2" in show and "OverSubscribe=NO" in show, show
        assert "Comment=from the CE" in show and "Nice=3" in show, show
        b.wait(res[2], 4, timeout=120)
    assert out.read_text().strip() == "0,1"


def test_gridmanager_attributes_reach_openpbs(batch_env, tmp_path):
    env = batch_env("pbs")
    config = f'[driver.pbs]\nbin_dir = "{env["GAHP_PBS_BIN_DIR"]}"\n'
    with _live_blah(tmp_path, env, config) as b:
        jid = b.submit_ok(
            Cmd="/bin/true",
            Iwd=str(tmp_path),
            gridtype="pbs",
            GPUNumber=2,
            WholeNodes=True,
            BatchExtraSubmitArgs="-A ce_account",
        )
        native = jid.split("/")[-1]
        qstat = subprocess.run(
            [f"{env['GAHP_PBS_BIN_DIR']}/qstat", "-x", "-f", native],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        assert "Resource_List.ngpus = 2" in qstat and "Resource_List.place = excl" in qstat
        assert "Account_Name = ce_account" in qstat, qstat
        res = b.submit(
            Cmd="/bin/true", Iwd=str(tmp_path), gridtype="pbs", GPUNumber=1, GPUModel="a100"
        )
        assert res[0] != "0" and "GPUModel" in res[1], res
        b.wait(jid, 4, timeout=180)
