"""Admin GraphQL input in human units becomes limit models, or one sentence naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest

from schemas.session import SessionType
from schemas.tenancy import (
    AgentSelection,
    DefaultForUnspecified,
    DeviceFill,
    GroupScheduling,
    HeadOfLine,
    PolicyKind,
    QueuePolicy,
    Role,
    SlotLimits,
    StoragePolicyLimits,
)
from services.gateway.admin_api.group_settings import group_scheduling
from services.gateway.admin_api.inputs import (
    KeypairPolicyInput,
    SlotLimitsInput,
    SlotsInput,
    StoragePolicyInput,
    choice,
    email,
    parse_size,
    password,
    policy_limits,
    rate_limit,
    slot_limits,
    slots,
)
from services.gateway.core.inputs import InputError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512m", 512 << 20), ("2g", 2 << 30), ("1.5GiB", 3 << 29), ("0", 0), ("1024", 1024)],
)
def test_sizes(text: str, expected: int) -> None:
    assert parse_size("memory", text) == expected


def test_slot_limits_in_human_units() -> None:
    given = SlotLimitsInput(cpu="2.5", memory="4g", gpu="0.25")
    assert slot_limits("totalResourceSlots", given) == SlotLimits(
        cpu_milli=2500, memory_bytes=4 << 30, gpu_hundredths=25
    )


def test_null_slots_are_not_named_and_no_input_is_unlimited() -> None:
    assert slot_limits("x", SlotLimitsInput(gpu="0")) == SlotLimits(gpu_hundredths=0)
    assert slot_limits("x", None) == SlotLimits()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (SlotLimitsInput(cpu="-1"), "totalResourceSlots.cpu must not be negative"),
        (SlotLimitsInput(cpu="lots"), "totalResourceSlots.cpu 'lots' is not a plain number"),
        (SlotLimitsInput(cpu="0.0001"), "finer than 1/1000 of a core"),
        (SlotLimitsInput(memory="-2g"), "totalResourceSlots.memory must not be negative"),
        (SlotLimitsInput(memory="2 parsecs"), "totalResourceSlots.memory '2 parsecs' is not"),
        (SlotLimitsInput(gpu="0.001"), "totalResourceSlots.gpu '0.001' is finer than 1/100"),
    ],
)
def test_bad_slot_limits_name_the_field(given: SlotLimitsInput, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        slot_limits("totalResourceSlots", given)


def test_image_minimum_slots_default_to_zero() -> None:
    found = slots("minResources", SlotsInput(memory="64m"))
    assert (found.cpu_milli, found.memory_bytes, found.gpu_hundredths) == (0, 64 << 20, 0)


def test_keypair_policy() -> None:
    keypair, storage = policy_limits(
        PolicyKind.KEYPAIR,
        KeypairPolicyInput(
            total_resource_slots=SlotLimitsInput(gpu="8"),
            default_for_unspecified="Limited",
            max_concurrent_sessions=3,
            max_pending_sessions=0,
            max_pending_resource_slots=SlotLimitsInput(cpu="16"),
            max_session_lifetime_s=3600,
            max_priority=50,
        ),
        None,
    )
    assert storage is None and keypair is not None
    assert keypair.total_resource_slots == SlotLimits(gpu_hundredths=800)
    assert keypair.default_for_unspecified is DefaultForUnspecified.LIMITED
    assert keypair.max_concurrent_sessions == 3
    assert keypair.max_pending_sessions == 0
    assert keypair.max_pending_resource_slots == SlotLimits(cpu_milli=16000)
    assert keypair.max_session_lifetime_s == 3600
    assert keypair.idle_timeout_s is None  # null: no limit
    assert keypair.idle_utilization_threshold_pct is None
    assert keypair.max_priority == 50


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (KeypairPolicyInput(max_concurrent_sessions=-1), "keypair.maxConcurrentSessions must not"),
        (KeypairPolicyInput(max_pending_sessions=-5), "keypair.maxPendingSessions must not be"),
        (KeypairPolicyInput(max_containers_per_session=0), "maxContainersPerSession must not be"),
        (KeypairPolicyInput(idle_timeout_s=0), "keypair.idleTimeoutS must not be less than 1"),
        (
            KeypairPolicyInput(idle_utilization_threshold_pct=0),
            "keypair.idleUtilizationThresholdPct must not be less than 1",
        ),
        (
            KeypairPolicyInput(idle_utilization_threshold_pct=101),
            "keypair.idleUtilizationThresholdPct must be at most 100",
        ),
        (KeypairPolicyInput(max_priority=101), "keypair.maxPriority must be at most 100"),
        (KeypairPolicyInput(default_for_unspecified="maybe"), "must be one of limited | unl"),
        (
            KeypairPolicyInput(total_resource_slots=SlotLimitsInput(memory="-1")),
            "keypair.totalResourceSlots.memory must not be negative",
        ),
    ],
)
def test_bad_keypair_policy_names_the_field(given: KeypairPolicyInput, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        policy_limits(PolicyKind.KEYPAIR, given, None)


def test_storage_policy_and_kinds_not_mixed() -> None:
    _, storage = policy_limits(
        PolicyKind.PROJECT, None, StoragePolicyInput(max_vfolder_count=5, max_quota_scope_size="1t")
    )
    assert storage == StoragePolicyLimits(max_vfolder_count=5, max_quota_scope_size_bytes=1 << 40)
    with pytest.raises(InputError, match="keypair limits belong to keypair policies"):
        policy_limits(PolicyKind.USER, KeypairPolicyInput(), None)
    with pytest.raises(InputError, match="storage limits belong to user and project"):
        policy_limits(PolicyKind.KEYPAIR, None, StoragePolicyInput())
    with pytest.raises(InputError, match=re.escape("storage.maxVfolderCount must not be negative")):
        policy_limits(PolicyKind.USER, None, StoragePolicyInput(max_vfolder_count=-1))


def test_words() -> None:
    assert choice("role", " Admin ", Role) is Role.ADMIN
    assert choice("allowedSessionTypes", "batch", SessionType) is SessionType.BATCH
    roles = (
        "role must be one of superadmin | admin | user | monitor | auditor | superauditor, "
        "got 'root'"
    )
    with pytest.raises(InputError, match=re.escape(roles)):
        choice("role", "root", Role)


def test_email_password_and_rate_limit() -> None:
    assert email(" ada@example.org ") == "ada@example.org"
    for bad in ("ada", "ada@", "@example.org", "ada@example", "a b@example.org"):
        with pytest.raises(InputError, match="is not an email address"):
            email(bad)
    assert password("correct horse") == "correct horse"
    with pytest.raises(InputError, match="password must have 8 to 1024 characters, got 3"):
        password("abc")
    assert rate_limit(None) is None
    with pytest.raises(InputError, match="rateLimit must not be less than 1, got 0"):
        rate_limit(0)


def test_group_scheduling_takes_what_is_given_and_keeps_the_rest() -> None:
    base = GroupScheduling(agent_selection=AgentSelection.DISPERSED)
    assert group_scheduling(base) == base
    changed = group_scheduling(
        base,
        queue_policy="DRF",
        head_of_line="block",
        starvation_after_seconds=0,
        fragmentation_guard=False,
        device_fill="evenly",
    )
    assert changed == GroupScheduling(
        queue_policy=QueuePolicy.DRF,
        agent_selection=AgentSelection.DISPERSED,
        head_of_line=HeadOfLine.BLOCK,
        starvation_after_s=0,
        fragmentation_guard=False,
        device_fill=DeviceFill.EVENLY,
    )
    assert group_scheduling(changed, agent_selection="roundrobin").head_of_line is HeadOfLine.BLOCK


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"head_of_line": "wait"}, "headOfLine must be one of block | backfill, got 'wait'"),
        ({"device_fill": "pack"}, "deviceFill must be one of fill | evenly, got 'pack'"),
        ({"queue_policy": "random"}, "queuePolicy must be one of fifo | lifo | drf"),
        ({"agent_selection": "any"}, "agentSelection must be one of concentrated | dispersed"),
        ({"starvation_after_seconds": -1}, "starvationAfterSeconds must not be negative, got -1"),
        (
            {"starvation_after_seconds": 604_801},
            "starvationAfterSeconds must be at most 604800, got 604801",
        ),
    ],
)
def test_bad_group_scheduling_names_the_field(given: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        group_scheduling(GroupScheduling(), **given)
