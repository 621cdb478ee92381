"""Tenancy aggregate rules (domains, projects, people, policies, resource groups, images), as
given-events / when-command / then-events."""

from __future__ import annotations

import pytest

from commands.tenancy import (
    Domain,
    Image,
    ImageForgottenError,
    InvalidSettingsError,
    Keypair,
    Project,
    ResourceGroup,
    ResourcePolicy,
    User,
)
from events.domain.tenancy import (
    DomainCreated,
    DomainDeactivated,
    DomainModified,
    DomainReactivated,
    ImageForgotten,
    ImageRegistered,
    KeypairCreated,
    KeypairDeactivated,
    ProjectCreated,
    ResourceGroupAssociated,
    ResourceGroupCreated,
    ResourceGroupDisassociated,
    ResourceGroupModified,
    ResourcePolicyCreated,
    ResourcePolicyModified,
    UserCreated,
    UserDefaultKeypairSet,
    UserJoinedProject,
    UserLeftProject,
)
from schemas.resources import ResourceSlots
from schemas.session import SessionType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    AgentSelection,
    DeviceFill,
    GroupScheduling,
    HeadOfLine,
    KeypairPolicyLimits,
    PolicyKind,
    QueuePolicy,
    Role,
    ScopeKind,
    SlotLimits,
    StoragePolicyLimits,
    email_digest,
    image_id_for,
    policy_id_for,
    user_id_for,
)
from tests.unit.scenario import T0, at, envelope_of, given, then

NOW = at(60)
GPU2 = SlotLimits(gpu_hundredths=200)
DIGEST = email_digest("Ada@Example.org ", b"test-key")
USER_CREATED = UserCreated(
    domain="d1", role=Role.USER, email_digest=DIGEST, email_sealed="sealed", projects=("p1",)
)


def test_a_domain_is_created_modified_and_deactivated_once() -> None:
    domain = Domain.create("d1", "research", GPU2, T0)
    assert (domain.id, domain.name, domain.total_resource_slots, domain.active) == (
        "d1", "d1", GPU2, True,
    )  # fmt: skip
    assert then(domain) == [DomainCreated(description="research", total_resource_slots=GPU2)]

    domain = given(Domain, "d1", DomainCreated(description="research"))
    assert domain.modify("research", SlotLimits(), NOW) is False  # same settings: nothing
    assert domain.modify("ml", GPU2, NOW) is True
    assert domain.deactivate("closed", NOW) is True
    assert domain.deactivate("again", NOW) is False
    assert then(domain) == [
        DomainModified(description="ml", total_resource_slots=GPU2),
        DomainDeactivated(reason="closed"),
    ]
    assert domain.active is False


def test_reactivating_an_active_domain_records_nothing() -> None:
    domain = given(Domain, "d1", DomainCreated(), DomainDeactivated())
    assert domain.reactivate(NOW) is True
    assert domain.reactivate(NOW) is False
    assert then(domain) == [DomainReactivated()]


def test_a_project_keeps_its_domain_and_policy() -> None:
    project = Project.create("pid", "d1", "ml", "", GPU2, "small", T0)
    assert then(project) == [
        ProjectCreated(domain="d1", name="ml", total_resource_slots=GPU2, policy="small")
    ]
    project = given(Project, "pid", ProjectCreated(domain="d1", name="ml"))
    assert project.modify("", SlotLimits(), "default", NOW) is False
    assert project.deactivate("", NOW) and not project.deactivate("", NOW)
    assert project.active is False


def test_a_users_id_derives_from_the_email_digest() -> None:
    user = User.create("d1", Role.ADMIN, DIGEST, "sealed", "default", ["p1", "p1"], T0)
    assert user.id == user_id_for(DIGEST)
    assert user.projects == frozenset({"p1"})
    assert then(user) == [
        UserCreated(
            domain="d1", role=Role.ADMIN, email_digest=DIGEST, email_sealed="sealed",
            projects=("p1",),
        )
    ]  # fmt: skip


def test_joining_and_leaving_projects_are_set_operations() -> None:
    user = given(User, "u1", USER_CREATED)
    assert user.join("p1", NOW) is False  # already in it
    assert user.join("p2", NOW) is True
    assert user.leave("p9", NOW) is False
    assert user.leave("p1", NOW) is True
    assert then(user) == [UserJoinedProject(project_id="p2"), UserLeftProject(project_id="p1")]
    assert user.projects == frozenset({"p2"})


def test_setting_the_same_default_keypair_again_records_nothing() -> None:
    user = given(User, "u1", USER_CREATED, UserDefaultKeypairSet(access_key="AK1"))
    assert user.default_access_key == "AK1"
    assert user.set_default_keypair("AK1", NOW) is False
    assert user.set_default_keypair("AK2", NOW) is True
    assert then(user) == [UserDefaultKeypairSet(access_key="AK2")]


def test_a_keypair_is_deactivated_once() -> None:
    created = KeypairCreated(user_id="u1", domain="d1", secret_key_id="s1", rate_limit=100)
    keypair = given(Keypair, "AK1", created)
    assert (keypair.user_id, keypair.domain, keypair.rate_limit, keypair.active) == (
        "u1", "d1", 100, True,
    )  # fmt: skip
    assert keypair.modify("default", 100, NOW) is False
    assert keypair.deactivate("leaked", NOW) is True
    assert keypair.deactivate("leaked", NOW) is False
    assert then(keypair) == [KeypairDeactivated(reason="leaked")]


def test_policies_carry_the_limits_of_their_kind() -> None:
    limits = KeypairPolicyLimits(total_resource_slots=GPU2, max_concurrent_sessions=3)
    policy = ResourcePolicy.create(PolicyKind.KEYPAIR, "small", limits, None, T0)
    assert policy.id == policy_id_for(PolicyKind.KEYPAIR, "small") == "keypair-small"
    assert then(policy) == [
        ResourcePolicyCreated(kind=PolicyKind.KEYPAIR, name="small", keypair=limits)
    ]
    storage = StoragePolicyLimits(max_vfolder_count=5)
    user_policy = ResourcePolicy.create(PolicyKind.USER, "small", None, storage, T0)
    assert user_policy.storage == storage and user_policy.keypair is None


@pytest.mark.parametrize(
    ("kind", "keypair", "storage", "said"),
    [
        (PolicyKind.KEYPAIR, None, None, "keypair resource policy sets 'keypair' limits"),
        (PolicyKind.KEYPAIR, KeypairPolicyLimits(), StoragePolicyLimits(), "not 'storage'"),
        (PolicyKind.USER, KeypairPolicyLimits(), None, "user resource policy sets 'storage'"),
        (PolicyKind.PROJECT, None, None, "project resource policy sets 'storage'"),
    ],
)
def test_a_policy_with_the_wrong_limits_is_refused(
    kind: PolicyKind,
    keypair: KeypairPolicyLimits | None,
    storage: StoragePolicyLimits | None,
    said: str,
) -> None:
    with pytest.raises(InvalidSettingsError, match=said):
        ResourcePolicy.create(kind, "p", keypair, storage, T0)


def test_modifying_a_policy_keeps_its_kind_rules() -> None:
    created = ResourcePolicyCreated(
        kind=PolicyKind.KEYPAIR, name="p", keypair=KeypairPolicyLimits()
    )
    policy = given(ResourcePolicy, "keypair-p", created)
    assert policy.modify(KeypairPolicyLimits(), None, NOW) is False
    with pytest.raises(InvalidSettingsError):
        policy.modify(None, StoragePolicyLimits(), NOW)
    wider = KeypairPolicyLimits(max_pending_sessions=9)
    assert policy.modify(wider, None, NOW) is True
    assert then(policy) == [ResourcePolicyModified(keypair=wider)]


def test_resource_group_associations_are_sets_per_scope() -> None:
    group = given(ResourceGroup, "gpu", ResourceGroupCreated())
    assert group.associate(ScopeKind.PROJECT, "p1", NOW) is True
    assert group.associate(ScopeKind.PROJECT, "p1", NOW) is False
    assert group.associate(ScopeKind.KEYPAIR, "AK1", NOW) is True
    assert group.disassociate(ScopeKind.DOMAIN, "d1", NOW) is False
    assert group.disassociate(ScopeKind.KEYPAIR, "AK1", NOW) is True
    assert then(group) == [
        ResourceGroupAssociated(scope=ScopeKind.PROJECT, scope_id="p1"),
        ResourceGroupAssociated(scope=ScopeKind.KEYPAIR, scope_id="AK1"),
        ResourceGroupDisassociated(scope=ScopeKind.KEYPAIR, scope_id="AK1"),
    ]
    assert (group.projects, group.keypairs, group.domains) == (
        frozenset({"p1"}),
        frozenset(),
        frozenset(),
    )


def test_a_resource_group_is_not_associated_with_a_user() -> None:
    group = given(ResourceGroup, "gpu", ResourceGroupCreated())
    with pytest.raises(InvalidSettingsError, match="domain, project or keypair, not a user"):
        group.associate(ScopeKind.USER, "u1", NOW)


def test_a_resource_group_allows_at_least_one_session_type() -> None:
    with pytest.raises(InvalidSettingsError, match="at least one session type"):
        ResourceGroup.create("g", "", GroupScheduling(), [], T0)
    drf = GroupScheduling(queue_policy=QueuePolicy.DRF)
    group = ResourceGroup.create("g", "", drf, [SessionType.BATCH] * 2, T0)
    assert group.allowed_session_types == (SessionType.BATCH,)


STRICT = GroupScheduling(
    queue_policy=QueuePolicy.LIFO,
    agent_selection=AgentSelection.ROUND_ROBIN,
    head_of_line=HeadOfLine.BLOCK,
    starvation_after_s=0,
    fragmentation_guard=False,
    device_fill=DeviceFill.EVENLY,
)


def test_a_resource_group_is_created_with_all_its_scheduling_settings() -> None:
    group = ResourceGroup.create("g", "gpus", STRICT, [SessionType.BATCH], T0)
    assert group.scheduling == STRICT
    assert (group.queue_policy, group.agent_selection) == (
        QueuePolicy.LIFO, AgentSelection.ROUND_ROBIN,
    )  # fmt: skip
    assert then(group) == [
        ResourceGroupCreated(
            description="gpus", allowed_session_types=(SessionType.BATCH,), scheduling=STRICT
        )
    ]  # fmt: skip


def test_events_from_before_the_scheduling_settings_load_with_their_defaults() -> None:
    """A group created and modified before head-of-line, starvation, the fragmentation guard
    and device fill existed: its events on the log hold none of them."""
    created = {"description": "", "queue_policy": "drf", "agent_selection": "dispersed",
               "allowed_session_types": ["interactive", "batch"]}  # fmt: skip
    modified = {**created, "queue_policy": "lifo"}
    v1 = {"schema_version": 1}  # as stored then
    shape = ResourceGroupModified(
        description="", allowed_session_types=(), scheduling=GroupScheduling()
    )
    envelopes = [
        envelope_of("old", 1, ResourceGroupCreated(), T0).model_copy(
            update={"payload": created, **v1}
        ),
        envelope_of("old", 2, shape, NOW).model_copy(update={"payload": modified, **v1}),
    ]
    assert "head_of_line" not in envelopes[0].payload
    first = ResourceGroup.rehydrate(envelopes[:1])
    assert first is not None
    assert first.scheduling == GroupScheduling(
        queue_policy=QueuePolicy.DRF, agent_selection=AgentSelection.DISPERSED
    )
    group = ResourceGroup.rehydrate(envelopes)
    assert group is not None
    assert group.scheduling == GroupScheduling(
        queue_policy=QueuePolicy.LIFO,
        agent_selection=AgentSelection.DISPERSED,
        head_of_line=HeadOfLine.BACKFILL,
        starvation_after_s=300,
        fragmentation_guard=True,
        device_fill=DeviceFill.FILL,
    )


def test_modifying_a_resource_group_records_its_settings_whole_once() -> None:
    group = given(ResourceGroup, "g", ResourceGroupCreated(description="gpus"))
    assert group.scheduling == CREATED_SCHEDULING  # dispersed unless told otherwise
    types = tuple(SessionType)
    assert group.modify("gpus", CREATED_SCHEDULING, types, NOW) is False  # same: nothing
    assert group.modify("gpus", STRICT, types, NOW) is True
    assert group.modify("gpus", STRICT, types, NOW) is False
    guarded = STRICT.model_copy(update={"fragmentation_guard": True})
    assert group.modify("gpus", guarded, types, NOW) is True
    assert then(group) == [
        ResourceGroupModified(description="gpus", allowed_session_types=types, scheduling=STRICT),
        ResourceGroupModified(description="gpus", allowed_session_types=types,
                              scheduling=guarded),
    ]  # fmt: skip
    assert group.scheduling == guarded


def test_a_forgotten_image_comes_back_only_by_registering_it_again() -> None:
    name = "python:3.12"
    image = given(Image, image_id_for(name), ImageRegistered(name=name), ImageForgotten())
    assert image.forgotten is True
    assert image.forget("again", NOW) is False
    with pytest.raises(ImageForgottenError, match="register it again"):
        image.modify(ResourceSlots(), SlotLimits(), NOW)
    small = ResourceSlots.of(cpu=1)
    assert image.register_again(small, SlotLimits(), NOW) is True
    assert image.register_again(small, SlotLimits(), NOW) is False  # registered: unchanged
    assert then(image) == [ImageRegistered(name=name, min_resources=small)]
    assert image.forgotten is False and image.min_resources == small
