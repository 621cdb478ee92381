"""Folds ``ev.agent.*`` into the scheduler state: what each agent reports (hardware, resource
group, images, volumes), the agents whose node ledgers a pass must open or update, and kernel facts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from events.catalogue import CATALOGUE
from events.domain.agent import (
    AgentImagesChanged,
    AgentRegistered,
    ImagePullStarted,
    KernelExited,
    KernelFailedToStart,
    KernelStarted,
)
from events.envelope import StoredEvent
from services.scheduler.state.model import AgentInfo, Fact, StateModel

AGENT_EVENTS = frozenset(
    cls.event_name
    for cls in (
        AgentRegistered,
        AgentImagesChanged,
        KernelStarted,
        KernelExited,
        KernelFailedToStart,
        ImagePullStarted,
    )
)


def evolve(state: StateModel, event: StoredEvent) -> None:
    envelope = event.envelope
    if envelope.name not in AGENT_EVENTS:
        return  # agents may report more than the scheduler needs (or newer facts)
    agent_id = envelope.aggregate_id
    decoded = CATALOGUE.decode(envelope)
    if isinstance(decoded, AgentRegistered):
        _set_images(state, agent_id, decoded.images)
        state.agents[agent_id] = AgentInfo(
            hostname=decoded.hostname,
            capacity=decoded.capacity,
            images=frozenset(decoded.images),
            epoch=decoded.epoch,
            # AgentRegistered has no resource group yet: an agent that sends one anyway
            # is honoured, every other joins the default group.
            resource_group=str(
                envelope.payload.get("resource_group") or state.default_resource_group
            ),
            source=envelope,
            devices=decoded.devices,
            numa=decoded.numa,
            volumes=frozenset(decoded.volumes),
            address=decoded.address,
        )
        state.agents_to_check[agent_id] = None
    elif isinstance(decoded, AgentImagesChanged):
        known = state.agents.get(agent_id)
        if known is None:
            return
        _set_images(state, agent_id, decoded.images)
        state.agents[agent_id] = replace(known, images=frozenset(decoded.images))
    elif isinstance(decoded, KernelStarted | KernelExited | KernelFailedToStart | ImagePullStarted):
        state.facts.append(Fact(agent_id, decoded, envelope))
    state.ask_for_pass()


def _set_images(state: StateModel, agent_id: str, images: Iterable[str]) -> None:
    for holders in state.image_holders.values():
        holders.discard(agent_id)
    for image in images:
        state.image_holders.setdefault(image, set()).add(agent_id)
