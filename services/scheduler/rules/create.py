"""Create rules, pure (reads and writes no subjects): may this session be created?

What a create must pass before it is written: the owner's standing in the tenancy and the
keypair's pending limits, on the directory and the keypair's quota scope handed in
(``steps.create`` writes the creates that pass).
"""

from __future__ import annotations

from commands.directory import Directory
from commands.outcome import Code, Rejected
from commands.quota import Quota
from schemas.resources import ZERO, ResourceSlots
from schemas.session import SessionSpec
from schemas.tenancy import DefaultForUnspecified, SessionOwner, image_id_for
from services.scheduler.rules.admission import amount_text, hard_limit_exceeded


def refuse(directory: Directory, owner: SessionOwner, spec: SessionSpec) -> Rejected | None:
    """Why the owner may not create this session at all, or None. (The gateway resolved
    the owner from the authenticated principal; this checks it is still in good standing.)"""
    ak, name = owner.access_key, f"keypair {owner.access_key}"
    keypair = directory.keypairs.get(ak)
    if keypair is None or not keypair.active:
        return Rejected(Code.FORBIDDEN, f"{name} is unknown or deactivated")
    if keypair.user_id != owner.user_id or keypair.domain != owner.domain:
        return Rejected(Code.FORBIDDEN, f"{name} does not belong to the session's owner")
    user = directory.users.get(owner.user_id)
    if user is None or not user.active or user.domain != owner.domain:
        return Rejected(Code.FORBIDDEN, f"user {owner.user_id[:8]} is unknown or deactivated")
    project = directory.projects.get(owner.project_id)
    if project is None or not project.active or project.domain != owner.domain:
        return Rejected(Code.FORBIDDEN, f"project {owner.project_id[:8]} is unknown or inactive")
    if owner.project_id not in user.projects:
        return Rejected(
            Code.FORBIDDEN, f"user {owner.user_id[:8]} is not in project {project.name}"
        )
    domain = directory.domains.get(owner.domain)
    if domain is None or not domain.active:
        return Rejected(Code.FORBIDDEN, f"domain {owner.domain} is unknown or deactivated")
    group = spec.resource_group
    if group not in directory.allowed_groups(owner.domain, owner.project_id, ak):
        return Rejected(
            Code.FORBIDDEN, f"resource group {group} is not allowed for project {project.name}"
        )
    if spec.type not in directory.groups[group].allowed_session_types:
        return Rejected(
            Code.FORBIDDEN, f"resource group {group} does not allow {spec.type.value} sessions"
        )
    limits = directory.keypair_limits(ak)
    if limits is None:
        return Rejected(Code.FORBIDDEN, f"{name} has no resource policy")
    if spec.priority > limits.max_priority:
        return Rejected(
            Code.FORBIDDEN,
            f"priority {spec.priority} is above the most {name} may ask for "
            f"({limits.max_priority})",
        )
    if len(spec.kernels) > limits.max_containers_per_session:
        return Rejected(
            Code.QUOTA,
            f"{len(spec.kernels)} kernels is more than {name} allows per session "
            f"({limits.max_containers_per_session})",
        )
    over = hard_limit_exceeded(owner, spec.total, directory)
    if over is not None:
        return Rejected(Code.QUOTA, f"the session {over}")
    return None


def refuse_registry(directory: Directory, name: str, project_id: str) -> Rejected | None:
    """An image from a registry kept to some projects runs only for those projects' sessions,
    even on a node that already holds it (pulled there for another project)."""
    image = directory.image(name)
    registry = directory.registries.get(image.registry) if image is not None else None
    if registry is None or registry.removed or registry.serves(project_id):
        return None
    return Rejected(
        Code.FORBIDDEN,
        f"image {name} is in registry {registry.name}, which your project may not use",
    )


def refuse_image(directory: Directory, spec: SessionSpec) -> Rejected | None:
    """A registered image's rules: a forgotten image may not be used, and each kernel asks
    for at least the image's minimum and at most its maximum. (An image no administrator
    registered runs wherever an agent reports it, with no bounds of its own.)"""
    image = directory.images.get(image_id_for(spec.image))
    if image is None:
        return None
    if image.forgotten:
        return Rejected(
            Code.INVALID, f"image {spec.image} was unregistered by an administrator: choose another"
        )
    least, most = image.min_resources, image.max_resources
    for kernel in spec.kernels:
        asked = kernel.resources
        for slot, amount, minimum in (
            ("cpu", asked.cpu_milli, least.cpu_milli),
            ("memory", asked.memory_bytes, least.memory_bytes),
            ("gpu", asked.gpu_hundredths, least.gpu_hundredths),
        ):
            if amount < minimum:
                return Rejected(
                    Code.INVALID,
                    f"image {spec.image} needs at least {amount_text(slot, minimum)} {slot} "
                    f"per kernel; the session asks for {amount_text(slot, amount)}",
                )
        for slot, amount, limit in most.over(asked, DefaultForUnspecified.UNLIMITED):
            return Rejected(
                Code.INVALID,
                f"image {spec.image} allows at most {amount_text(slot, limit)} {slot} "
                f"per kernel; the session asks for {amount_text(slot, amount)}",
            )
    return None


def pending_full(
    directory: Directory,
    access_key: str,
    queue: Quota,
    need: ResourceSlots,
    added: tuple[int, ResourceSlots] = (0, ZERO),
) -> str | None:
    """Why the keypair's queue has no room for one more session, or None. ``added``: the
    sessions (count, slots) this decision already queued there."""
    limits = directory.keypair_limits(access_key)
    if limits is None:
        return None
    waiting = len(queue.queued) + added[0]
    if limits.max_pending_sessions is not None and waiting >= limits.max_pending_sessions:
        return (
            f"keypair {access_key}: {waiting}/{limits.max_pending_sessions} sessions waiting "
            "(max pending sessions)"
        )
    over = limits.max_pending_resource_slots.over(
        queue.queued_total + added[1] + need, DefaultForUnspecified.UNLIMITED
    )
    if over:
        slot, amount, limit = over[0]
        waiting_slots = f"{amount_text(slot, amount)}/{amount_text(slot, limit)}"
        return f"keypair {access_key}: {slot} {waiting_slots} would be waiting (max pending slots)"
    return None
