import datetime as dt

import pytest

from gahp_core import Request, Version, format_return, parse_banner, parse_reqid, parse_request
from gahp_core._protocol import format_raw  # private: white-box test of format_raw


def test_parse_request_upper_cases_only_the_command():
    assert parse_request("boinc_ping 7") == Request("BOINC_PING", ("7",))
    assert parse_request(r"BoInC_sUbMiT 1 Batch\ A") == Request("BOINC_SUBMIT", ("1", "Batch A"))
    assert parse_request("") is None


def test_return_lines():
    assert format_return("S") == "S\n"
    assert format_return("E", ["bad input"]) == "E bad\\ input\n"
    limit = format_return("F", ["Threads limit reached"], "GAHP:")
    assert limit == "GAHP:F Threads\\ limit\\ reached\n"
    assert format_raw("S 1", "P:") == "P:S 1\n"
    with pytest.raises(ValueError):
        format_return("X")


@pytest.mark.parametrize(
    "text,ok",
    [
        ("1", True),
        ("42", True),
        ("0", False),
        ("00", False),
        ("x", False),
        ("", False),
        ("-3", True),
        ("1.5", False),
        ("10", True),
        ("007", True),
        (" 12", True),
        ("1\u00b2", False),  # a superscript two: isdigit() but not ASCII
        ("9" * 5000, True),
    ],
)
def test_reqid(text, ok):
    assert (parse_reqid(text) is not None) is ok


def test_banner_round_trip():
    v = Version("1.2.3", "Python BOINC GAHP", dt.date(2026, 3, 4))
    assert v.banner() == "$GahpVersion: 1.2.3 Mar 4 2026 Python\\ BOINC\\ GAHP $"
    assert parse_banner("noise " + v.banner()) == v
    assert parse_banner("no banner") is None
