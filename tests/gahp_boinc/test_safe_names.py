"""The checks every name from a BOINC server passes before it is used as a path."""

from __future__ import annotations

import os

import pytest

from gahp_boinc import OutputError, UnsafeOutput, check_output_name, open_inside
from gahp_boinc._safe_names import (  # private: unit test of the name checks
    check_member_path,
    inside,
)

HOSTILE_NAMES = [
    ("", "empty"),
    (".", "not a file name"),
    ("..", "not a file name"),
    ("/home/victim/.ssh/id_rsa", "slash"),
    ("../escape", "slash"),
    ("a/b", "slash"),
    ("..\\escape", "backslash"),
    ("nul\0byte", "control character"),
    ("new\nline", "control character"),
    ("tab\there", "control character"),
    ("esc\x1b[2J", "control character"),
    ("c1\x85", "control character"),
    ("x" * 256, "longer than 255 bytes"),
    ("é" * 128, "longer than 255 bytes"),  # 256 bytes in UTF-8
    ("bad\udcffsurrogate", "not valid Unicode"),
]


@pytest.mark.parametrize(("name", "why"), HOSTILE_NAMES)
def test_a_hostile_output_name_is_refused_saying_why(name, why):
    with pytest.raises(UnsafeOutput, match=why):
        check_output_name(name)


@pytest.mark.parametrize("name", ["out", "out.zip", "result file.txt", ".hidden", "x" * 255, "é"])
def test_a_plain_output_name_is_kept(name):
    assert check_output_name(name) == name


def test_unsafe_output_is_an_output_error():
    assert issubclass(UnsafeOutput, OutputError)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("/etc/passwd", "absolute"),
        ("../x", "not a file name"),
        ("a/../../x", "not a file name"),
        ("a/./b", "not a file name"),
        ("a//b", "empty"),
        ("a\\..\\b", "backslash"),
        ("a/\0", "control character"),
        ("/".join(["d" * 200] * 6), "longer than 1024 bytes"),
    ],
)
def test_a_hostile_archive_member_is_refused(name, why):
    with pytest.raises(UnsafeOutput, match=why):
        check_member_path(name)


def test_a_relative_member_path_is_kept():
    assert check_member_path("results/run 1/out.txt") == "results/run 1/out.txt"


def test_inside_follows_links(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    assert inside(tmp_path / "root" / "a", tmp_path / "root")
    assert not inside(tmp_path / "root" / "out" / "a", tmp_path / "root")
    assert not inside("/etc/passwd", tmp_path / "root")


def test_open_inside_reads_a_regular_file_and_nothing_else(tmp_path):
    root = tmp_path / "stage"
    root.mkdir()
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY\n")
    (root / "out").write_text("result\n")
    fd = open_inside(root, "out")
    assert fd is not None
    with os.fdopen(fd) as fh:
        assert fh.read() == "result\n"
    assert open_inside(root, "absent") is None
    (root / "planted").symlink_to(secret)
    with pytest.raises(UnsafeOutput, match="symbolic link"):
        open_inside(root, "planted")
    (root / "dir").symlink_to(tmp_path)
    with pytest.raises(UnsafeOutput, match="outside"):
        open_inside(root, "dir/id_rsa")
    os.mkfifo(root / "fifo")
    with pytest.raises(UnsafeOutput, match="not a regular file"):
        open_inside(root, "fifo")
