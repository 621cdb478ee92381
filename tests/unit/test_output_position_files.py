"""Where each kernel's published output ends, kept on the node's disk (real files in a
temporary directory): one file per agent, written at most every ``every_s`` while something
changed and at once on ``flush``; found again by a new instance (an agent that restarted);
forgotten; and a file that is not positions is set aside with a warning, not raised."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from services.node.output_positions import Position, PositionFiles


def test_positions_are_read_back_and_kept_as_one_json_file(tmp_path: Path) -> None:
    files = PositionFiles(tmp_path / "output", name="node-1")  # the directory comes later
    assert files.read("k1") is None
    files.write("k1", Position(line=12, at_ns=1_700_000_000_123, same=2, seq=40))
    files.write("k1", Position(line=15, at_ns=1_700_000_000_456, same=1, seq=41))
    files.write("k2", Position(line=1, at_ns=5, same=1, seq=42))
    # The stream's sequence is not kept: the file is for when the stream has nothing.
    assert files.read("k1") == Position(15, 1_700_000_000_456, 1, 0)
    on_disk = json.loads((tmp_path / "output" / "node-1.json").read_text())
    assert on_disk == {"k1": [15, 1_700_000_000_456, 1], "k2": [1, 5, 1]}
    assert sorted(p.name for p in (tmp_path / "output").iterdir()) == ["node-1.json"]


def test_a_new_instance_finds_what_an_earlier_one_kept(tmp_path: Path) -> None:
    before = PositionFiles(tmp_path)
    before.write("k1", Position(3, 30, 1, 7))
    before.write("k2", Position(4, 40, 1, 8))
    before.forget("k2")
    after = PositionFiles(tmp_path)  # the agent started again
    assert after.read("k1") == Position(3, 30, 1, 0)
    assert after.read("k2") is None
    assert PositionFiles(tmp_path, name="other-node").read("k1") is None  # its own file


async def test_in_an_event_loop_changes_are_written_together_after_a_while(
    tmp_path: Path,
) -> None:
    files = PositionFiles(tmp_path, every_s=0.2)
    kept = tmp_path / "positions.json"
    files.write("k1", Position(1, 10, 1, 1))
    files.write("k2", Position(2, 20, 1, 2))
    assert not kept.exists()  # not after every publish
    await asyncio.sleep(0.4)
    assert json.loads(kept.read_text()) == {"k1": [1, 10, 1], "k2": [2, 20, 1]}
    files.write("k1", Position(5, 50, 2, 3))
    files.flush()  # the agent stops: written at once
    assert json.loads(kept.read_text())["k1"] == [5, 50, 2]
    written = kept.stat().st_mtime_ns
    await asyncio.sleep(0.3)
    assert kept.stat().st_mtime_ns == written  # nothing changed: not written again


def test_a_directory_removed_behind_its_back_is_made_again(tmp_path: Path) -> None:
    files = PositionFiles(tmp_path / "output")
    files.write("k1", Position(1, 10, 1, 1))
    (tmp_path / "output" / "positions.json").unlink()
    (tmp_path / "output").rmdir()
    files.write("k2", Position(2, 20, 1, 2))
    assert PositionFiles(tmp_path / "output").read("k2") == Position(2, 20, 1, 0)


@pytest.mark.parametrize("content", ['{"k1": "many"}', "[1, 2]", "not json", '{"k1": [1, 2]}'])
def test_an_unreadable_file_is_set_aside_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    (tmp_path / "positions.json").write_text(content)
    files = PositionFiles(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert files.read("k1") is None
    assert "unreadable" in caplog.text
    assert (tmp_path / "positions.json.unreadable").read_text() == content
    files.write("k2", Position(2, 20, 1, 2))  # and positions are kept again after
    assert PositionFiles(tmp_path).read("k2") == Position(2, 20, 1, 0)


@pytest.mark.parametrize("name", ["", "../node", "a/b", ".hidden"])
def test_what_is_not_a_file_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not a file name"):
        PositionFiles(tmp_path, name=name)
