"""Node commands (``cmd.node.cordon``, ``cmd.node.drain``, ``cmd.node.uncordon``,
``cmd.node.purge_image``, ``cmd.node.remove``) decided on
the folded state: each is one guarded write to ``ev.node.<id>`` through the unit of work. A
drain's deadline is kept on the ledger; a pass stops what still runs when it comes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from commands.node.messages import CordonNode, DrainNode, PurgeImage, RemoveNode, UncordonNode
from commands.node.rules import NodeBusyError
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import HandlerContext
from commands.unit_of_work import UnitOfWork, answer
from services.scheduler.state import SchedulerState
from services.scheduler.workspace import Workspace

NodeCommand = CordonNode | DrainNode | UncordonNode | PurgeImage | RemoveNode


@dataclass
class NodeCommands:
    state: SchedulerState
    wake: asyncio.Event
    attempts: int = 5
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def cordon_node(self, cmd: CordonNode, ctx: HandlerContext) -> Decision:
        return await self._decide(cmd, ctx)

    async def drain_node(self, cmd: DrainNode, ctx: HandlerContext) -> Decision:
        return await self._decide(cmd, ctx)

    async def uncordon_node(self, cmd: UncordonNode, ctx: HandlerContext) -> Decision:
        return await self._decide(cmd, ctx)

    async def purge_image(self, cmd: PurgeImage, ctx: HandlerContext) -> Decision:
        return await self._decide(cmd, ctx)

    async def remove_node(self, cmd: RemoveNode, ctx: HandlerContext) -> Decision:
        return await self._decide(cmd, ctx)

    async def _decide(self, cmd: NodeCommand, ctx: HandlerContext) -> Decision:
        now = ctx.now()

        def decide(space: Workspace) -> Decision:
            node = space.node(cmd.node_id)
            if node is None:
                return Rejected(Code.NOT_FOUND, f"there is no node {cmd.node_id}")
            name = node.hostname or node.id
            if isinstance(cmd, RemoveNode):
                try:
                    changed = node.remove(cmd.reason, now)
                except NodeBusyError as exc:
                    return Rejected(Code.CONFLICT, str(exc))
                if not changed:
                    return Accepted((node.id,), (), f"node {name} was removed already")
                space.unit(cmd.cause(), node)
                return Accepted((node.id,), (), f"node {name} removed from the cluster")
            if node.removed:
                return Rejected(Code.INVALID, f"node {name} was removed from the cluster")
            if isinstance(cmd, CordonNode):
                changed, done = node.cordon(cmd.reason, now), "cordoned"
            elif isinstance(cmd, UncordonNode):
                changed, done = node.uncordon(cmd.reason, now), "uncordoned"
            elif isinstance(cmd, PurgeImage):
                if node.lost:
                    return Rejected(Code.INVALID, f"node {name} is lost: its agent cannot act")
                node.request_purge(cmd.reference, cmd.reason, now)
                space.unit(cmd.cause(), node)
                return Accepted((node.id,), (), f"node {name} asked to purge {cmd.reference}")
            else:
                deadline = None
                if cmd.deadline_s is not None:
                    deadline = now + timedelta(seconds=cmd.deadline_s)
                changed, done = node.drain(cmd.reason, deadline, now), "draining"
            if not changed:
                return Accepted((node.id,), (), f"node {name} is {done} already")
            space.unit(cmd.cause(), node)
            return Accepted((node.id,), (), f"node {name} {done}")

        work = UnitOfWork(
            ctx.store, self.state, lambda: Workspace(self.state),
            attempts=self.attempts, lock=self.writing,
        )  # fmt: skip
        decided = answer(*await work.run(decide, what=f"{cmd.command_name()} {cmd.node_id}"))
        self.wake.set()  # a drain's deadline, or an uncordoned node's room, is a pass's work
        return decided
