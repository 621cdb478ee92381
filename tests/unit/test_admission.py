"""Quota admission as tables: scopes, limits, what is held, what the pass admits."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from commands.quota import Quota
from schemas.resources import ResourceSlots
from schemas.tenancy import (
    DefaultForUnspecified,
    KeypairPolicyLimits,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    quota_id_for,
)
from services.scheduler.rules.admission import Admit, Cancel, Candidate, Wait, admit
from tests.unit.scenario import T0

GPU = ResourceSlots.of(cpu=1, gpu=1)
UNLIMITED = DefaultForUnspecified.UNLIMITED
A = SessionOwner(access_key="AKA", user_id="u1", project_id="p1", domain="d")
B = SessionOwner(access_key="AKB", user_id="u2", project_id="p2", domain="d")
C = SessionOwner(access_key="AKC", user_id="u3", project_id="p1", domain="d")


@dataclass
class FakeDirectory:
    keypairs: dict[str, KeypairPolicyLimits] = field(default_factory=dict)
    scopes: dict[tuple[ScopeKind, str], SlotLimits] = field(default_factory=dict)

    def keypair_limits(self, access_key: str) -> KeypairPolicyLimits | None:
        return self.keypairs.get(access_key, KeypairPolicyLimits())

    def scope_limits(
        self, kind: ScopeKind, scope_id: str
    ) -> tuple[SlotLimits, DefaultForUnspecified]:
        return self.scopes.get((kind, scope_id), SlotLimits()), UNLIMITED

    def scope_name(self, kind: ScopeKind, scope_id: str) -> str:
        return {"p1": "gpu-lab", "p2": "nlp"}.get(scope_id, scope_id)


def holding(kind: ScopeKind, scope_id: str, *sessions: str) -> Quota:
    quota = Quota.open(kind, scope_id, T0)
    quota.reserve(dict.fromkeys(sessions, GPU), T0)
    return quota


def quotas(*held: Quota) -> dict[str, Quota]:
    return {quota_id_for(q.scope, q.scope_id): q for q in held}


def candidates(*owners: SessionOwner, need: ResourceSlots = GPU) -> list[Candidate]:
    return [Candidate(f"s{i}", owner, need) for i, owner in enumerate(owners, start=1)]


def test_everything_fits_when_nothing_is_limited() -> None:
    decisions = admit(candidates(A, A, B), {}, FakeDirectory())
    assert decisions == [Admit("s1"), Admit("s2"), Admit("s3")]


@pytest.mark.parametrize(
    ("held", "admitted"),
    [
        (0, ["s1", "s2"]),
        (1, ["s1"]),
        (2, []),
    ],
)
def test_max_concurrent_sessions_counts_held_and_this_pass(held: int, admitted: list[str]) -> None:
    directory = FakeDirectory(keypairs={"AKA": KeypairPolicyLimits(max_concurrent_sessions=2)})
    quota = holding(ScopeKind.KEYPAIR, "AKA", *[f"old{i}" for i in range(held)])
    decisions = admit(candidates(A, A, A), quotas(quota), directory)
    assert [d.session_id for d in decisions if isinstance(d, Admit)] == admitted
    waiting = [d for d in decisions if isinstance(d, Wait)]
    assert waiting and all(d.reason == "keypair AKA: 2/2 concurrent sessions" for d in waiting)


def test_a_full_project_blocks_its_sessions_and_not_another_project() -> None:
    directory = FakeDirectory(scopes={(ScopeKind.PROJECT, "p1"): SlotLimits(gpu_hundredths=200)})
    quota = holding(ScopeKind.PROJECT, "p1", "old")
    decisions = admit(candidates(A, C, B, A), quotas(quota), directory)
    assert decisions == [
        Admit("s1"),
        Wait("s2", "project gpu-lab: gpu 2/2 in use"),
        Admit("s3"),
        Wait("s4", "project gpu-lab: gpu 2/2 in use"),
    ]


def test_strict_order_a_large_waiting_session_holds_back_smaller_later_ones() -> None:
    directory = FakeDirectory(scopes={(ScopeKind.PROJECT, "p1"): SlotLimits(gpu_hundredths=200)})
    big = Candidate("big", A, ResourceSlots.of(gpu=2))
    small = Candidate("small", C, ResourceSlots.of(gpu=1))
    decisions = admit([big, small], quotas(holding(ScopeKind.PROJECT, "p1", "old")), directory)
    assert decisions == [
        Wait("big", "project gpu-lab: gpu 1/2 in use, asks for 2"),
        Wait("small", "project gpu-lab: gpu 1/2 in use, asks for 2"),
    ]


def test_higher_priority_goes_first_then_request_order() -> None:
    directory = FakeDirectory(keypairs={"AKA": KeypairPolicyLimits(max_concurrent_sessions=1)})
    first = Candidate("first", A, GPU, priority=10)
    urgent = Candidate("urgent", A, GPU, priority=50)
    decisions = admit([first, urgent], {}, directory)
    assert decisions[0] == Admit("urgent")
    assert decisions[1] == Wait("first", "keypair AKA: 1/1 concurrent sessions")


def test_request_order_is_the_stream_order_not_the_order_given() -> None:
    # A replica folds its own requests from their acks, before another replica's earlier
    # ones reach it: the candidates come in fold order, admission goes by request sequence.
    directory = FakeDirectory(keypairs={"AKA": KeypairPolicyLimits(max_concurrent_sessions=1)})
    own = Candidate("own", A, GPU, order=120)
    earlier = Candidate("earlier", A, GPU, order=100)
    decisions = admit([own, earlier], {}, directory)
    assert decisions == [Admit("earlier"), Wait("own", "keypair AKA: 1/1 concurrent sessions")]


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (
            KeypairPolicyLimits(total_resource_slots=SlotLimits(gpu_hundredths=100)),
            "asks for 2 gpu but keypair AKA allows at most 1",
        ),
        (
            KeypairPolicyLimits(default_for_unspecified=DefaultForUnspecified.LIMITED),
            "asks for 1 cpu but keypair AKA allows at most 0",
        ),
    ],
)
def test_a_request_over_a_hard_limit_is_cancelled(limits: KeypairPolicyLimits, reason: str) -> None:
    directory = FakeDirectory(keypairs={"AKA": limits})
    decisions = admit([Candidate("s1", A, ResourceSlots.of(cpu=1, gpu=2))], {}, directory)
    assert decisions == [Cancel("s1", reason)]


def test_domain_memory_limit_names_the_domain_in_gib() -> None:
    directory = FakeDirectory(scopes={(ScopeKind.DOMAIN, "d"): SlotLimits(memory_bytes=4 << 30)})
    need = ResourceSlots.of(cpu=1, memory=3 << 30)
    decisions = admit([Candidate("s1", A, need), Candidate("s2", B, need)], {}, directory)
    assert decisions == [
        Admit("s1"),
        Wait("s2", "domain d: memory 3 GiB/4 GiB in use, asks for 3 GiB"),
    ]


def test_an_unknown_keypair_policy_waits() -> None:
    class NoPolicy(FakeDirectory):
        def keypair_limits(self, access_key: str) -> KeypairPolicyLimits | None:
            return None

    decisions = admit(candidates(A), {}, NoPolicy())
    assert decisions == [Wait("s1", "keypair AKA has no known resource policy")]
