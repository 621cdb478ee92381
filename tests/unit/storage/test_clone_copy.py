"""The copy a clone makes, on real directories: files, directories and their modes, symlinks
copied as links (never followed), FIFOs left out, a stop honoured, a second copy from
scratch over an interrupted one."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from services.storage.control import disk
from services.storage.foldertree import Usage
from services.storage.volumes import LocalVolume


@pytest.fixture
def volume(tmp_path: Path) -> LocalVolume:
    return LocalVolume("local", tmp_path / "volume", "host")


def test_a_tree_is_copied_without_following_links(volume: LocalVolume, tmp_path: Path) -> None:
    source = volume.create_folder("src")
    (source / "d" / "e").mkdir(parents=True)
    (source / "d" / "e" / "f.bin").write_bytes(b"f" * 3000)
    os.chmod(source / "d" / "e" / "f.bin", 0o640)
    (source / "secret-link").symlink_to(tmp_path / "outside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("secret")
    (source / "dir-link").symlink_to("d")
    os.mkfifo(source / "pipe")

    copied = disk.clone(volume, "src", volume, "dst", threading.Event())

    target = volume.folder_root("dst")
    assert copied == Usage(3000, 1, links=2)  # the FIFO is left out
    assert (target / "d" / "e" / "f.bin").read_bytes() == b"f" * 3000
    assert (target / "d" / "e" / "f.bin").stat().st_mode & 0o777 == 0o640
    assert (target / "secret-link").is_symlink() and not (target / "secret").exists()
    assert os.readlink(target / "dir-link") == "d"
    assert not (target / "pipe").exists()
    assert volume.usage("dst") == copied


def test_a_copy_starts_again_from_scratch(volume: LocalVolume) -> None:
    (volume.create_folder("src") / "a.txt").write_text("a")
    left = volume.create_folder("dst")
    (left / "half-copied.bin").write_bytes(b"x" * 10)
    assert disk.clone(volume, "src", volume, "dst", threading.Event()) == Usage(1, 1)
    assert sorted(p.name for p in volume.folder_root("dst").iterdir()) == ["a.txt"]


def test_a_stop_interrupts_the_copy(volume: LocalVolume) -> None:
    (volume.create_folder("src") / "a.txt").write_text("a")
    stop = threading.Event()
    stop.set()
    with pytest.raises(disk.CopyStopped):
        disk.clone(volume, "src", volume, "dst", stop)


def test_sibling_and_nested_directories_land_in_their_own_places(volume: LocalVolume) -> None:
    source = volume.create_folder("tree")
    for path in ("a/b/c/one", "a/b/two", "a/three", "x/y/four", "five"):
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(path)
    (source / "empty" / "deeper").mkdir(parents=True)

    disk.clone(volume, "tree", volume, "copy", threading.Event())

    target = volume.folder_root("copy")
    for path in ("a/b/c/one", "a/b/two", "a/three", "x/y/four", "five"):
        assert (target / path).read_text() == path
    assert (target / "empty" / "deeper").is_dir()
    assert sorted(p.name for p in target.iterdir()) == ["a", "empty", "five", "x"]


def test_each_name_of_a_hard_linked_file_is_copied_as_a_file_of_its_own(
    volume: LocalVolume,
) -> None:
    source = volume.create_folder("src")
    (source / "a.bin").write_bytes(b"a" * 100)
    os.link(source / "a.bin", source / "b.bin")
    assert volume.usage("src") == Usage(100, 2)  # one file, two names

    copied = disk.clone(volume, "src", volume, "dst", threading.Event())

    assert copied == Usage(200, 2) == volume.usage("dst")
    assert (volume.folder_root("dst") / "b.bin").stat().st_nlink == 1
