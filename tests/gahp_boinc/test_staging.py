import hashlib

import pytest

from gahp_boinc import StagingError, md5_file, physical_name
from gahp_boinc._staging import Md5Cache, check_input, command_line  # private: unit test of staging


def test_physical_names():
    d = "0cc175b9c0f1b6a831c399e269772661"
    assert physical_name(d, "/tmp/in/a.txt") == d + ".txt"
    assert physical_name(d, "/tmp/in.d/noext") == d
    assert physical_name(d, "/tmp/x.tar.gz") == d + ".gz"
    assert physical_name(d, "/tmp/.hidden") == d
    assert physical_name(d, "/tmp/bad.ex$t") == d


def test_md5_and_cache(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"a")
    assert md5_file(f) == hashlib.md5(b"a").hexdigest()
    cache = Md5Cache()
    assert cache.digest_many([f, f]) == [hashlib.md5(b"a").hexdigest()] * 2
    assert cache.bytes_hashed == 1
    f.write_bytes(b"bb")  # changed content, size and mtime: hashed again
    assert cache.digest(f) == hashlib.md5(b"bb").hexdigest()


def test_command_line_quoting():
    assert command_line(["--upper", "-n", "3"]) == "--upper -n 3"
    assert command_line(["a b", "", "x=1,y"]) == "'a b' '' x=1,y"
    for bad in ["it's here", 'say "hi"', "$HOME", "`id`", "a\\b", "two\nlines"]:
        with pytest.raises(StagingError):
            command_line([bad])


def test_check_input(tmp_path):
    with pytest.raises(StagingError, match="No such file"):
        check_input(tmp_path / "missing")
    with pytest.raises(StagingError, match="not a regular file"):
        check_input(tmp_path)


def test_configuration_errors_are_one_clear_line_and_the_gahp_serves(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "gahp.toml"
    bad.write_text('project_url = "http://x/"\nprojekt = 1\n')
    r = subprocess.run(
        [sys.executable, "-m", "gahp_boinc", "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0 and r.stdout.startswith("$GahpVersion:")
    assert r.stderr.count("unknown keys ['projekt']") == 1 and "Traceback" not in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gahp_boinc",
            "--project-url",
            "http://x/",
            "--authenticator-file",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert r.stderr.count("cannot read authenticator file") == 1 and "Traceback" not in r.stderr
