"""Docker's timestamped log lines (``services.node.output_lines``): times as integer
nanoseconds whatever the fraction's length, lines cut from chunks that split them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.node.backend import OutputLine
from services.node.output_lines import engine_ns, stamped_lines

SECOND = 1_714_566_896 * 1_000_000_000  # 2024-05-01T12:34:56Z


@pytest.mark.parametrize(
    ("stamp", "ns"),
    [
        ("2024-05-01T12:34:56.123456789Z", SECOND + 123_456_789),
        ("2024-05-01T12:34:56.1234Z", SECOND + 123_400_000),  # trimmed zeros sort after as text
        ("2024-05-01T12:34:56Z", SECOND),
        ("2024-05-01T14:34:56.5+02:00", SECOND + 500_000_000),
    ],
)
def test_engine_times_become_nanoseconds(stamp: str, ns: int) -> None:
    assert engine_ns(stamp) == ns


@pytest.mark.parametrize("stamp", ["hello", "2024-05-01T12:34:56", "2024-05-01T12:34:56.Z"])
def test_what_is_not_a_time_is_refused(stamp: str) -> None:
    with pytest.raises(ValueError, match=r"isoformat|time zone|fraction"):
        engine_ns(stamp)


async def test_lines_are_cut_from_chunks_and_keep_their_times() -> None:
    async def chunks() -> AsyncIterator[str]:
        for chunk in (
            "2024-05-01T12:34:56.1Z one\n2024-05-01T12:3",
            "4:56.2Z two\nno time\n",
            "2024-05-01T12:34:56.3Z end",
        ):
            yield chunk

    lines = [line async for line in stamped_lines(chunks())]
    assert lines == [
        OutputLine("one", SECOND + 100_000_000),
        OutputLine("two", SECOND + 200_000_000),
        OutputLine("no time", SECOND + 200_000_000),
        OutputLine("end", SECOND + 300_000_000),
    ]
