"""What the scheduler asks its folded state (no subjects: reads only what the fold kept): what
is known, which partitions have work, when the next pass is due, and the work a pass takes.
"""

from __future__ import annotations

from datetime import datetime

from events.writes import AggregateRef
from services.scheduler.state.model import StateModel, Work


class Questions(StateModel):
    """The state's answers to the service, the command handlers and the pass steps."""

    # ---- questions -----------------------------------------------------------------------

    def image_known(self, image: str) -> bool:
        return bool(self.image_holders.get(image))

    def is_broken(self, ref: AggregateRef) -> bool:
        return ref.subject in self.broken

    def keypair_active(self, access_key: str) -> bool:
        keypair = self.directory.keypairs.get(access_key)
        return keypair is None or keypair.active

    # ---- work for a pass -----------------------------------------------------------------

    def take_work(self) -> Work:
        work = Work(list(self.agents_to_check), list(self.facts))
        self.agents_to_check.clear()
        self.facts.clear()
        return work

    def has_facts(self) -> bool:
        """Kernel facts wait to be decided (a kernel started, exited or failed)."""
        return bool(self.facts)

    def has_placement_work(self) -> bool:
        """Sessions wait to be admitted or placed."""
        return any(self.unadmitted.values()) or any(self.waiting.values())

    def give_back(self, work: Work) -> None:
        """Put taken work back in front (facts keep their order; deciding them is idempotent)."""
        self.agents_to_check = dict.fromkeys([*work.agents, *self.agents_to_check])
        self.facts.extendleft(reversed(work.facts))

    def admission_domains(self) -> set[str]:
        """Domains with admission work: sessions to admit, reservations to release, or
        waiting sessions whose keypair was deactivated."""
        found = {domain for domain, queue in self.unadmitted.items() if queue}
        for session_id in self.releasable:
            tracked = self.sessions.get(session_id)
            if tracked is not None and tracked.session.owner is not None:
                found.add(tracked.session.owner.domain)
        for queue in self.waiting.values():
            for session_id in queue:
                owner = self.sessions[session_id].session.owner
                if owner is not None and not self.keypair_active(owner.access_key):
                    found.add(owner.domain)
        for agent_id in self.gone:  # a lost node's sessions end, and their quota goes back
            node = self.nodes.get(agent_id)
            for held in node.allocations.values() if node is not None else ():
                tracked = self.sessions.get(held.session_id)
                if tracked is not None and tracked.session.owner is not None:
                    found.add(tracked.session.owner.domain)
        return found

    def placement_groups(self) -> set[str]:
        """Resource groups with sessions to place now, or soon (once admitted)."""
        found = {group for group, queue in self.waiting.items() if queue}
        for queue in self.unadmitted.values():
            for session_id in queue:
                found.add(self.sessions[session_id].session.spec.resource_group)
        return found

    # ---- timers --------------------------------------------------------------------------

    def wake_at(self, when: datetime) -> None:
        """Ask for a pass at ``when`` (the earliest asked for wins)."""
        if self.next_wake is None or when < self.next_wake:
            self.next_wake = when

    def due(self) -> datetime | None:
        """When the next pass must run by itself: a start time noted by the last pass, or the
        earliest timeout of a running session."""
        due = self.next_wake
        for session_id in self.timed:
            deadline = self.sessions[session_id].session.timeout_at
            if deadline is not None and (due is None or deadline < due):
                due = deadline
        return due
