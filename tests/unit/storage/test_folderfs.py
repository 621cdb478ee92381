"""The folder tree through directory descriptors, on real directories: symlinks planted by a
session are never followed, special files never opened."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.folder_paths import UnsafePath, parse_path
from services.storage import folderfs
from services.storage.folderfs import FolderFsError


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the folder, with a secret no path may reach."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text("secret")
    return place


@pytest.fixture
def folder(tmp_path: Path, outside: Path) -> Path:
    """A folder a session has been in: files, and symlinks pointing out and in."""
    root = tmp_path / "folder"
    (root / "data").mkdir(parents=True)
    (root / "data" / "x.txt").write_text("x")
    (root / "out").symlink_to(outside)
    (root / "secret").symlink_to(outside / "secret.txt")
    (root / "inner").symlink_to("data")  # even one pointing inside
    (root / "inner-file").symlink_to("data/x.txt")
    return root


@pytest.fixture
def root_fd(folder: Path) -> Iterator[int]:
    with folderfs.open_root(folder) as fd:
        yield fd


def refusal(code: str, call: object, *args: object, **kwargs: object) -> FolderFsError:
    with pytest.raises(FolderFsError) as error:
        call(*args, **kwargs)  # type: ignore[operator]
    assert error.value.code == code
    return error.value


def test_a_regular_file_opens_for_reading(root_fd: int) -> None:
    fd, info = folderfs.open_for_reading(root_fd, parse_path("data/x.txt"))
    try:
        assert os.read(fd, 10) == b"x"
        assert info.st_size == 1
    finally:
        os.close(fd)


@pytest.mark.parametrize("path", ["secret", "out/secret.txt", "inner/x.txt", "inner-file"])
def test_a_symlink_anywhere_in_the_path_is_refused(root_fd: int, path: str) -> None:
    error = refusal("symlink_refused", folderfs.open_for_reading, root_fd, parse_path(path))
    assert error.status == 403


@pytest.mark.parametrize("path", ["out", "inner", "out/x"])
def test_directories_through_symlinks_are_refused(root_fd: int, path: str) -> None:
    with pytest.raises(FolderFsError) as error, folderfs.open_dir(root_fd, parse_path(path)):
        pass
    assert error.value.code == "symlink_refused"


def test_a_fifo_is_refused_without_blocking(folder: Path, root_fd: int) -> None:
    os.mkfifo(folder / "pipe")
    refusal("not_a_file", folderfs.open_for_reading, root_fd, parse_path("pipe"))


def test_missing_entries_and_directories_are_told_apart(root_fd: int) -> None:
    assert (
        refusal("not_found", folderfs.open_for_reading, root_fd, parse_path("nope")).status == 404
    )
    refusal("is_a_directory", folderfs.open_for_reading, root_fd, parse_path("data"))
    refusal("not_a_directory", folderfs.open_for_reading, root_fd, parse_path("data/x.txt/y"))


def test_the_root_must_not_be_a_symlink(tmp_path: Path, folder: Path) -> None:
    (tmp_path / "link").symlink_to(folder)
    with (
        pytest.raises(OSError, match=r"symbolic links|Not a directory"),
        folderfs.open_root(tmp_path / "link"),
    ):
        pass


def test_mkdir_makes_parents_on_request_and_never_through_a_symlink(
    folder: Path, outside: Path, root_fd: int
) -> None:
    refusal("not_found", folderfs.make_dir, root_fd, parse_path("a/b"), parents=False)
    folderfs.make_dir(root_fd, parse_path("a/b"), parents=True)
    folderfs.make_dir(root_fd, parse_path("a/b"), parents=True)  # already there: fine
    assert (folder / "a" / "b").is_dir()
    refusal("exists", folderfs.make_dir, root_fd, parse_path("a/b"), parents=False)
    refusal("symlink_refused", folderfs.make_dir, root_fd, parse_path("out/new"), parents=True)
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    with pytest.raises(UnsafePath, match="NFC"):
        folderfs.make_dir(root_fd, parse_path("cafe\u0301"), parents=False)


def test_move_renames_without_replacing_and_never_through_a_symlink(
    folder: Path, outside: Path, root_fd: int
) -> None:
    folderfs.move(root_fd, parse_path("data/x.txt"), parse_path("y.txt"))
    assert (folder / "y.txt").read_text() == "x"
    (folder / "z.txt").write_text("z")
    refusal("exists", folderfs.move, root_fd, parse_path("y.txt"), parse_path("z.txt"))
    refusal("symlink_refused", folderfs.move, root_fd, parse_path("y.txt"), parse_path("out/y"))
    refusal(
        "symlink_refused", folderfs.move, root_fd, parse_path("out/secret.txt"), parse_path("s")
    )
    refusal("into_itself", folderfs.move, root_fd, parse_path("data"), parse_path("data/sub"))
    refusal("not_found", folderfs.move, root_fd, parse_path("nope"), parse_path("n"))
    # The link itself may be moved: it is renamed, never followed.
    folderfs.move(root_fd, parse_path("secret"), parse_path("moved-link"))
    assert (folder / "moved-link").is_symlink()
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def _temp(area: Path, content: bytes) -> str:
    (area / "t.part").write_bytes(content)
    return "t.part"


def test_place_file_renames_into_place_making_parents(
    tmp_path: Path, folder: Path, root_fd: int
) -> None:
    area = tmp_path / "area"
    area.mkdir()
    area_fd = os.open(area, os.O_RDONLY | os.O_DIRECTORY)
    try:
        old = folderfs.place_file(area_fd, _temp(area, b"new"), root_fd, parse_path("n/e/w.bin"))
        assert old is None
        assert (folder / "n/e/w.bin").read_bytes() == b"new"
        replaced = folderfs.place_file(area_fd, _temp(area, b"2"), root_fd, parse_path("n/e/w.bin"))
        assert replaced is not None and replaced.st_size == 3
        assert (folder / "n/e/w.bin").read_bytes() == b"2"
        for target, code in [
            ("out/w.bin", "symlink_refused"),
            ("secret", "symlink_refused"),
            ("data", "exists"),
        ]:
            _temp(area, b"evil")
            refusal(code, folderfs.place_file, area_fd, "t.part", root_fd, parse_path(target))
        assert (tmp_path / "outside" / "secret.txt").read_text() == "secret"
    finally:
        os.close(area_fd)


def test_check_creatable_refuses_early_what_placing_would_refuse(root_fd: int) -> None:
    folderfs.check_creatable(root_fd, parse_path("new/dir/file"))
    folderfs.check_creatable(root_fd, parse_path("data/x.txt"))  # replaced at the end
    refusal("symlink_refused", folderfs.check_creatable, root_fd, parse_path("out/file"))
    refusal("symlink_refused", folderfs.check_creatable, root_fd, parse_path("inner-file"))
    refusal("exists", folderfs.check_creatable, root_fd, parse_path("data"))
    refusal("not_a_directory", folderfs.check_creatable, root_fd, parse_path("data/x.txt/f"))
    with pytest.raises(UnsafePath, match="NFC"):
        folderfs.check_creatable(root_fd, parse_path("cafe\u0301/f"))
