"""Hostile events written straight into JY_EVENTS stop no consumer: the scheduler's fold, the
projections (SQLite and PostgreSQL) and the gateway's feeds quarantine what they cannot fold,
hold that aggregate, and go on with the next valid event; ``/healthz`` says "degraded"."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from events.fold import Fold
from events.quarantine import Quarantine
from projections import queries
from projections.runner import Projector
from schemas.ids import new_id
from schemas.subjects import AggregateType, events_of
from services.scheduler.state import SchedulerState
from tests.integration.gateway_support import running_gateway
from tests.integration.poison import HOSTILE, valid_request, write_hostile, write_raw

NOT_FOLDABLE = {
    "wrong-types",
    "missing-fields",
    "unknown-name",
    "unknown-version",
    "misfiled",
    "invalid-utf8",
    "not-json",
    "json-list",
}
"""What no reader can apply; the others (huge integers, a 250 KiB payload) are readable
events that only some consumers cannot store."""
PROJECTIONS_HOLD = {"huge-integers", "wrong-types", "missing-fields", "unknown-version", "misfiled"}
"""What the sessions view is given (its events by name) and cannot store; bodies with no
event name are never handed to a view at all."""


async def quarantined(bus: Bus, consumer: str) -> dict[int, str]:
    entries = await (await Quarantine.open(bus)).entries()
    return {p.seq: p.subject for p in entries if p.consumer == consumer}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
async def test_the_scheduler_fold_holds_the_aggregate_and_goes_on(bus: Bus, kind: str) -> None:
    hostile_id, seq = await write_hostile(bus, kind)
    valid_id = new_id()
    await write_raw(bus, valid_id, valid_request(valid_id))
    consumer = f"scheduler-test-{new_id()[:8]}"
    state = SchedulerState()
    state.position = seq - 1  # read from the hostile event on
    fold = Fold(bus, state, subjects=[events_of(AggregateType.SESSION)], consumer=consumer)
    try:
        await fold.catch_up(timeout=0.5)
    finally:
        await fold.close()
    assert valid_id in state.sessions  # the next valid event was folded
    subject = f"ev.session.{hostile_id}"
    if kind in NOT_FOLDABLE:
        assert subject in state.broken
        assert hostile_id not in state.sessions  # nothing decided about it
        assert (await quarantined(bus, consumer)).get(seq) == subject
    else:
        assert subject not in state.broken


async def test_projections_quarantine_every_hostile_event_and_keep_projecting(
    bus: Bus, engine: AsyncEngine
) -> None:
    written = {kind: await write_hostile(bus, kind) for kind in sorted(HOSTILE)}
    valid_id = new_id()
    await write_raw(bus, valid_id, valid_request(valid_id))
    projector = Projector(engine, bus)
    await projector.start()
    try:
        await projector.catch_up(timeout=0.5)
        assert await queries.get_session(engine, valid_id) is not None
        held = await quarantined(bus, projector.consumer)
        for kind, (session_id, seq) in written.items():
            if kind in PROJECTIONS_HOLD:
                assert held.get(seq) == f"ev.session.{session_id}", kind
        # A restart reads on from its position: nothing fails again, nothing is lost.
        await projector.close()
        again = Projector(engine, bus)
        await again.start()
        await again.catch_up(timeout=0.5)
        await again.close()
    finally:
        await projector.close()


async def test_healthz_is_degraded_and_names_the_quarantine_while_serving(
    bus: Bus, tmp_path_factory: pytest.TempPathFactory
) -> None:
    async with running_gateway(bus, tmp_path_factory.mktemp("poison")) as gateway:
        _, seq = await write_hostile(bus, "missing-fields")
        query = "query($after: Int!) { quarantine(first: 500, after: $after) { seq consumer } }"
        # Other tests may have quarantined events already (so "degraded" alone says nothing,
        # and more than 500 may be listed before it): wait until the projections have
        # quarantined this one, listed from just before it.
        held = False
        body: dict[str, Any] = {}
        for _ in range(100):
            rows = (await gateway.gql(query, after=seq - 1))["data"]["quarantine"]
            held = any(row["seq"] == seq and row["consumer"] == "projections" for row in rows)
            if held:
                break
            await asyncio.sleep(0.1)
        assert held, f"seq {seq} never quarantined by the projections"
        assert all(row["seq"] >= seq for row in rows)  # only those after the position asked
        for _ in range(100):  # /healthz reads the quarantine at most every 5 s
            answer = await gateway.client.get(f"{gateway.url}/healthz")
            assert answer.status_code == 200
            body = answer.json()
            if body["status"] == "degraded":
                break
            await asyncio.sleep(0.1)
        assert body["status"] == "degraded"
        assert body["quarantined_count"] >= 1
        if body["quarantined_count"] <= len(body.get("quarantined", [])):
            assert f'"seq": {seq}' in json.dumps(body["quarantined"])
        viewer = await gateway.gql("{ viewer { role } }")
        assert viewer["data"]["viewer"]["role"] == "superadmin"  # still serving


async def test_an_operator_skips_the_event_or_voids_the_aggregate_by_appending_a_correction(
    bus: Bus, tmp_path_factory: pytest.TempPathFactory
) -> None:
    held_id = new_id()
    await write_raw(bus, held_id, valid_request(held_id))
    later = valid_request(held_id)
    later.update(name="SessionTeleported", aggregate_version=2, event_id=new_id())
    poison_seq = await write_raw(bus, held_id, later)  # newer code's event: nobody reads it
    _, void_seq = await write_hostile(bus, "wrong-types")
    consumer = f"scheduler-test-{new_id()[:8]}"
    state = SchedulerState()
    state.position = poison_seq - 2
    fold = Fold(bus, state, subjects=[events_of(AggregateType.SESSION)], consumer=consumer)
    try:
        await fold.catch_up(timeout=0.5)
        (held,) = [s for s in state.broken if s.endswith(held_id)]
        assert held_id not in state.sessions
        assert (await quarantined(bus, consumer)).get(poison_seq) == held
        voided = (await quarantined(bus, consumer))[void_seq]
        assert voided in state.broken

        async with running_gateway(bus, tmp_path_factory.mktemp("corrections")) as gateway:
            skip = await gateway.gql(
                "mutation($s: String!, $q: Int!) { skipQuarantinedEvent(subject: $s, seq: $q, "
                'reason: "written by a newer release") { status message } }',
                s=held,
                q=poison_seq,
            )
            assert skip["data"]["skipQuarantinedEvent"]["status"] == "ACCEPTED", skip
            void = await gateway.gql(
                'mutation($s: String!) { voidAggregate(subject: $s, reason: "junk") '
                "{ status message } }",
                s=voided,
            )
            assert void["data"]["voidAggregate"]["status"] == "ACCEPTED", void
            refused = await gateway.gql(
                'mutation { voidAggregate(subject: "not a subject") { status } }'
            )
            assert refused["errors"][0]["extensions"]["code"] == "invalid"
            # The gateway's projector held the voided one too; the correction settles it once
            # the projector has read that far (a whole shared log, on a loaded machine: the
            # suite's log grows with every test before this one).
            for _ in range(1800):
                if void_seq not in await quarantined(bus, "projections"):
                    break
                await asyncio.sleep(0.05)
            assert void_seq not in await quarantined(bus, "projections")

        await fold.catch_up(timeout=0.5)
        assert held not in state.broken and held_id in state.sessions  # read again, less one
        assert voided in state.broken  # given up for good
        left = await quarantined(bus, consumer)
        assert poison_seq not in left and void_seq not in left  # both settled
    finally:
        await fold.close()
