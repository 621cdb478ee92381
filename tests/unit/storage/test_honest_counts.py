"""Honest folder counts on real files: regular files, symlinks and other entries apart, a
hard-linked file's bytes once, and deletes that free what a fresh walk no longer counts, so
the count a fast-size volume keeps equals a fresh walk after any run of uploads and deletes."""

from __future__ import annotations

import os
import random
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.folder_paths import FolderPath, parse_path
from services.storage import folderfs, foldertree
from services.storage.foldertree import MAX_DEPTH, Usage
from services.storage.volumes import SharedVolume
from services.storage.volumes.meta import COUNT_RULES

FOLDER = "f-counts"


@pytest.fixture
def volume(tmp_path: Path) -> SharedVolume:
    return SharedVolume("shared", {"*": tmp_path / "shared"}, "host-a")


@pytest.fixture
def root(volume: SharedVolume) -> Path:
    return volume.create_folder(FOLDER)


def walked(root: Path) -> Usage:
    with folderfs.open_root(root) as fd:
        return foldertree.usage(fd)


def make_device(path: Path) -> bool:
    """A character device node (/dev/null's numbers); False where this user may not."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        return False
    return True


# ---- what a walk counts ----------------------------------------------------------------------


def test_each_kind_of_entry_is_counted_apart(root: Path, tmp_path: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "a.bin").write_bytes(b"a" * 10)
    (root / "b.bin").write_bytes(b"b" * 5)
    (root / "to-outside").symlink_to(tmp_path)
    (root / "d" / "dangling").symlink_to("nowhere")
    os.mkfifo(root / "pipe")
    os.mknod(root / "sock", stat.S_IFSOCK | 0o600)
    device = make_device(root / "null")

    assert walked(root) == Usage(bytes=15, files=2, links=2, others=2 + device)


def test_a_hard_linked_file_counts_its_bytes_once_and_each_name(root: Path) -> None:
    (root / "d").mkdir()
    (root / "a.bin").write_bytes(b"a" * 100)
    os.link(root / "a.bin", root / "d" / "same.bin")
    os.link(root / "a.bin", root / "also.bin")
    (root / "solo.bin").write_bytes(b"s" * 7)

    assert walked(root) == Usage(bytes=107, files=4)


def test_usage_stays_positional_for_bytes_and_files() -> None:
    assert Usage(3, 2) == Usage(bytes=3, files=2, links=0, others=0)
    assert Usage(3, 2, 1, 1) + -Usage(1, 1, links=1) == Usage(2, 1, 0, 1)


# ---- what a delete frees ---------------------------------------------------------------------


def delete(root: Path, path: str, *, recursive: bool = False) -> Usage:
    with folderfs.open_root(root) as fd:
        return foldertree.delete(fd, parse_path(path), recursive=recursive, count=True)


def test_deleting_one_name_of_several_frees_the_name_not_the_bytes(root: Path) -> None:
    (root / "a.bin").write_bytes(b"a" * 100)
    os.link(root / "a.bin", root / "b.bin")
    before = walked(root)

    first = delete(root, "a.bin")
    assert first == Usage(0, 1)
    assert walked(root) == before + -first

    last = delete(root, "b.bin")
    assert last == Usage(100, 1)
    assert walked(root) == Usage()


def test_deleting_a_link_a_fifo_or_a_device_drops_its_own_count(root: Path) -> None:
    (root / "link").symlink_to("anything")
    os.mkfifo(root / "pipe")
    device = make_device(root / "null")

    assert delete(root, "link") == Usage(links=1)
    assert delete(root, "pipe") == Usage(others=1)
    if device:
        assert delete(root, "null") == Usage(others=1)
    assert walked(root) == Usage()


def test_a_recursive_delete_frees_the_bytes_of_files_named_only_inside(root: Path) -> None:
    (root / "gone" / "deeper").mkdir(parents=True)
    (root / "gone" / "inside.bin").write_bytes(b"i" * 30)
    os.link(root / "gone" / "inside.bin", root / "gone" / "deeper" / "inside-too.bin")
    (root / "gone" / "shared.bin").write_bytes(b"s" * 50)
    os.link(root / "gone" / "shared.bin", root / "kept.bin")
    (root / "gone" / "link").symlink_to("shared.bin")
    os.mkfifo(root / "gone" / "deeper" / "pipe")
    before = walked(root)

    freed = delete(root, "gone", recursive=True)

    # Both names of inside.bin went; shared.bin keeps its bytes under kept.bin.
    assert freed == Usage(bytes=30, files=3, links=1, others=1)
    assert walked(root) == before + -freed == Usage(50, 1)


def test_a_delete_below_the_depth_limit_frees_only_what_a_walk_counted(root: Path) -> None:
    # A chain of directories past MAX_DEPTH, a file at every depth from a few levels above the
    # limit to a few below it: the walk counts those at or above the limit.
    chain = root.joinpath(*["d"] * (MAX_DEPTH + 3))
    chain.mkdir(parents=True)
    for depth in range(MAX_DEPTH - 3, MAX_DEPTH + 4):
        (root.joinpath(*["d"] * (depth - 1)) / "f.bin").write_bytes(b"x" * depth)
    before = walked(root)
    assert before.files == 4  # depths MAX_DEPTH - 3 .. MAX_DEPTH

    beyond = "/".join(["d"] * (MAX_DEPTH + 1)) + "/f.bin"  # a file MAX_DEPTH + 2 deep
    assert delete(root, beyond) == Usage()
    assert walked(root) == before
    deep = "/".join(["d"] * (MAX_DEPTH - 2))
    freed = delete(root, deep, recursive=True)
    assert freed == Usage(bytes=2 * MAX_DEPTH - 1, files=2)  # MAX_DEPTH - 1 and MAX_DEPTH deep
    assert walked(root) == before + -freed


# ---- the kept count against a fresh walk -----------------------------------------------------


def upload(volume: SharedVolume, root: Path, path: FolderPath, data: bytes) -> None:
    """What the data plane does when an upload completes: rename the finished part into
    place, replacing a file there, and move the kept count by the file added, less the name it
    replaced (``foldertree.one_name``: its bytes only if that was the file's last name)."""
    area = volume.upload_area(FOLDER)
    temp = area / "finished.part"
    temp.write_bytes(data)
    with folderfs.open_root(area) as area_fd, folderfs.open_root(root) as fd:
        replaced = folderfs.place_file(area_fd, temp.name, fd, path)
    old = Usage() if replaced is None else foldertree.one_name(replaced)
    volume.record_change(FOLDER, Usage(len(data), 1) + -old)


def delete_through_the_plane(volume: SharedVolume, root: Path, path: FolderPath) -> None:
    with folderfs.open_root(root) as fd:
        removed = foldertree.delete(fd, path, recursive=True, count=True)
    volume.record_change(FOLDER, -removed)


def entries(root: Path) -> Iterator[Path]:
    for base, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            yield Path(base, name)


def session_writes(rng: random.Random, root: Path, step: int) -> None:
    """What a session writing through its mount might do: new files, hard links to files
    already there, symlinks, FIFOs, sockets, devices, directories. The kept count does not see
    these until the volume recounts (as when that session ends)."""
    here = [p for p in entries(root) if p.is_dir() and not p.is_symlink()] + [root]
    files = [p for p in entries(root) if p.is_file() and not p.is_symlink()]
    for n in range(rng.randint(1, 6)):
        parent = rng.choice(here)
        name = parent / f"s{step}-{n}"
        kinds = ["dir", "file", "file", "hardlink", "hardlink", "symlink", "fifo", "other"]
        match rng.choice(kinds):
            case "file":
                name.write_bytes(b"f" * rng.randint(0, 300))
            case "hardlink" if files:
                os.link(rng.choice(files), name)
            case "symlink":
                name.symlink_to(rng.choice(["..", "/etc/passwd", "nowhere", "s0-0"]))
            case "fifo":
                os.mkfifo(name)
            case "other":
                if not make_device(name):
                    os.mknod(name, stat.S_IFSOCK | 0o600)
            case _:
                name.mkdir()


def plane_change(rng: random.Random, volume: SharedVolume, root: Path, step: int) -> None:
    """One change through the data plane: an upload (new, or replacing a name that may be a
    hard link), a delete (of one name, or of a whole directory), a move (counts unchanged)."""
    found = list(entries(root))
    files = [p for p in found if p.is_file() and not p.is_symlink()]
    dirs = [p for p in found if p.is_dir() and not p.is_symlink()]

    def rel(path: Path) -> FolderPath:
        return parse_path(path.relative_to(root).as_posix())

    action = rng.choice(["upload", "replace", "delete", "delete", "rmtree", "move"])
    if action == "replace" and files:
        upload(volume, root, rel(rng.choice(files)), b"r" * rng.randint(0, 200))
    elif action == "delete" and found:
        target = rng.choice(found)
        if not target.is_dir() or target.is_symlink():
            delete_through_the_plane(volume, root, rel(target))
    elif action == "rmtree" and dirs:
        delete_through_the_plane(volume, root, rel(rng.choice(dirs)))
    elif action == "move" and found:
        source = rng.choice(found)
        with folderfs.open_root(root) as fd:
            folderfs.move(fd, rel(source), parse_path(f"moved-{step}"))
    else:
        parent = rng.choice([*dirs, root])
        upload(volume, root, rel(parent / f"u{step}"), b"u" * rng.randint(0, 200))


@pytest.mark.parametrize("seed", range(12))
def test_the_kept_count_equals_a_fresh_walk_after_every_change(
    volume: SharedVolume, root: Path, seed: int
) -> None:
    rng = random.Random(seed)
    assert volume.usage(FOLDER) == walked(root)  # the first read walks
    for step in range(60):
        if rng.random() < 0.2:
            session_writes(rng, root, step)
            volume.recount(FOLDER)  # the session ended
        else:
            plane_change(rng, volume, root, step)
        assert volume.usage(FOLDER) == walked(root), f"after step {step}"


def test_counts_kept_under_the_old_rules_are_walked_again(volume: SharedVolume, root: Path) -> None:
    (root / "a.bin").write_bytes(b"a" * 10)
    os.link(root / "a.bin", root / "b.bin")
    (root / "link").symlink_to("a.bin")
    # As the old code kept them: the link a file, the bytes once per name, no rules named.
    volume.meta.path(FOLDER).parent.mkdir(parents=True, exist_ok=True)
    volume.meta.path(FOLDER).write_text('{"bytes": 20, "files": 3, "counted": true}')

    volume.record_change(FOLDER, Usage(5, 1))  # not moved: the next read walks anyway
    assert volume.usage(FOLDER) == Usage(10, 2, links=1)
    meta = volume.meta.read(FOLDER)
    assert (meta.count_rules, meta.links) == (COUNT_RULES, 1)
