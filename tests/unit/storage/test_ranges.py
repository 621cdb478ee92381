"""HTTP Range parsing for downloads (pure)."""

from __future__ import annotations

import pytest

from services.storage.ranges import (
    ByteRange,
    RangeNotSatisfiable,
    etag,
    parse_range,
    range_applies,
)


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 100, None),
        ("bytes=0-9", 100, ByteRange(0, 9)),
        ("bytes=10-", 100, ByteRange(10, 99)),
        ("bytes=-10", 100, ByteRange(90, 99)),
        ("bytes=-500", 100, ByteRange(0, 99)),
        ("bytes=90-500", 100, ByteRange(90, 99)),
        ("BYTES = 5 - 5", 100, ByteRange(5, 5)),
        ("bytes=0-0,5-9", 100, None),  # several ranges: the whole file
        ("items=0-9", 100, None),
        ("bytes=9-0", 100, None),  # unreadable: ignored
        ("bytes=-", 100, None),
        ("bytes=abc", 100, None),
    ],
)
def test_one_range_or_the_whole_file(header: str | None, size: int, expected: object) -> None:
    assert parse_range(header, size) == expected


@pytest.mark.parametrize(
    ("header", "size"),
    [("bytes=100-", 100), ("bytes=100-200", 100), ("bytes=-0", 100), ("bytes=0-", 0)],
)
def test_a_range_past_the_end_is_not_satisfiable(header: str, size: int) -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_range(header, size)


def test_content_range_and_length() -> None:
    wanted = ByteRange(10, 19)
    assert wanted.length == 10
    assert wanted.content_range(100) == "bytes 10-19/100"


def test_if_range_must_name_the_current_version() -> None:
    tag = etag(1, 2, 3)
    assert range_applies(None, tag, "date")
    assert range_applies(tag, tag, "date")
    assert range_applies("date", tag, "date")
    assert not range_applies('"other"', tag, "date")
