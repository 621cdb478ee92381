"""A resource group's fair-share tree as the scheduler weighs it, for people: every active
domain, project and user with its share, decayed usage and factor. Computed here with the
scheduler's own rule (``placement.fairshare``) from the views: the usage view's intervals (from
``ResourcesAllocated`` to ``ResourcesReleased``, the events and times the scheduler folds),
the sessions view's waiting owners, the nodes view's capacity and the directory's shares and
settings. Reads the views; no subjects.

The scheduler's accumulators and this closed form over intervals are the same sum; they part
only after a change of the group's half-life (the scheduler decays what came before it with the
old one, this with the current one) and by what ended more than 40 half-lives ago (2^-40).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from commands.authorisation import Principal, can_read_domain, can_read_user
from placement.fairshare import Account, Level, amounts, held_between, norm_of, tree, weigh
from schemas.resources import ResourceSlots
from services.gateway.context import Services

FORGOTTEN_AFTER = 40
"""Half-lives after which an interval's weight (2^-40) is left unread."""


class UnknownGroupError(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class FairShareLine:
    level: Literal["domain", "project", "user"]
    domain: str
    project_id: str | None
    user_id: str | None
    standing: Level


async def fair_share_lines(
    services: Services, me: Principal, group: str, now: datetime
) -> list[FairShareLine]:
    """Every active owner of ``group`` the caller may see: all for those who read every
    domain, their domain's for the others, and a user their own lines. ``UnknownGroupError``
    for a group neither created nor named by a node."""
    nodes = await services.views.nodes()
    if group not in services.directory.groups and all(n.resource_group != group for n in nodes):
        raise UnknownGroupError(group)
    settings = services.directory.group_scheduling(group).fair_share
    half_life = float(settings.usage_half_life_s)
    since = now - timedelta(seconds=FORGOTTEN_AFTER * half_life)
    at = now.timestamp()
    used: dict[Account, float] = {}
    for k in await services.views.usage.held_since(group, since):
        end = (k.ended_at or now).timestamp()
        rate = weigh(amounts(k.slots), settings)
        account = (k.domain, k.project_id, k.user_id)
        held = held_between(rate, k.allocated_at.timestamp(), end, at, half_life)
        used[account] = used.get(account, 0.0) + held
    waiting = await services.views.usage.waiting_owners(group)
    capacity = [0, 0, 0]
    for node in nodes:
        if node.resource_group == group and not (node.cordoned or node.lost):
            capacity[0] += node.capacity.cpu_milli
            capacity[1] += node.capacity.memory_bytes
            capacity[2] += node.capacity.gpu_hundredths
    total = ResourceSlots(
        cpu_milli=capacity[0], memory_bytes=capacity[1], gpu_hundredths=capacity[2]
    )
    found = tree(used, waiting, services.directory.fair_share, norm_of(total, settings))
    lines = [FairShareLine("domain", d, None, None, lv) for d, lv in found.domains.items()]
    lines += [FairShareLine("project", d, p, None, lv) for (d, p), lv in found.projects.items()]
    lines += [FairShareLine("user", d, p, u, lv) for (d, p, u), lv in found.users.items()]
    return sorted((x for x in lines if _sees(me, x)), key=_order)


def _sees(me: Principal, line: FairShareLine) -> bool:
    """As the tenancy objects themselves are seen (``commands.authorisation``): one's own
    domain's line, one's projects and oneself, and everything of a domain one reads."""
    if line.level == "user":
        return can_read_user(me, line.user_id or "", line.domain)
    if line.level == "project":
        mine = line.domain == me.domain and line.project_id in me.projects
        return mine or can_read_domain(me, line.domain)
    return line.domain == me.domain or can_read_domain(me, line.domain)


def _order(line: FairShareLine) -> tuple[str, str, str, int]:
    depth = {"domain": 0, "project": 1, "user": 2}[line.level]
    return (line.domain, line.project_id or "", line.user_id or "", depth)
