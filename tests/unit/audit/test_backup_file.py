"""A backup file is read strictly: what its place does not allow is refused with the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from events.audit.backup_file import BackupError, BackupReader

HEADER = (
    '{"jetyard_backup": 1, "created_at": "x", "log_end": 1, "sealed_to": 0, "seals": 0, '
    '"buckets": []}'
)


def read_all(path: Path) -> int:
    with BackupReader(path) as reader:
        return sum(1 for _ in reader.messages())


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("", "is not a Jetyard backup"),
        ("\x00\x01 garbage\n", "line 1: not JSON"),
        (HEADER.replace('"log_end": 1', '"log_end": -5') + "\n", "negative position"),
        (HEADER + '\n{"seq": -1, "subject": "ev.a.b", "headers": {}, "data": ""}\n', "start at 1"),
        (HEADER + '\n{"seq": 0, "subject": "ev.a.b", "headers": {}, "data": ""}\n', "start at 1"),
        (HEADER + '\n{"seq": NaN, "subject": "ev.a.b", "headers": {}, "data": ""}\n', "line 2"),
        (HEADER + '\n{"seq": 1, "subject": "ev.a.b", "headers": {"a": 1}, "data": ""}\n', "line 2"),
        (HEADER + '\n{"seq": 1, "subject": "ev.a.b", "headers": {}, "data": "A"}\n', "line 2"),
        (HEADER + "\n[1, 2]\n", "line 2: not a JSON object"),
    ],
)
def test_what_a_line_cannot_hold_is_refused_with_its_line(
    tmp_path: Path, body: str, said: str
) -> None:
    path = tmp_path / "backup.jsonl"
    path.write_text(body)
    with pytest.raises(BackupError, match=said):
        read_all(path)


def test_a_missing_file_is_said_plainly(tmp_path: Path) -> None:
    with pytest.raises(BackupError, match="cannot read"):
        BackupReader(tmp_path / "none.jsonl")
