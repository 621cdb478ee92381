"""Registries and what their rescans found, given / when / then on an in-memory store: who may
add one, what it keeps (never a password: the secret's id), a rescan that finds nothing new
writes nothing, a moved tag records its new digest, a removed registry serves no pull, and the
directory says where a session's image comes from."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from commands import admin as a
from commands.outcome import Code
from events.domain.tenancy import (
    ImagePullPolicySet,
    ImageRegistered,
    ImageScanned,
    RegistryAdded,
    RegistryModified,
    RegistryRemoved,
)
from schemas.images import ImageSource, PullPolicy
from schemas.resources import ResourceSlots
from schemas.tenancy import registry_id_for
from services.scheduler.rules.create import refuse_registry
from tests.unit.tenancy.support import PID1, PID2, Org, by

URL = "http://registry.lab:5000"
IMAGE = "registry.lab:5000/team/torch:2.1"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
REG = registry_id_for("lab")


def add(**more: object) -> a.AddRegistry:
    fields = {"name": "lab", "url": URL, "username": "bot", "secret_id": "s1", **by(), **more}
    return a.AddRegistry(**fields)


def scan(digest: str = D1, name: str = IMAGE, **more: object) -> a.RecordScannedImage:
    fields = {"name": name, "registry": "lab", "digest": digest, "architecture": "amd64",
              "size_bytes": 1000, **more}  # fmt: skip
    return a.RecordScannedImage(**fields, **by())


async def test_a_superadmin_adds_a_registry_its_password_only_named(org: Org) -> None:
    w = org.world
    then = await w.when(add(projects=[PID1], **by(org.root.actor)))

    assert "registry lab added" in then.accepted(
        RegistryAdded(name="lab", url=URL, username="bot", secret_id="s1", projects=(PID1,))
    )
    registry = w.directory.registries[REG]
    assert registry.host == "registry.lab:5000" and registry.serves(PID1)
    assert not registry.serves(PID2) and not registry.serves(None)


async def test_only_a_superadmin_adds_or_changes_registries(org: Org) -> None:
    w = org.world
    (await w.when(add(**by(org.admin1.actor)))).rejected(Code.FORBIDDEN, "may not add registries")
    await w.given(add())
    change = a.ModifyRegistry(name="lab", url=URL, **by(org.alice.actor))
    (await w.when(change)).rejected(Code.FORBIDDEN, "may not change registries")


async def test_bad_settings_are_refused_before_anything_is_stored(org: Org) -> None:
    w = org.world
    with pytest.raises(ValidationError, match="url"):
        add(url="ftp://registry.lab")
    with pytest.raises(ValidationError, match="PEM"):
        add(ca_pem="not a certificate")
    (await w.when(add(projects=["nope"]))).rejected(Code.NOT_FOUND, "no project with the id nope")
    await w.given(add())
    (await w.when(add(secret_id="s2"))).rejected(Code.CONFLICT, "registry lab already exists")
    assert w.directory.registries[REG].settings.secret_id == "s1"  # the first one's, kept


async def test_a_change_records_the_whole_settings_and_a_repeat_nothing(org: Org) -> None:
    w = org.world
    await w.given(add())
    change = a.ModifyRegistry(name="lab", url=URL, username="bot", secret_id="s2", **by())
    assert "modified" in (await w.when(change)).accepted(
        RegistryModified(url=URL, username="bot", secret_id="s2")
    )
    assert "already had these settings" in (await w.when(change)).accepted()


async def test_a_removed_registry_serves_no_pull_until_added_again(org: Org) -> None:
    w = org.world
    await w.given(add(), scan())
    assert w.directory.image_source(IMAGE, PID1, "default") == ImageSource(
        registry=REG, reference=IMAGE, digest=D1, policy=PullPolicy.IF_NOT_PRESENT
    )
    gone = await w.when(a.RemoveRegistry(name="lab", reason="moved", **by()))
    assert gone.accepted(RegistryRemoved(reason="moved"))
    assert w.directory.image_source(IMAGE, PID1, "default") is None
    (await w.when(scan(D2))).rejected(Code.INVALID, "registry lab was removed")
    back = await w.when(add(secret_id="s3"))
    assert "added again" in back.accepted(
        RegistryAdded(name="lab", url=URL, username="bot", secret_id="s3")
    )


async def test_a_rescan_registers_once_then_records_only_what_moved(org: Org) -> None:
    w = org.world
    await w.given(add())
    first = await w.when(scan(min_resources=ResourceSlots(cpu_milli=500)))
    assert first.accepted(
        ImageRegistered(
            name=IMAGE,
            min_resources=ResourceSlots(cpu_milli=500),
            registry=REG,
            digest=D1,
            architecture="amd64",
            size_bytes=1000,
        )
    ).endswith("registered")
    same = await w.when(scan(min_resources=ResourceSlots(cpu_milli=500)))
    assert same.accepted().endswith("unchanged")  # nothing written twice for one digest
    moved = await w.when(scan(D2, min_resources=ResourceSlots(cpu_milli=500)))
    assert moved.accepted(
        ImageScanned(
            registry=REG,
            digest=D2,
            architecture="amd64",
            size_bytes=1000,
            min_resources=ResourceSlots(cpu_milli=500),
        )
    ).endswith("updated")
    image = w.directory.image(IMAGE)
    assert image is not None and image.digest == D2


async def test_a_rescan_records_only_images_of_that_registry_and_leaves_forgotten_ones(
    org: Org,
) -> None:
    w = org.world
    await w.given(add())
    (await w.when(scan(name="elsewhere.io/team/torch:2.1"))).rejected(
        Code.INVALID, "is not in registry lab (registry.lab:5000)"
    )
    await w.given(scan(), a.ForgetImage(name=IMAGE, **by()))
    assert (await w.when(scan(D2))).accepted().endswith("unchanged")
    assert w.directory.image(IMAGE) is None  # an administrator forgot it: it stays so


async def test_the_pull_policy_is_the_images_else_its_groups(org: Org) -> None:
    w = org.world
    await w.given(add(), scan())
    pinned = await w.when(a.SetImagePullPolicy(name=IMAGE, policy=PullPolicy.DIGEST, **by()))
    assert pinned.accepted(ImagePullPolicySet(policy=PullPolicy.DIGEST))
    source = w.directory.image_source(IMAGE, PID1, "default")
    assert source is not None and source.reference == f"registry.lab:5000/team/torch@{D1}"
    back = await w.when(a.SetImagePullPolicy(name=IMAGE, policy=None, **by()))
    assert back.accepted(ImagePullPolicySet(policy=None))
    source = w.directory.image_source(IMAGE, PID1, "default")
    assert source is not None and source.policy is PullPolicy.IF_NOT_PRESENT
    assert source.reference == IMAGE


async def test_an_image_of_a_registry_kept_to_a_project_runs_for_that_project_only(
    org: Org,
) -> None:
    w = org.world
    await w.given(add(projects=[PID1]), scan())

    assert refuse_registry(w.directory, IMAGE, PID1) is None
    refused = refuse_registry(w.directory, IMAGE, PID2)
    assert refused is not None and refused.code == Code.FORBIDDEN
    assert "registry lab, which your project may not use" in refused.message
    assert w.directory.image_source(IMAGE, PID2, "default") is None
    assert refuse_registry(w.directory, "some-local:1", PID2) is None  # no registry: as before
