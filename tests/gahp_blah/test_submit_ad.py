import pytest

from gahp_blah.jobids import BadJobId, make_job_id, parse_job_id
from gahp_blah.status_ad import status_ad
from gahp_blah.submit_ad import SubmitError, parse_submit_ad
from gahp_lrms import JobInfo, JobStatus


def test_full_submit_ad(tmp_path):
    (tmp_path / "in.dat").write_text("x")
    ad = parse_submit_ad(
        '[ Cmd = "/bin/prog"; Arguments = "a \'b c\'"; Environment = "X=1 \'Y=2 3\'"; '
        f'In = "/dev/null"; Out = "out"; Err = "err"; Iwd = "{tmp_path}"; Queue = "debug"; '
        "RequestMemory = 512.5; NodeNumber = 4; SMPGranularity = 2; BatchRuntime = 3600; "
        'BatchProject = "proj"; TransferInput = "in.dat"; TransferOutput = "o1, o2"; '
        'x509UserProxy = "/tmp/p"; GridType = "SLURM" ]'
    )
    s = ad.spec
    assert ad.gridtype == "slurm" and ad.proxy == "/tmp/p"
    assert s.executable == "/bin/prog" and s.arguments == ("a", "b c")
    assert dict(s.environment) == {"X": "1", "Y": "2 3"}
    assert (s.stdin, s.stdout, s.stderr, s.workdir) == ("/dev/null", "out", "err", str(tmp_path))
    assert (s.queue, s.project, s.memory_mb, s.runtime_s) == ("debug", "proj", 513, 3600)
    assert (s.nodes, s.cpus_per_node) == (2, 2)
    assert ad.transfer_output == ("o1", "o2")


def test_v1_args_and_env_and_default_gridtype():
    ad = parse_submit_ad('[ Cmd = "/bin/true"; Args = "x y"; Env = "A=1;B=2" ]', "fork")
    assert ad.gridtype == "fork" and ad.spec.arguments == ("x", "y")
    assert dict(ad.spec.environment) == {"A": "1", "B": "2"}
    # the ad's own gridtype wins (lower-cased); an empty one is not one
    assert parse_submit_ad('[ Cmd = "/bin/true"; gridtype = "SLURM" ]', "fork").gridtype == "slurm"
    assert parse_submit_ad('[ Cmd = "/bin/true"; gridtype = "" ]', "fork").gridtype == "fork"


@pytest.mark.parametrize(
    "text,msg",
    [
        ("[ Cmd = ", "cannot parse"),
        ('[ Args = "x"; gridtype = "fork" ]', "Cmd"),
        ('[ Cmd = "/bin/true" ]', "gridtype"),
        ('[ Cmd = 3; gridtype = "fork" ]', "must be a string"),
        ('[ Cmd = "/x"; gridtype = "fork"; RequestMemory = "lots" ]', "must be a number"),
        ('[ Cmd = "/x"; gridtype = "fork"; RequestMemory = -1 ]', "positive"),
        ('[ Cmd = "/x"; gridtype = "fork"; Arguments = "\'open" ]', "quote"),
        ('[ Cmd = "/x"; gridtype = "fork"; Iwd = "rel" ]', "absolute"),
        ('[ Cmd = "/x"; gridtype = "fork"; Queue = 1 + "a" ]', "ERROR"),
        ('[ Cmd = "/x"; gridtype = "fork"; TransferInput = "/nonexistent/f" ]', "does not exist"),
        ('[ Cmd = "/x"; gridtype = "fork"; x509UserProxy = "p" ]', "relative and Iwd"),
        ('[ Cmd = "/x"; gridtype = "fork"; TransferInput = "rel/f" ]', "rel/f .* not exist"),
        ('[ Cmd = "/x"; gridtype = "fork"; Env = "A" ]', "'A' is not NAME=value"),
        # the first problem in the order the attributes are read
        ('[ Iwd = "rel"; gridtype = "fork" ]', "Cmd"),
        ('[ Cmd = "/x"; gridtype = "fork"; Iwd = "rel"; Arguments = "\'" ]', "absolute"),
        ('[ Cmd = "/x"; gridtype = "fork"; Arguments = "\'"; NodeNumber = -1 ]', "quote"),
        ('[ Cmd = "/x"; gridtype = "fork"; NodeNumber = -1; Queue = 1 ]', "NodeNumber"),
        ('[ Cmd = "/x"; gridtype = "fork"; TransferInput = "/no/f"; Queue = 1 ]', "not exist"),
    ],
)
def test_bad_submit_ads(text, msg):
    with pytest.raises(SubmitError, match=msg):
        parse_submit_ad(text)


def test_job_ids():
    jid = make_job_id("slurm", "12345")
    assert parse_job_id(str(jid)) == jid and str(jid).startswith("slurm/")
    # the C blahp's ids: the same form, but Grid Engine's date is a timestamp
    for theirs in [
        "slurm/20261124/2529",
        "pbs/20261124/3001",
        "lsf/20261124/3",
        "sge/20261124171737/2",
    ]:
        assert str(parse_job_id(theirs)) == theirs
    assert parse_job_id("sge/20261124171737/2").native == "2"
    for bad in [
        "",
        "slurm/1/2",
        "slurm//1",
        "Slurm/20240101/1",
        "fork/20240101/a b",
        "x",
        "sge/2026112417173/2",
        "sge/202611241717370/2",
    ]:
        with pytest.raises(BadJobId):
            parse_job_id(bad)


def test_status_ad():
    info = JobInfo(
        JobStatus.COMPLETED,
        exit_code=3,
        wallclock_s=2.0,
        user_cpu_s=0.25,
        worker_node="node1",
        exit_reason='said "bye"',
    )
    ad = status_ad("42", info)
    assert ad == (
        '[ BatchJobId = "42"; JobStatus = 4; ExitBySignal = false; ExitCode = 3; '
        'ExitReason = "said \\"bye\\""; RemoteWallClockTime = 2; '
        'RemoteUserCpu = 0.250; WorkerNode = "node1"; ]'
    )
    import classad2

    parsed = classad2.ClassAd(ad)
    assert parsed["ExitCode"] == 3 and parsed["ExitReason"] == 'said "bye"'
    held = status_ad("7", JobInfo(JobStatus.HELD, hold_reason="held by user"))
    assert classad2.ClassAd(held)["HoldReason"] == "held by user"
    sig = classad2.ClassAd(status_ad("8", JobInfo(JobStatus.COMPLETED, exit_signal=9)))
    assert sig["ExitBySignal"] is True and sig["ExitSignal"] == 9


@pytest.mark.parametrize(
    "attrs,node_number,nodes,cpus",
    [
        ("", None, None, None),
        ("NodeNumber = 3;", 3, None, 3),
        ("NodeNumber = 5; SMPGranularity = 2;", 5, 3, 2),
        ("SMPGranularity = 2;", None, None, None),
        ("NodeNumber = 5; SMPGranularity = 2; HostSMPSize = 8;", 5, 3, 8),
        ("HostSMPSize = 8;", None, None, 8),
    ],
)
def test_nodes_and_cpus_per_node(attrs, node_number, nodes, cpus):
    ad = parse_submit_ad(f'[ Cmd = "/x"; gridtype = "pbs"; {attrs} ]')
    assert (ad.node_number, ad.spec.nodes, ad.spec.cpus_per_node) == (node_number, nodes, cpus)


def test_relative_proxy_and_inputs_are_in_iwd_and_expressions_kept(tmp_path):
    (tmp_path / "proxy").write_text("x")
    (tmp_path / "in.dat").write_text("x")
    ad = parse_submit_ad(
        f'[ Cmd = "/x"; gridtype = "boinc"; Iwd = "{tmp_path}"; x509UserProxy = "proxy"; '
        'TransferInput = "in.dat, ,"; CERequirements = "Queue"; Queue = strcat("q", "1"); '
        'BoincProjectUrl = "http://p/"; BoincAuthenticatorFile = ""; Environment = "A=1" ]',
        expressions=["CERequirements", "Queue", "Absent"],
    )
    assert ad.proxy == str(tmp_path / "proxy") and ad.transfer_input == ("in.dat",)
    assert dict(ad.spec.environment) == {"A": "1", "X509_USER_PROXY": str(tmp_path / "proxy")}
    assert ad.expressions == (("CERequirements", '"Queue"'), ("Queue", 'strcat("q","1")'))
    assert ad.spec.queue == "q1" and dict(ad.spec.options) == {"project_url": "http://p/"}
    absent = parse_submit_ad('[ Cmd = "/x"; gridtype = "pbs"; x509UserProxy = "/no/such" ]')
    assert absent.proxy == "/no/such" and "X509_USER_PROXY" not in absent.spec.environment


def test_v2_attributes_win_over_v1():
    ad = parse_submit_ad(
        '[ Cmd = "/x"; gridtype = "fork"; Args = "v1"; Arguments = "v2 \'a b\'"; '
        'Env = "A=v1"; Environment = "A=v2" ]'
    )
    assert ad.spec.arguments == ("v2", "a b") and dict(ad.spec.environment) == {"A": "v2"}
    empty = parse_submit_ad('[ Cmd = "/x"; gridtype = "fork"; Args = "v1"; Arguments = "" ]')
    assert empty.spec.arguments == ()
