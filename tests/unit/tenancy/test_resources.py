"""The tenancy deciders of resource groups and images, given / when / then on an in-memory
store: cluster-wide objects only a superadmin (or a service) changes, groups opened to scopes
that exist, images forgotten and registered again."""

from __future__ import annotations

from typing import Any

import pytest

from commands import admin as a
from commands.outcome import Code
from commands.tenancy import ImageForgottenError
from events.domain.tenancy import (
    ImageForgotten,
    ImageModified,
    ImageRegistered,
    ResourceGroupAssociated,
    ResourceGroupCreated,
    ResourceGroupDeactivated,
    ResourceGroupDisassociated,
    ResourceGroupModified,
    ResourceGroupReactivated,
)
from schemas.resources import ResourceSlots
from schemas.session import SessionType
from schemas.tenancy import (
    AgentSelection,
    DeviceFill,
    GroupScheduling,
    HeadOfLine,
    QueuePolicy,
    ScopeKind,
    SlotLimits,
)
from tests.unit.tenancy.support import PID1, Org, by

BATCH = (SessionType.BATCH,)
SCHEDULING = GroupScheduling(
    queue_policy=QueuePolicy.DRF, agent_selection=AgentSelection.CONCENTRATED,
    head_of_line=HeadOfLine.BLOCK, starvation_after_s=60, fragmentation_guard=False,
    device_fill=DeviceFill.EVENLY,
)  # fmt: skip
SETTINGS: dict[str, Any] = {
    "description": "gpus",
    "allowed_session_types": BATCH,
    "scheduling": SCHEDULING,
}
IMAGE = "reg.example/py:3"
SMALL, BIG = ResourceSlots(cpu_milli=1000), SlotLimits(gpu_hundredths=400)

# ---- resource groups ----------------------------------------------------------------------


async def test_a_resource_group_is_created_once_by_a_superadmin(org: Org) -> None:
    w = org.world
    cmd = a.CreateResourceGroup(name="g1", **SETTINGS, **by(org.root.actor))
    then = await w.when(cmd)
    assert then.accepted(ResourceGroupCreated(**SETTINGS)) == "resource group g1 created"
    assert then.written_to == ["resource_group/g1"]
    assert w.directory.group_scheduling("g1").head_of_line is HeadOfLine.BLOCK
    assert (await w.when(cmd)).accepted() == "resource group g1 was created by this command already"
    (await w.when(a.CreateResourceGroup(name="g1", **by()))).rejected(
        Code.CONFLICT, "resource group g1 already exists"
    )
    (await w.when(a.CreateResourceGroup(name="g2", **by(org.admin1.actor)))).rejected(
        Code.FORBIDDEN, "a admin of domain d1 may not create resource groups"
    )
    (await w.when(a.CreateResourceGroup(name="g2", allowed_session_types=(), **by()))).rejected(
        Code.INVALID, "a resource group must allow at least one session type"
    )
    # Settings left out: a new group disperses.
    (await w.when(a.CreateResourceGroup(name="g3", **by()))).accepted(
        ResourceGroupCreated(scheduling=GroupScheduling(agent_selection=AgentSelection.DISPERSED))
    )


async def test_a_resource_group_is_modified_whole_and_once(org: Org) -> None:
    w = org.world
    await w.given(a.CreateResourceGroup(name="g1", **by()))
    cmd = a.ModifyResourceGroup(name="g1", **SETTINGS, **by())
    then = await w.when(cmd)
    assert then.accepted(ResourceGroupModified(**SETTINGS)) == "resource group g1 modified"
    assert (await w.when(cmd)).accepted() == "resource group g1 already had these settings"
    (await w.when(cmd.model_copy(update={"allowed_session_types": ()}))).rejected(
        Code.INVALID, "a resource group must allow at least one session type"
    )
    (await w.when(cmd.model_copy(update={"name": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no resource group nope"
    )
    (await w.when(cmd.model_copy(update={"actor": org.admin1.actor}))).rejected(
        Code.FORBIDDEN, "a admin of domain d1 may not change resource groups"
    )


@pytest.mark.parametrize(
    ("scope", "scope_id", "named"),
    [(ScopeKind.DOMAIN, "d1", "domain d1"), (ScopeKind.PROJECT, PID1, "project ml"),
     (ScopeKind.KEYPAIR, "AKalice", "keypair AKalice")],
)  # fmt: skip
async def test_a_resource_group_is_opened_and_closed_to_a_scope(
    org: Org, scope: ScopeKind, scope_id: str, named: str
) -> None:
    w = org.world
    await w.given(a.CreateResourceGroup(name="g1", **by()))
    cmd = a.AssociateResourceGroup(name="g1", scope=scope, scope_id=scope_id, **by())
    then = await w.when(cmd)
    opened = ResourceGroupAssociated(scope=scope, scope_id=scope_id)
    assert then.accepted(opened) == f"resource group g1 is open to {named}"
    assert w.directory.allowed_groups("d1", PID1, "AKalice") == {"g1"}
    assert (await w.when(cmd)).accepted() == f"resource group g1 was already open to {named}"
    close = a.DisassociateResourceGroup(name="g1", scope=scope, scope_id=scope_id, **by())
    closed = ResourceGroupDisassociated(scope=scope, scope_id=scope_id)
    assert (await w.when(close)).accepted(closed) == f"resource group g1 is closed to {named}"
    assert w.directory.allowed_groups("d1", PID1, "AKalice") == set()
    assert (await w.when(close)).accepted() == f"resource group g1 was not open to {named}"


async def test_a_resource_group_is_opened_only_to_scopes_that_exist(org: Org) -> None:
    w = org.world
    await w.given(a.CreateResourceGroup(name="g1", **by()))
    refusals = [
        (a.AssociateResourceGroup(name="g1", scope=ScopeKind.DOMAIN, scope_id="nope", **by()),
         Code.NOT_FOUND, "there is no domain nope"),
        (a.AssociateResourceGroup(name="g1", scope=ScopeKind.PROJECT, scope_id="nope", **by()),
         Code.NOT_FOUND, "there is no project nope"),
        (a.AssociateResourceGroup(name="g1", scope=ScopeKind.KEYPAIR, scope_id="AKno", **by()),
         Code.NOT_FOUND, "there is no keypair AKno"),
        (a.AssociateResourceGroup(name="g1", scope=ScopeKind.USER, scope_id="u1", **by()),
         Code.INVALID, "associated with a domain, project or keypair, not a user"),
        (a.DisassociateResourceGroup(name="g1", scope=ScopeKind.USER, scope_id="u1", **by()),
         Code.INVALID, "not a user"),
        # A missing group is named first, whatever the scope.
        (a.AssociateResourceGroup(name="nope", scope=ScopeKind.DOMAIN, scope_id="x", **by()),
         Code.NOT_FOUND, "there is no resource group nope"),
        (a.DisassociateResourceGroup(name="nope", scope=ScopeKind.DOMAIN, scope_id="d1", **by()),
         Code.NOT_FOUND, "there is no resource group nope"),
        (a.AssociateResourceGroup(name="g1", scope=ScopeKind.DOMAIN, scope_id="d1",
                                  **by(org.admin1.actor)),
         Code.FORBIDDEN, "a admin of domain d1 may not change resource groups"),
        (a.DisassociateResourceGroup(name="g1", scope=ScopeKind.DOMAIN, scope_id="d1",
                                     **by(org.alice.actor)),
         Code.FORBIDDEN, "a user of domain d1 may not change resource groups"),
    ]  # fmt: skip
    for cmd, code, said in refusals:
        (await w.when(cmd)).rejected(code, said)


async def test_a_deactivated_resource_group_is_open_to_nobody(org: Org) -> None:
    w = org.world
    await w.given(
        a.CreateResourceGroup(name="g1", **by()),
        a.AssociateResourceGroup(name="g1", scope=ScopeKind.DOMAIN, scope_id="d1", **by()),
    )
    off = a.DeactivateResourceGroup(name="g1", reason="maintenance", **by(org.root.actor))
    assert (await w.when(off)).accepted(ResourceGroupDeactivated(reason="maintenance")) == (
        "resource group g1 deactivated"
    )
    assert w.directory.allowed_groups("d1", PID1, "AKalice") == set()
    assert (await w.when(off)).accepted() == "resource group g1 was already deactivated"
    on = a.ReactivateResourceGroup(name="g1", **by())
    assert (await w.when(on)).accepted(
        ResourceGroupReactivated()
    ) == "resource group g1 reactivated"
    assert (await w.when(on)).accepted() == "resource group g1 was already active"
    assert w.directory.allowed_groups("d1", PID1, "AKalice") == {"g1"}
    for cmd in (
        a.DeactivateResourceGroup(name="g1", **by(org.admin1.actor)),
        a.ReactivateResourceGroup(name="g1", **by(org.admin1.actor)),
    ):
        (await w.when(cmd)).rejected(Code.FORBIDDEN, "may not change resource groups")
    (await w.when(a.ReactivateResourceGroup(name="nope", **by()))).rejected(
        Code.NOT_FOUND, "there is no resource group nope"
    )


# ---- images -------------------------------------------------------------------------------


async def test_an_image_is_registered_once_and_again_after_it_is_forgotten(org: Org) -> None:
    w = org.world
    cmd = a.RegisterImage(name=IMAGE, min_resources=SMALL, max_resources=BIG, **by())
    then = await w.when(cmd)
    registered = ImageRegistered(name=IMAGE, min_resources=SMALL, max_resources=BIG)
    assert then.accepted(registered) == f"image {IMAGE} registered"
    assert (await w.when(cmd)).accepted() == f"image {IMAGE} was created by this command already"
    (await w.when(a.RegisterImage(name=IMAGE, **by()))).rejected(
        Code.CONFLICT, f"image {IMAGE} already exists"
    )
    forget = a.ForgetImage(name=IMAGE, reason="old", **by(org.root.actor))
    assert (await w.when(forget)).accepted(ImageForgotten(reason="old")) == (
        f"image {IMAGE} forgotten"
    )
    assert w.directory.image(IMAGE) is None
    assert (await w.when(forget)).accepted() == f"image {IMAGE} was already forgotten"
    back = await w.when(a.RegisterImage(name=IMAGE, **by()))
    assert back.accepted(ImageRegistered(name=IMAGE)) == f"image {IMAGE} registered again"
    assert back.written_to == then.written_to  # the same aggregate, not a new one
    found = w.directory.image(IMAGE)
    assert found is not None and found.min_resources == ResourceSlots()


async def test_an_image_is_modified_while_registered(org: Org) -> None:
    w = org.world
    await w.given(a.RegisterImage(name=IMAGE, **by()))
    cmd = a.ModifyImage(name=IMAGE, min_resources=SMALL, max_resources=BIG, **by())
    then = await w.when(cmd)
    assert then.accepted(ImageModified(min_resources=SMALL, max_resources=BIG)) == (
        f"image {IMAGE} modified"
    )
    assert (await w.when(cmd)).accepted() == f"image {IMAGE} already had these settings"
    (await w.when(cmd.model_copy(update={"name": "reg.example/nope"}))).rejected(
        Code.NOT_FOUND, "there is no image reg.example/nope"
    )
    await w.given(a.ForgetImage(name=IMAGE, **by()))
    # Raised, not returned: the runner answers a DomainError as "refused".
    last = await w.store.stream_last_seq()
    with pytest.raises(ImageForgottenError, match="register it again first"):
        await w.when(cmd.model_copy(update={"min_resources": ResourceSlots()}))
    assert await w.store.stream_last_seq() == last


async def test_only_a_superadmin_registers_changes_or_forgets_images(org: Org) -> None:
    w = org.world
    await w.given(a.RegisterImage(name=IMAGE, **by()))
    admin = by(org.admin1.actor)
    refusals = [
        (a.RegisterImage(name="reg.example/other", **admin), "may not register images"),
        (a.ModifyImage(name=IMAGE, min_resources=SMALL, max_resources=BIG, **admin),
         "a admin of domain d1 may not change images"),
        (a.ForgetImage(name=IMAGE, **by(org.alice.actor)),
         "a user of domain d1 may not change images"),
    ]  # fmt: skip
    for cmd, said in refusals:
        (await w.when(cmd)).rejected(Code.FORBIDDEN, said)
