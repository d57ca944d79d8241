import pytest

from gahp_ninfg.attributes import AttributeProblem, JobRequest, parse_attributes


def test_full_request_and_first_occurrence_wins():
    req = parse_attributes(
        [
            ("queue_name", "from-user-option"),
            ("hostname", "h"),
            ("executable_path", "/opt/ng/exe"),
            ("backend", "normal"),
            ("count", "3"),
            ("staging", "false"),
            ("argument", "--client=a:1"),
            ("argument", "x y"),
            ("redirect_enable", "true"),
            ("stdout_file", "/tmp/o"),
            ("stderr_file", "/tmp/e"),
            ("environment", "A=1"),
            ("environment", "B"),
            ("status_polling", "5"),
            ("max_wall_time", "10"),
            ("queue_name", "from-client"),
            ("project", "p"),
            ("host_count", "2"),
            ("max_memory", "512"),
            ("unknown_attr", "x"),
        ],
        base_env={"B": "from-server"},
    )
    assert req.executable == "/opt/ng/exe" and req.count == 3 and req.backend == "NORMAL"
    assert req.arguments == ("--client=a:1", "x y")
    assert dict(req.environment) == {"A": "1", "B": "from-server"}
    assert req.work_directory == "/opt/ng"  # the executable's directory when not staging
    assert (req.stdout_file, req.stderr_file) == ("/tmp/o", "/tmp/e")
    assert (req.queue, req.project, req.host_count, req.max_memory_mb) == (
        "from-user-option",
        "p",
        2,
        512,
    )
    assert req.max_wall_minutes == 10 and req.status_polling == 5.0


def test_redirect_files_only_with_redirect_enable():
    req = parse_attributes([("executable_path", "/x"), ("stdout_file", "/tmp/o")])
    assert req.stdout_file is None and req.redirect is False


@pytest.mark.parametrize(
    "pairs,msg",
    [
        ([("count", "1")], "executable_path"),
        ([("executable_path", "/x"), ("count", "0")], "count"),
        ([("executable_path", "/x"), ("count", "many")], "count"),
        ([("executable_path", "/x"), ("backend", "GPU")], "backend"),
        ([("executable_path", "/x"), ("staging", "maybe")], "staging"),
        ([("executable_path", "/x"), ("environment", "1BAD=x")], "environment"),
        ([("executable_path", "/x"), ("status_polling", "soon")], "status_polling"),
        ([("executable_path", "/x"), ("max_memory", "-5")], "max_memory"),
    ],
)
def test_problems(pairs, msg):
    with pytest.raises(AttributeProblem, match=msg):
        parse_attributes(pairs)


def test_defaults_and_blank_values():
    req = parse_attributes(
        [
            ("executable_path", " exe "),
            ("backend", " "),
            ("count", ""),
            ("status_polling", " "),
            ("tmp_dir", "  "),
            ("auth_number", ""),
        ],
        base_env={},
    )
    assert req == JobRequest(executable="exe")  # no directory in the executable's path
    req = parse_attributes(
        [
            ("executable_path", "/d/exe"),
            ("backend", "mpi"),
            ("tmp_dir", " /t "),
            ("auth_number", " 7 "),
            ("status_polling", "-3"),
            ("max_time", "20"),
            ("redirect_enable", "yes"),
        ]
    )
    assert (req.backend, req.tmp_dir, req.auth_number) == ("MPI", "/t", "7")
    assert req.status_polling == 0.0
    assert (req.work_directory, req.max_wall_minutes, req.redirect) == ("/d", 20, True)
    assert (req.stdout_file, req.stderr_file, req.host_count, req.max_memory_mb) == (None,) * 4


@pytest.mark.parametrize(
    "pairs,work",
    [
        ([("staging", "true")], None),
        ([("staging", "true"), ("work_directory", " /w ")], "/w"),
        ([("work_directory", "/w")], "/w"),
        ([("work_directory", " ")], "/d"),
    ],
)
def test_work_directory(pairs, work):
    assert parse_attributes([("executable_path", "/d/exe"), *pairs]).work_directory == work


def test_max_wall_time_before_max_time():
    pairs = [("executable_path", "/x"), ("max_time", "20")]
    assert parse_attributes([*pairs, ("max_wall_time", "5")]).max_wall_minutes == 5
    assert parse_attributes([*pairs, ("max_wall_time", " ")]).max_wall_minutes == 20
    with pytest.raises(AttributeProblem, match="max_time"):
        parse_attributes([("executable_path", "/x"), ("max_time", "0")])


@pytest.mark.parametrize(
    "pairs,msg",
    [
        # the first problem in the order the attributes are read
        ([("backend", "GPU"), ("staging", "maybe")], "backend"),
        ([("staging", "maybe"), ("redirect_enable", "maybe")], "staging"),
        ([("redirect_enable", "maybe"), ("status_polling", "soon")], "redirect_enable"),
        ([("status_polling", "soon"), ("max_wall_time", "x")], "status_polling"),
        ([("max_wall_time", "x"), ("environment", "1BAD")], "max_wall_time"),
        ([("environment", "1BAD"), ("count", "0")], "environment"),
        ([("count", "0"), ("host_count", "0")], "count"),
        ([("host_count", "0"), ("max_memory", "0")], "host_count"),
    ],
)
def test_which_problem_is_reported_first(pairs, msg):
    with pytest.raises(AttributeProblem, match=msg):
        parse_attributes([("executable_path", "/x"), *pairs])
