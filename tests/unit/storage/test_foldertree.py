"""Listing, walking and deleting whole directories on real directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schemas.folder_paths import ROOT, parse_path
from services.storage import folderfs, foldertree
from services.storage.folderfs import FolderFsError
from services.storage.foldertree import Usage


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    place = tmp_path / "outside"
    place.mkdir()
    (place / "big.bin").write_bytes(b"0" * 10_000)
    return place


@pytest.fixture
def folder(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "folder"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "one.txt").write_bytes(b"1")
    (root / "a" / "b" / "two.txt").write_bytes(b"22")
    (root / "a" / "out").symlink_to(outside)
    return root


def test_usage_counts_files_and_bytes_without_following_symlinks(folder: Path) -> None:
    with folderfs.open_root(folder) as fd:
        assert foldertree.usage(fd) == Usage(bytes=3, files=2, links=1)


def test_walk_lists_parents_before_children_and_stops_at_the_depth_limit(folder: Path) -> None:
    with folderfs.open_root(folder) as fd:
        seen = [entry.parts for entry in foldertree.walk(fd)]
        shallow = [entry.parts for entry in foldertree.walk(fd, max_depth=2)]
    assert seen.index(("a",)) < seen.index(("a", "b")) < seen.index(("a", "b", "two.txt"))
    assert ("a", "out") in seen and not any(len(p) > 2 and p[1] == "out" for p in seen)
    assert ("a", "b", "two.txt") not in shallow and ("a", "b") in shallow


def test_listing_is_paged_in_name_order_and_flags_names_a_client_cannot_use(folder: Path) -> None:
    names = ["c", "a", "b", "d\nnewline"]
    for name in names:
        (folder / "a" / "b" / name).write_text(name)
    os.symlink("/etc/passwd", folder / "a" / "b" / "e-link")
    with folderfs.open_root(folder) as fd:
        first, more = foldertree.list_dir(fd, parse_path("a/b"), after="", limit=3)
        rest, done = foldertree.list_dir(fd, parse_path("a/b"), after=first[-1].name, limit=3)
    assert [e.name for e in first] == ["a", "b", "c"] and more
    assert [e.name for e in rest] == ["d\nnewline", "e-link", "two.txt"] and not done
    kinds = {e.name: (e.kind, e.safe) for e in first + rest}
    assert kinds["e-link"] == ("symlink", True)
    assert kinds["d\nnewline"] == ("file", False)
    assert kinds["two.txt"] == ("file", True)


def test_a_name_that_is_not_utf8_is_listed_with_a_replacement_character(folder: Path) -> None:
    with open(os.path.join(os.fsencode(folder), b"bad-\xff.bin"), "wb") as bad:
        bad.write(b"!")
    with folderfs.open_root(folder) as fd:
        listed, _ = foldertree.list_dir(fd, ROOT, after="", limit=10)
    bad_entry = next(e for e in listed if e.name.startswith("bad-"))
    assert bad_entry.name == "bad-\ufffd.bin"
    assert not bad_entry.safe


def test_listing_through_a_symlink_is_refused(folder: Path) -> None:
    with folderfs.open_root(folder) as fd, pytest.raises(FolderFsError) as error:
        foldertree.list_dir(fd, parse_path("a/out"), after="", limit=10)
    assert error.value.code == "symlink_refused"


def test_delete_removes_a_link_never_its_target(folder: Path, outside: Path) -> None:
    with folderfs.open_root(folder) as fd:
        removed = foldertree.delete(fd, parse_path("a/out"), recursive=False, count=True)
    assert removed == Usage(links=1)
    assert not (folder / "a" / "out").exists()
    assert (outside / "big.bin").stat().st_size == 10_000


def test_recursive_delete_never_follows_a_symlink_inside(folder: Path, outside: Path) -> None:
    with folderfs.open_root(folder) as fd:
        with pytest.raises(FolderFsError) as error:
            foldertree.delete(fd, parse_path("a"), recursive=False, count=False)
        assert error.value.code == "not_empty"
        removed = foldertree.delete(fd, parse_path("a"), recursive=True, count=True)
    assert removed == Usage(bytes=3, files=2, links=1)
    assert os.listdir(folder) == []
    assert os.listdir(outside) == ["big.bin"]


def test_the_root_cannot_be_deleted_and_missing_entries_say_so(folder: Path) -> None:
    with folderfs.open_root(folder) as fd:
        for path, code in [(ROOT, "is_root"), (parse_path("nope"), "not_found")]:
            with pytest.raises(FolderFsError) as error:
                foldertree.delete(fd, path, recursive=True, count=False)
            assert error.value.code == code
