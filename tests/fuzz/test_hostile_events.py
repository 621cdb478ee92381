"""Property-based hostile events written straight into JY_EVENTS: any payload, name, version or
body at all. The scheduler's fold and the projections never raise on them, and a valid event
written after each one is still folded and projected."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from events.fold import Fold
from projections import queries
from projections.db import create_engine
from projections.runner import Projector
from schemas.ids import new_id
from schemas.subjects import AggregateType, events_of
from services.scheduler.state import SchedulerState
from tests.fuzz.profile import fuzz_settings
from tests.integration.poison import valid_request, write_raw

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=25,
)
FIELDS = ["name", "schema_version", "aggregate_type", "aggregate_id", "payload", "occurred_at",
          "actor", "tenant", "event_id", "aggregate_version"]  # fmt: skip
PAYLOAD_PATHS = [("spec",), ("spec", "kernels"), ("spec", "image"), ("spec", "env"),
                 ("kernel_ids",), ("owner",), ("spec", "priority")]  # fmt: skip


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[str, dict[str, Any] | bytes]:
    session_id = new_id()
    envelope = valid_request(session_id)
    how = draw(st.sampled_from(["field", "payload", "drop", "bytes"]))
    if how == "bytes":
        return session_id, draw(st.binary(max_size=300))
    if how == "drop":
        envelope.pop(draw(st.sampled_from(FIELDS)), None)
    elif how == "field":
        key = draw(st.sampled_from(FIELDS))
        if key == "aggregate_id":
            return session_id, envelope  # a misfiled one is covered by the table tests
        envelope[key] = draw(json_values)
    else:
        path = draw(st.sampled_from(PAYLOAD_PATHS))
        target = envelope["payload"]
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = draw(json_values)
    return session_id, envelope


@pytest.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AsyncEngine]:
    path = Path(tmp_path_factory.mktemp("fuzz-events")) / "views.db"
    made = create_engine(f"sqlite+aiosqlite:///{path}")
    yield made
    await made.dispose()


@fuzz_settings
@given(hostile=hostile_bodies())
async def test_no_event_stops_the_scheduler_fold_or_the_projections(
    bus: Bus, engine: AsyncEngine, hostile: tuple[str, dict[str, Any] | bytes]
) -> None:
    session_id, body = hostile
    if isinstance(body, dict):
        json.dumps(body)  # what the strategy drew is JSON (NaN included, as Python writes it)
    first = await write_raw(bus, session_id, body)
    valid_id = new_id()
    await write_raw(bus, valid_id, valid_request(valid_id))

    state = SchedulerState()
    state.position = first - 1
    fold = Fold(bus, state, subjects=[events_of(AggregateType.SESSION)], consumer="fuzz-scheduler")
    try:
        await fold.catch_up(timeout=0.5)
    finally:
        await fold.close()
    assert valid_id in state.sessions

    projector = Projector(engine, bus)
    try:
        await projector.start()
        await projector.catch_up(timeout=0.5)
    finally:
        await projector.close()
    assert await queries.get_session(engine, valid_id) is not None
