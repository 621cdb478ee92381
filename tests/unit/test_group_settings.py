"""A resource group's scheduling settings are declared once (``GroupScheduling``): events as
stored before v2 still load, the commands take the model whole, the GraphQL names and types
clients use stay as they were, and the table in docs/tenancy.md lists exactly the model's
fields."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import strawberry
from annotated_types import Ge, Le
from pydantic import ValidationError

from commands import admin as a
from commands.tenancy import ResourceGroup
from events.catalogue import CATALOGUE
from events.domain.tenancy import ResourceGroupCreated, ResourceGroupModified
from events.envelope import Envelope
from schemas.principal import Actor, ActorKind, Tenant
from schemas.sandbox import Sandbox
from schemas.session import SessionType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    AgentSelection,
    DeviceFill,
    GroupScheduling,
    HeadOfLine,
    QueuePolicy,
)
from services.gateway.admin_api.cluster import ClusterMutation
from services.gateway.admin_api.group_settings import SETTINGS, Setting, group_scheduling
from services.gateway.admin_api.resource_types import ResourceGroupInfo
from services.gateway.core.inputs import InputError

DOC = Path(__file__).resolve().parents[2] / "docs" / "tenancy.md"

# Two events exactly as the code before v2 stored them (every setting at the top level).
STORED_V1 = [
    '{"event_id":"2966d337-412f-527e-8e11-3e81dc56b255","name":"ResourceGroupCreated",'
    '"schema_version":1,"aggregate_type":"resource_group","aggregate_id":"gpu",'
    '"aggregate_version":1,"occurred_at":"2026-11-21T12:00:00Z","causation_id":"given",'
    '"correlation_id":"given","actor":{"kind":"service","id":"tests"},'
    '"tenant":{"domain":"default","project":null},"payload":{"description":"gpus",'
    '"queue_policy":"drf","agent_selection":"roundrobin","allowed_session_types":["batch"],'
    '"head_of_line":"block","starvation_after_s":120,"fragmentation_guard":false,'
    '"device_fill":"evenly","pending_timeout_s":3600,"preemption":true,'
    '"preemption_grace_s":30,"preempt_across_domains":true}}',
    '{"event_id":"7aa218bc-8770-5b19-9243-a89da5c1b196","name":"ResourceGroupModified",'
    '"schema_version":1,"aggregate_type":"resource_group","aggregate_id":"gpu",'
    '"aggregate_version":2,"occurred_at":"2026-11-21T12:00:01Z","causation_id":"given",'
    '"correlation_id":"given","actor":{"kind":"service","id":"tests"},'
    '"tenant":{"domain":"default","project":null},"payload":{"description":"gpus",'
    '"queue_policy":"lifo","agent_selection":"concentrated",'
    '"allowed_session_types":["interactive","batch"],"head_of_line":"backfill",'
    '"starvation_after_s":0,"fragmentation_guard":true,"device_fill":"fill",'
    '"pending_timeout_s":null,"preemption":false,"preemption_grace_s":60,'
    '"preempt_across_domains":false}}',
]


def test_events_stored_before_v2_load_with_every_setting() -> None:
    created, modified = (Envelope.model_validate_json(raw) for raw in STORED_V1)
    first = GroupScheduling(
        queue_policy=QueuePolicy.DRF, agent_selection=AgentSelection.ROUND_ROBIN,
        head_of_line=HeadOfLine.BLOCK, starvation_after_s=120, fragmentation_guard=False,
        device_fill=DeviceFill.EVENLY, pending_timeout_s=3600, preemption=True,
        preemption_grace_s=30, preempt_across_domains=True,
    )  # fmt: skip
    assert CATALOGUE.decode(created) == ResourceGroupCreated(
        description="gpus", allowed_session_types=(SessionType.BATCH,), scheduling=first
    )
    assert CATALOGUE.decode(modified) == ResourceGroupModified(
        description="gpus",
        # What it listed then (every type there was): a group keeps its list as stored.
        allowed_session_types=(SessionType.INTERACTIVE, SessionType.BATCH),
        scheduling=GroupScheduling(queue_policy=QueuePolicy.LIFO, starvation_after_s=0),
    )
    group = ResourceGroup.rehydrate([created])
    assert group is not None and group.scheduling == first
    group.evolve([modified])
    assert group.scheduling == GroupScheduling(queue_policy=QueuePolicy.LIFO, starvation_after_s=0)


# ---- commands -----------------------------------------------------------------------------

BY: dict[str, Any] = {
    "actor": Actor(kind=ActorKind.SERVICE, id="tests"),
    "tenant": Tenant(domain="default"),
}


def test_a_create_takes_a_new_groups_settings_for_what_it_leaves_out() -> None:
    assert a.CreateResourceGroup(name="g", **BY).scheduling == CREATED_SCHEDULING
    given = a.CreateResourceGroup.model_validate(
        {"name": "g", "scheduling": {"queue_policy": "drf"}, **BY}
    )
    assert given.scheduling == CREATED_SCHEDULING.model_copy(
        update={"queue_policy": QueuePolicy.DRF}
    )


def test_a_command_refuses_an_unknown_setting_and_one_out_of_bounds() -> None:
    with pytest.raises(ValidationError, match=re.escape("unknown field 'scheduling.queue_polcy'")):
        a.CreateResourceGroup.model_validate(
            {"name": "g", "scheduling": {"queue_polcy": "drf"}, **BY}
        )
    with pytest.raises(ValidationError, match="less than or equal to 604800"):
        a.ModifyResourceGroup.model_validate(
            {"name": "g", "description": "", "allowed_session_types": ["batch"],
             "scheduling": {"preemption_grace_s": 604_801}, **BY}
        )  # fmt: skip


# ---- GraphQL ------------------------------------------------------------------------------

# The names and types clients use today: never renamed, never retyped (a new setting adds
# fields; it need not be named here).
CLIENT_FIELDS = {
    "queuePolicy": "String!", "agentSelection": "String!", "headOfLine": "String!",
    "starvationAfterSeconds": "Int!", "fragmentationGuard": "Boolean!", "deviceFill": "String!",
    "pendingTimeoutSeconds": "Int", "preemption": "Boolean!", "preemptionGraceSeconds": "Int!",
    "preemptAcrossDomains": "Boolean!",
    "noNewPrivileges": "Boolean!", "pidsLimit": "Int", "rawSockets": "Boolean!",
}  # fmt: skip


@strawberry.type
class _Query:
    @strawberry.field
    def group(self) -> ResourceGroupInfo | None:
        return None


def _shown(kind: dict[str, Any]) -> str:
    if kind["kind"] == "NON_NULL":
        return _shown(kind["ofType"]) + "!"
    if kind["kind"] == "LIST":
        return f"[{_shown(kind['ofType'])}]"
    return str(kind["name"])


def _introspect() -> dict[str, Any]:
    schema = strawberry.Schema(query=_Query, mutation=ClusterMutation)
    kind = "type { kind name ofType { kind name ofType { kind name ofType { name kind } } } }"
    result = schema.execute_sync(
        f"""{{ info: __type(name: "ResourceGroupInfo") {{ fields {{ name {kind} }} }}
            mutations: __type(name: "ClusterMutation") {{
                fields {{ name args {{ name defaultValue {kind} }} }} }} }}"""
    )
    assert result.errors is None and result.data is not None, result.errors
    return result.data


def test_the_graphql_settings_keep_the_names_and_types_clients_use() -> None:
    found = _introspect()
    fields = {f["name"]: _shown(f["type"]) for f in found["info"]["fields"]}
    assert {name: fields.get(name) for name in CLIENT_FIELDS} == CLIENT_FIELDS
    # Every setting is an optional argument of both mutations: null (left out) is "not given".
    optional = {name: (shown.removesuffix("!"), "null") for name, shown in CLIENT_FIELDS.items()}
    mutations = {m["name"]: m["args"] for m in found["mutations"]["fields"]}
    for mutation in ("createResourceGroup", "modifyResourceGroup"):
        args = {
            arg["name"]: (_shown(arg["type"]), arg["defaultValue"]) for arg in mutations[mutation]
        }
        assert {name: args.get(name) for name in optional} == optional, mutation


def test_arguments_are_read_into_the_model_with_its_bounds() -> None:
    timed = group_scheduling(GroupScheduling(), pending_timeout_seconds=60)
    assert timed.pending_timeout_s == 60
    assert group_scheduling(timed, pending_timeout_seconds=0).pending_timeout_s is None
    assert group_scheduling(timed, preemption=True).pending_timeout_s == 60
    refused = {
        "pending_timeout_seconds": (-1, "pendingTimeoutSeconds must not be negative, got -1"),
        "preemption_grace_seconds": (
            604_801, "preemptionGraceSeconds must be at most 604800, got 604801"
        ),
    }  # fmt: skip
    for argument, (value, message) in refused.items():
        with pytest.raises(InputError, match=re.escape(message)):
            group_scheduling(GroupScheduling(), **{argument: value})


def test_the_sandbox_settings_are_arguments_of_their_own_name_kept_in_the_sandbox() -> None:
    opened = group_scheduling(CREATED_SCHEDULING, raw_sockets=True, pids_limit=0)
    assert opened.sandbox == Sandbox(raw_sockets=True, pids_limit=None)
    assert opened.agent_selection is AgentSelection.DISPERSED  # the rest as the base had it
    kept = group_scheduling(opened, no_new_privileges=False)
    assert kept.sandbox == Sandbox(raw_sockets=True, pids_limit=None, no_new_privileges=False)
    with pytest.raises(InputError, match=re.escape("pidsLimit must not be less than 16, got 8")):
        group_scheduling(GroupScheduling(), pids_limit=8)
    with pytest.raises(InputError, match=re.escape("pidsLimit must be at most 4194304, got")):
        group_scheduling(GroupScheduling(), pids_limit=1 << 30)


def test_a_group_stored_before_the_sandbox_existed_is_sandboxed_safely() -> None:
    # v1 events, and v2 events written before ``sandbox`` (their ``scheduling`` lacks it).
    created, _ = (Envelope.model_validate_json(raw) for raw in STORED_V1)
    v2 = ResourceGroupModified.model_validate(
        {"description": "", "allowed_session_types": ["batch"], "scheduling": {"preemption": True}}
    )
    for scheduling in (CATALOGUE.decode(created).scheduling, v2.scheduling):  # type: ignore[attr-defined]
        assert scheduling.sandbox == Sandbox(
            no_new_privileges=True, pids_limit=4096, raw_sockets=False
        )
    assert CREATED_SCHEDULING.sandbox == GroupScheduling().sandbox == Sandbox()


# ---- the docs table -----------------------------------------------------------------------

BEGIN, END = "<!-- settings table: GroupScheduling -->", "<!-- end of settings table -->"


def _value(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):  # an enumeration
        return f"`{value}`"
    return str(value)


def _values(setting: Setting) -> str:
    if setting.choices:
        return ", ".join(f"`{c}`" for c in setting.choices)
    if setting.kind is bool:
        return "true, false"
    least = next(m.ge for m in setting.field.metadata if isinstance(m, Ge))
    most = next(m.le for m in setting.field.metadata if isinstance(m, Le))
    return f"{least} … {most}" + ("; 0 unsets it" if setting.unsettable else "")


def settings_table() -> str:
    head = ("GraphQL argument / field", "in `scheduling`", "values", "left out at creation")
    rows = ["| " + " | ".join((*head, "what it does")) + " |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        created = _value(s.show(CREATED_SCHEDULING))
        rows.append(f"| `{s.graphql}` | `{s.name}` | {_values(s)} | {created} | {s.description} |")
    return "\n".join(rows)


def test_the_docs_table_lists_exactly_the_models_settings() -> None:
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"docs/tenancy.md lost its markers {BEGIN} / {END}"
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert shown == settings_table(), (
        "docs/tenancy.md's settings table differs from GroupScheduling; put this between "
        f"its markers:\n{settings_table()}"
    )
