"""A GAHP that meets a startup problem still prints its banner and serves, says why once on
stderr in one line (never a traceback), and answers requests with the reason."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gahp_core.testing import GahpClient

BOINC_GAHP = [sys.executable, "-m", "gahp_boinc"]
BLAHPD = [sys.executable, "-m", "gahp_blah"]


@pytest.fixture
def blocked(tmp_path) -> Path:
    """A path no user can create: its parent is a regular file."""
    (tmp_path / "plain-file").write_text("")
    return tmp_path / "plain-file" / "sub"


def stderr_after(client: GahpClient) -> str:
    assert client.quit() == 0
    client.close()  # its stderr read to the end
    return client.stderr_text


@pytest.mark.parametrize("server", [BOINC_GAHP, BLAHPD], ids=["boinc-gahp", "blahpd"])
def test_unwritable_log_file(server, blocked, tmp_path):
    c = GahpClient(
        [*server, "--log", str(blocked / "gahp.log"), "--state-dir", str(tmp_path)]
        if server is BLAHPD
        else [*server, "--log", str(blocked / "gahp.log")]
    )
    assert c.banner.startswith("$GahpVersion:")
    assert c.command("COMMANDS")[0] == "S"
    err = stderr_after(c)
    lines = [ln for ln in err.splitlines() if "cannot open log file" in ln]
    assert len(lines) == 1 and str(blocked / "gahp.log") in lines[0], err
    assert "Traceback" not in err


def test_blahpd_serves_with_an_unwritable_state_dir(blocked, tmp_path):
    c = GahpClient([*BLAHPD, "--state-dir", str(blocked), "--log", str(tmp_path / "b.log")])
    ad = '[Cmd="/bin/true"; gridtype="fork"; Iwd="/tmp"]'
    res = c.call("BLAH_JOB_SUBMIT", ad)
    assert res[0] == "1" and str(blocked) in res[1] and res[2] == "N/A", res
    res = c.call("BLAH_PING", "fork")
    assert res[0] == "1" and str(blocked) in res[1], res
    err = stderr_after(c)
    assert err.count("state directory") == 1 and "Traceback" not in err, err


def test_blahpd_refuses_a_misspelt_driver_section_with_the_reason(tmp_path):
    conf = tmp_path / "blahpd.toml"
    conf.write_text(f'state_dir = "{tmp_path / "state"}"\n[driver.slrum]\npartition = "x"\n')
    c = GahpClient([*BLAHPD, "--config", str(conf)])
    res = c.call("BLAH_PING", "slurm")
    assert res[0] == "1" and "[driver.slrum]" in res[1], res
    res = c.call("BLAH_JOB_STATUS", "fork/20260101/1")
    assert len(res) == 4 and res[0] == "1" and "[driver.slrum]" in res[1], res
    err = stderr_after(c)
    assert err.count("cannot serve") == 1 and "Traceback" not in err, err


def test_boinc_gahp_with_a_bad_config_answers_the_reason(tmp_path):
    c = GahpClient([*BOINC_GAHP, "--config", str(tmp_path / "missing.toml")])
    reply = c.command("BOINC_SELECT_PROJECT", "http://127.0.0.1:1/p/", "auth")
    assert reply[0] == "E" and "missing.toml" in reply[1], reply
    res = c.call("BOINC_PING")
    assert len(res) == 1 and "missing.toml" in res[0], res
    assert "Traceback" not in stderr_after(c)
