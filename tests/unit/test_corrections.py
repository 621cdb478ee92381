"""Operators' corrections: the ``correction`` aggregate's rules and what a consumer keeps of
its events (which event to read past, which aggregate to give up)."""

from __future__ import annotations

import pytest

from commands.correction import Correction, VoidedError
from events.corrections import Corrections
from events.envelope import Cause, Envelope
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from tests.unit.scenario import T0

HELD = f"ev.session.{new_id()}"


def envelopes(correction: Correction) -> list[Envelope]:
    cause = Cause(
        causation_id=new_id(), correlation_id="c1", actor=Actor.service("t"), tenant=SYSTEM_TENANT
    )
    return correction.collect(cause)


def test_skipping_twice_the_same_event_changes_nothing_and_a_voided_one_skips_no_more() -> None:
    correction = Correction.skip(HELD, 7, "newer code", T0)
    assert correction.skipped == (7,)
    assert not correction.skip_more(7, "again", T0)
    assert correction.skip_more(9, "another", T0)
    assert correction.void_too("junk", T0)
    assert not correction.void_too("junk", T0)
    with pytest.raises(VoidedError):
        correction.skip_more(11, "too late", T0)


def test_a_consumer_keeps_what_to_skip_and_what_is_given_up() -> None:
    kept = Corrections()
    skip = Correction.skip(HELD, 7, "", T0)
    other = f"ev.node.{new_id()}"
    void = Correction.void(other, "", T0)
    for envelope in [*envelopes(skip), *envelopes(void)]:
        kept.take(envelope)
    assert kept.skips(HELD, 7) and not kept.skips(HELD, 8)
    assert kept.skips(other, 1) and kept.skips(other, 99)  # voided: every event
    assert other in kept.resolved and HELD not in kept.resolved
