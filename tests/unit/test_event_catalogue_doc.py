"""docs/events.md documents every event in the catalogue: its name, version and fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import events.domain  # noqa: F401  (fills the catalogue)
from events.catalogue import CATALOGUE, Event

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def section(text: str, cls: type[Event]) -> str:
    """The text under the event's heading, up to the next heading."""
    heading = f"### `{cls.event_name}` (v{cls.schema_version})"
    assert heading in text, f"docs/events.md has no heading {heading!r}"
    rest = text.split(heading, 1)[1]
    return re.split(r"^#{2,3} ", rest, maxsplit=1, flags=re.MULTILINE)[0]


@pytest.mark.parametrize("cls", CATALOGUE.classes(), ids=lambda c: c.event_name)
def test_every_event_is_documented_with_its_version_and_fields(cls: type[Event]) -> None:
    body = section(DOC.read_text(), cls)

    for field in cls.model_fields:
        assert f"`{field}`" in body, f"{cls.event_name}.{field} is not documented"


def test_every_documented_event_exists() -> None:
    documented = re.findall(r"^### `(\w+)`", DOC.read_text(), flags=re.MULTILINE)

    assert sorted(documented) == CATALOGUE.names()
