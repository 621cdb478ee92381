"""A new session's folders, resolved by the scheduler's create (in memory): its own, its
project's and shared folders by name or id, a read-only share mounted read-only, what cannot
be seen or is not ready refused, dot-folders added, two mounts at one path refused; the
resolved mounts on ``SessionRequested`` and on every kernel's ``ResourcesAllocated``, kept
across a requeue."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from commands.folders.aggregate import VFolder
from commands.outcome import Accepted, Code, Rejected
from events.domain.node import ResourcesAllocated
from events.domain.session import SessionRequested, SessionRequeued
from events.writes import Write
from schemas.ids import new_id, session_id_for
from schemas.session import KernelSpec, SessionSpec, SessionType
from schemas.tenancy import KeypairPolicyLimits, SessionOwner
from schemas.vfolder import MAX_MOUNTS, Mount, MountRequest, OwnerKind, Permission
from tests.unit.pass_support import ADMIN, IMAGE, World, cause_by, slots

OTHER_USER = "other-user-0001"


async def given(world: World, limits: KeypairPolicyLimits | None = None) -> SessionOwner:
    owner = await world.tenancy(limits)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2), volumes=("local",))
    return owner


async def folder(
    world: World,
    name: str,
    *,
    kind: OwnerKind = OwnerKind.USER,
    owner_id: str | None = None,
    volume: str = "local",
) -> VFolder:
    assert world.owner is not None
    if owner_id is None:
        owner_id = world.owner.user_id if kind is OwnerKind.USER else world.owner.project_id
    made = VFolder.create(new_id(), name, kind, owner_id, world.owner.domain, volume, world.clock())
    await world.record(ADMIN, made)
    return made


async def create(world: World, *mounts: MountRequest, **fields: Any) -> Accepted | Rejected:
    cmd = world.request(slots(gpu=1), mounts=mounts, **fields)
    (decision,) = await world.commands.create_sessions([cmd], world.ctx)
    assert isinstance(decision, Accepted | Rejected), decision
    return decision


async def mounts_of(world: World, *mounts: MountRequest) -> tuple[Mount, ...]:
    decision = await create(world, *mounts)
    assert isinstance(decision, Accepted), decision
    ((_, requested),) = [
        (sid, e) for sid, e in world.stored(SessionRequested) if sid == decision.aggregate_ids[0]
    ]
    return requested.mounts


def refused(decision: Accepted | Rejected) -> Rejected:
    assert isinstance(decision, Rejected), decision
    return decision


async def test_own_folders_are_mounted_by_name_or_id_at_their_path() -> None:
    world = World()
    await given(world)
    data = await folder(world, "data")
    models = await folder(world, "models")

    mounts = await mounts_of(
        world,
        MountRequest(folder="data"),
        MountRequest(folder=models.id, path="/mnt/models", read_only=True),
    )

    assert mounts == (
        Mount(folder_id=data.id, name="data", volume="local", path="/home/work/data",
              read_only=False),
        Mount(folder_id=models.id, name="models", volume="local", path="/mnt/models",
              read_only=True),
    )  # fmt: skip


async def test_a_project_folder_is_mounted_read_write_for_a_member() -> None:
    world = World()
    await given(world)
    shared = await folder(world, "team", kind=OwnerKind.PROJECT)

    (mount,) = await mounts_of(world, MountRequest(folder="team"))

    assert (mount.folder_id, mount.read_only) == (shared.id, False)


async def test_a_read_only_share_is_mounted_read_only_whatever_is_asked() -> None:
    world = World()
    owner = await given(world)
    theirs = await folder(world, "corpus", owner_id=OTHER_USER)
    theirs.invite(owner.user_id, Permission.READ_ONLY, world.clock())
    theirs.accept(owner.user_id, world.clock())
    await world.record(ADMIN, theirs)

    (mount,) = await mounts_of(world, MountRequest(folder="corpus", read_only=False))

    assert (mount.folder_id, mount.read_only) == (theirs.id, True)


async def test_a_read_write_share_is_mounted_as_asked() -> None:
    world = World()
    owner = await given(world)
    theirs = await folder(world, "scratch", owner_id=OTHER_USER)
    theirs.invite(owner.user_id, Permission.READ_WRITE, world.clock())
    theirs.accept(owner.user_id, world.clock())
    await world.record(ADMIN, theirs)

    (mount,) = await mounts_of(world, MountRequest(folder=theirs.id))

    assert mount.read_only is False


async def test_a_revoked_share_is_no_folder_at_all() -> None:
    world = World()
    owner = await given(world)
    theirs = await folder(world, "corpus", owner_id=OTHER_USER)
    theirs.invite(owner.user_id, Permission.READ_ONLY, world.clock())
    theirs.accept(owner.user_id, world.clock())
    await world.record(ADMIN, theirs)
    assert await mounts_of(world, MountRequest(folder="corpus"))
    theirs.revoke(owner.user_id, world.clock())
    await world.record(ADMIN, theirs)

    for ref in ("corpus", theirs.id):
        rejected = refused(await create(world, MountRequest(folder=ref)))
        assert (rejected.code, rejected.message) == (Code.NOT_FOUND, f"there is no folder {ref}")


async def test_an_invitation_not_accepted_mounts_nothing() -> None:
    world = World()
    owner = await given(world)
    theirs = await folder(world, "corpus", owner_id=OTHER_USER)
    theirs.invite(owner.user_id, Permission.READ_WRITE, world.clock())
    await world.record(ADMIN, theirs)

    rejected = refused(await create(world, MountRequest(folder=theirs.id)))

    assert rejected.code == Code.NOT_FOUND


async def test_a_folder_of_someone_else_answers_like_none() -> None:
    world = World()
    await given(world)
    theirs = await folder(world, "private", owner_id=OTHER_USER)
    other_project = await folder(world, "their-team", kind=OwnerKind.PROJECT, owner_id="proj-x")

    for ref in ("private", theirs.id, other_project.id, "nothing-here"):
        rejected = refused(await create(world, MountRequest(folder=ref)))
        assert (rejected.code, rejected.message) == (Code.NOT_FOUND, f"there is no folder {ref}")
    assert world.stored(SessionRequested) == []


async def test_a_trashed_folder_is_refused_naming_its_status() -> None:
    world = World()
    await given(world)
    data = await folder(world, "data")
    data.trash("tidy up", world.clock())
    await world.record(ADMIN, data)

    rejected = refused(await create(world, MountRequest(folder="data")))

    assert rejected.code == Code.CONFLICT
    assert rejected.message == "folder data is trashed: only a ready folder is mounted"


async def test_a_folder_created_after_the_fold_is_found_by_syncing_once() -> None:
    world = World()
    owner = await given(world)
    late = VFolder.create(
        new_id(), "late", OwnerKind.USER, owner.user_id, owner.domain, "local", world.clock()
    )
    # Stored but not folded: the create must fold again before saying "no folder".
    await world.store.commit([Write(late.ref, 0, tuple(late.collect(cause_by(ADMIN))))])
    assert world.state.folders.get(late.id) is None

    (mount,) = await mounts_of(world, MountRequest(folder="late"))

    assert mount.folder_id == late.id


async def test_dot_folders_of_the_user_and_the_project_are_added() -> None:
    world = World()
    await given(world)
    config = await folder(world, ".config")
    named = await folder(world, ".named")
    team = await folder(world, ".team", kind=OwnerKind.PROJECT)
    clash = await folder(world, ".config", kind=OwnerKind.PROJECT)  # the user's comes first
    old = await folder(world, ".old")
    old.trash("tidy up", world.clock())
    await world.record(ADMIN, old)
    await folder(world, ".private", owner_id=OTHER_USER)
    await folder(world, "plain")

    mounts = await mounts_of(world, MountRequest(folder=".named", path="/mnt/named"))

    assert [(m.folder_id, m.path, m.read_only) for m in mounts] == [
        (named.id, "/mnt/named", False),
        (config.id, "/home/work/.config", False),
        (team.id, "/home/work/.team", False),
    ]
    assert clash.id not in {m.folder_id for m in mounts}


async def test_a_named_mount_takes_a_dot_folders_path() -> None:
    world = World()
    await given(world)
    await folder(world, ".config")
    data = await folder(world, "data")

    mounts = await mounts_of(world, MountRequest(folder="data", path="/home/work/.config"))

    assert [m.folder_id for m in mounts] == [data.id]


async def test_two_mounts_at_one_path_are_refused() -> None:
    world = World()
    await given(world)
    await folder(world, "a")
    await folder(world, "b")

    rejected = refused(
        await create(world, MountRequest(folder="a", path="/home/work/b"), MountRequest(folder="b"))
    )

    assert rejected.code == Code.INVALID
    assert rejected.message == (
        "folders a and b are both mounted at /home/work/b: give one another path"
    )


async def test_one_folder_named_by_name_and_by_id_is_refused() -> None:
    world = World()
    await given(world)
    data = await folder(world, "data")

    rejected = refused(
        await create(world, MountRequest(folder="data"), MountRequest(folder=data.id, path="/x"))
    )

    assert (rejected.code, rejected.message) == (
        Code.INVALID,
        "folder data is mounted more than once",
    )


def test_the_spec_refuses_repeats_and_too_many() -> None:
    kernels = (KernelSpec(resources=slots()),)
    with pytest.raises(ValidationError, match="folder 'a' is mounted more than once"):
        SessionSpec(image=IMAGE, kernels=kernels, mounts=(MountRequest(folder="a"),) * 2)
    with pytest.raises(ValidationError, match="two mounts at /mnt/x"):
        SessionSpec(
            image=IMAGE, kernels=kernels,
            mounts=(MountRequest(folder="a", path="/mnt/x"),
                    MountRequest(folder="b", path="/mnt/x")),
        )  # fmt: skip
    with pytest.raises(ValidationError, match=f"at most {MAX_MOUNTS} mounts"):
        SessionSpec(
            image=IMAGE, kernels=kernels,
            mounts=tuple(MountRequest(folder=f"f{i}") for i in range(MAX_MOUNTS + 1)),
        )  # fmt: skip
    with pytest.raises(ValidationError, match="system directory"):
        MountRequest(folder="a", path="/etc/x")


async def test_every_kernel_allocation_carries_the_mounts_and_a_requeue_keeps_them() -> None:
    world = World()
    await given(world, KeypairPolicyLimits(max_containers_per_session=2))
    data = await folder(world, "data")
    spec_fields = {
        "type": SessionType.BATCH,
        "command": ("sleep", "60"),
        "requeue_on_node_loss": True,
    }
    cmd = world.request(slots(cpu=1, mem=1), mounts=(MountRequest(folder="data"),), **spec_fields)
    cmd = cmd.model_copy(
        update={"spec": cmd.spec.model_copy(update={"kernels": cmd.spec.kernels * 2})}
    )
    (decision,) = await world.commands.create_sessions([cmd], world.ctx)
    assert isinstance(decision, Accepted), decision
    session_id = session_id_for(cmd.command_id)
    want = (
        Mount(folder_id=data.id, name="data", volume="local", path="/home/work/data",
              read_only=False),
    )  # fmt: skip

    await world.decide()

    allocated = [e for _, e in world.stored(ResourcesAllocated) if e.session_id == session_id]
    assert len(allocated) == 2 and all(e.mounts == want for e in allocated)
    node_id = next(iter(world.state.sessions[session_id].session.placements.values()))
    await world.register("gpu-2", slots(cpu=8, mem=32, gpu=2), volumes=("local",))
    await world.decide()
    mark = world.last_seq()
    world.state.gone[node_id] = None
    await world.decide()
    assert world.stored(SessionRequeued, after=mark)
    await world.decide()
    again = [e for _, e in world.stored(ResourcesAllocated, after=mark)]
    assert len(again) == 2 and all(e.mounts == want for e in again)
    assert world.folded_again().sessions[session_id].session.mounts == want
