import pytest

from gahp_ninfg.attributes import AttributeProblem, parse_attributes


def test_full_request_and_first_occurrence_wins():
    req = parse_attributes([
        ("queue_name", "from-user-option"),
        ("hostname", "h"), ("executable_path", "/opt/ng/exe"), ("backend", "normal"),
        ("count", "3"), ("staging", "false"), ("argument", "--client=a:1"),
        ("argument", "x y"), ("redirect_enable", "true"), ("stdout_file", "/tmp/o"),
        ("stderr_file", "/tmp/e"), ("environment", "A=1"), ("environment", "B"),
        ("status_polling", "5"), ("max_wall_time", "10"), ("queue_name", "from-client"),
        ("project", "p"), ("host_count", "2"), ("max_memory", "512"), ("unknown_attr", "x"),
    ], base_env={"B": "from-server"})
    assert req.executable == "/opt/ng/exe" and req.count == 3 and req.backend == "NORMAL"
    assert req.arguments == ("--client=a:1", "x y")
    assert dict(req.environment) == {"A": "1", "B": "from-server"}
    assert req.work_directory == "/opt/ng"  # the executable's directory when not staging
    assert (req.stdout_file, req.stderr_file) == ("/tmp/o", "/tmp/e")
    assert (req.queue, req.project, req.host_count, req.max_memory_mb) == (
        "from-user-option", "p", 2, 512)
    assert req.max_wall_minutes == 10 and req.status_polling == 5.0


def test_redirect_files_only_with_redirect_enable():
    req = parse_attributes([("executable_path", "/x"), ("stdout_file", "/tmp/o")])
    assert req.stdout_file is None and req.redirect is False


@pytest.mark.parametrize("pairs,msg", [
    ([("count", "1")], "executable_path"),
    ([("executable_path", "/x"), ("count", "0")], "count"),
    ([("executable_path", "/x"), ("count", "many")], "count"),
    ([("executable_path", "/x"), ("backend", "GPU")], "backend"),
    ([("executable_path", "/x"), ("staging", "maybe")], "staging"),
    ([("executable_path", "/x"), ("environment", "1BAD=x")], "environment"),
    ([("executable_path", "/x"), ("status_polling", "soon")], "status_polling"),
    ([("executable_path", "/x"), ("max_memory", "-5")], "max_memory"),
])
def test_problems(pairs, msg):
    with pytest.raises(AttributeProblem, match=msg):
        parse_attributes(pairs)
