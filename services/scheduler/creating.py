"""What a create must pass before it is written: the owner's standing in the tenancy and the
keypair's pending limits (``refuse``, ``pending_full``, pure); and one keypair's share of a run
of creates (``QueueRun``), which takes the run's sessions into the keypair's queue with one
event. Reads the folded directory and quota scopes handed in; writes nothing itself.
"""

from __future__ import annotations

from datetime import datetime

from commands.aggregate import Aggregate
from commands.directory import Directory
from commands.outcome import Code, Rejected
from commands.quota import Quota
from commands.session import Session
from events.envelope import Cause
from schemas.resources import ZERO, ResourceSlots
from schemas.session import SessionSpec
from schemas.tenancy import DefaultForUnspecified, SessionOwner
from services.scheduler.admission import amount_text, hard_limit_exceeded
from services.scheduler.workspace import Workspace


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


class QueueRun:
    """One keypair's creates in a run, and its queue: flushed as one unit (a session is never
    stored without its queue place)."""

    def __init__(self, queue: Quota) -> None:
        self.queue = queue
        self.parts: list[tuple[Cause, Aggregate]] = []
        self.sessions: dict[str, ResourceSlots] = {}
        self.added: tuple[int, ResourceSlots] = (0, ZERO)
        """What the run queued that its queue does not hold yet: pending limits count it."""

    def add(self, cause: Cause, session: Session, slots: ResourceSlots) -> None:
        self.parts.append((cause, session))
        self.sessions[session.id] = slots
        self.added = (self.added[0] + 1, self.added[1] + slots)

    def flush(self, space: Workspace, now: datetime) -> None:
        if not self.parts:
            return
        # The queue event names the first create of the unit as its cause.
        self.queue.queue(self.sessions, now)
        space.joint([*self.parts, (self.parts[0][0], self.queue)])
        self.parts, self.sessions, self.added = [], {}, (0, ZERO)
