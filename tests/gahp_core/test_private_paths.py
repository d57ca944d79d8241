"""The private path helpers: what another user could control is refused, naming it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gahp_core import (
    GahpError,
    UnsafePath,
    check_parent,
    open_private,
    private_dir,
    write_private,
)

OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def test_a_new_directory_is_private_and_so_are_missing_parents(tmp_path: Path) -> None:
    d = private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700


def test_an_existing_private_directory_is_reused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir(mode=0o755)
    (tmp_path / "d" / "kept").write_text("x")
    assert private_dir(tmp_path / "d") == tmp_path / "d"
    assert (tmp_path / "d" / "kept").read_text() == "x"


def test_a_link_to_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePath, match=r"link.*symbolic link"):
        private_dir(tmp_path / "link")


@pytest.mark.parametrize("mode", [0o770, 0o702, 0o1777])
def test_a_directory_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    d = tmp_path / "d"
    d.mkdir()
    d.chmod(mode)
    with pytest.raises(UnsafePath, match="other users may write") as err:
        private_dir(d)
    assert str(d) in str(err.value) and stat.filemode(d.stat().st_mode) in str(err.value)


def test_a_file_where_a_directory_is_expected_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(UnsafePath, match="not a directory"):
        private_dir(tmp_path / "f")


@as_root
def test_a_directory_of_another_user_is_refused_naming_the_owner(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    os.chown(d, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePath, match=rf"belongs to another user.*uid {OTHER_UID}"):
        private_dir(d)


def test_unsafe_path_is_both_a_gahp_error_and_an_os_error() -> None:
    assert issubclass(UnsafePath, GahpError) and issubclass(UnsafePath, PermissionError)


def test_open_private_does_not_follow_a_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("secret")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UnsafePath, match="symbolic link"):
        open_private(tmp_path / "link", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with pytest.raises(UnsafePath):
        open_private(tmp_path / "link")
    assert target.read_text() == "secret"


def test_open_private_exclusive_refuses_a_file_already_there(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("planted")
    with pytest.raises(FileExistsError):
        open_private(tmp_path / "f", os.O_WRONLY, exclusive=True)
    fd = open_private(tmp_path / "new", os.O_WRONLY, exclusive=True)
    os.close(fd)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o600


def test_open_private_refuses_a_file_others_may_write(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    f.chmod(0o666)
    with pytest.raises(UnsafePath, match="other users may write"):
        open_private(f, os.O_WRONLY | os.O_APPEND)


def test_open_private_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo", 0o600)
    with pytest.raises(UnsafePath, match="not a regular file"):
        open_private(tmp_path / "fifo", os.O_RDONLY)


@as_root
def test_open_private_refuses_a_file_of_another_user(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    os.chown(f, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePath, match="belongs to another user"):
        open_private(f, os.O_WRONLY | os.O_APPEND)


def test_write_private_replaces_through_a_new_0600_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("old")
    f.chmod(0o644)
    keep = f.open()  # a reader of the old file keeps the old contents
    write_private(f, b"new")
    assert f.read_text() == "new" and keep.read() == "old"
    keep.close()
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_write_private_replaces_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("theirs")
    (tmp_path / "f").symlink_to(target)
    write_private(tmp_path / "f", b"mine")
    assert target.read_text() == "theirs"
    assert not (tmp_path / "f").is_symlink() and (tmp_path / "f").read_text() == "mine"


def test_check_parent_accepts_a_sticky_shared_directory_and_refuses_an_open_one(
    tmp_path: Path,
) -> None:
    check_parent(tmp_path)
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    check_parent(d)
    d.chmod(0o777)
    with pytest.raises(UnsafePath, match="other users may write"):
        check_parent(d)


@as_root
def test_check_parent_refuses_a_link_or_directory_of_another_user(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePath, match="belongs to another user"):
        check_parent(theirs)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(mine)
    os.lchown(link, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePath, match="belongs to another user"):
        check_parent(link)
