"""The GraphQL usage queries: resources x time per session, user, project, domain or resource
group over a range (``docs/usage.md``), answered by ``report.usage_report``, the same
function as ``GET /usage.csv``; and a group's fair-share tree (``fair_share``). The caller's
role narrows both. Reads the usage view; writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from projections.usage.accounting import UsageGroup as Group
from projections.usage.accounting import UsageLine
from services.gateway.context import Context, ctx_of, who
from services.gateway.usage.fair_share import (
    FairShareLine,
    UnknownGroupError,
    fair_share_lines,
)
from services.gateway.usage.report import UsageAsk, UsageInputError, UsageReport, usage_report


@strawberry.enum(name="UsageGroup", description="What a usage report sums per row.")
class UsageGroup(Enum):
    SESSION = Group.SESSION.value
    USER = Group.USER.value
    PROJECT = Group.PROJECT.value
    DOMAIN = Group.DOMAIN.value
    RESOURCE_GROUP = Group.RESOURCE_GROUP.value


@strawberry.type(description="One GPU's use by a row's group.")
class GpuDeviceUsage:
    node: str = strawberry.field(description="The node's id.")
    device: str = strawberry.field(description="The device's uuid.")
    seconds: float = strawberry.field(
        description="Seconds it was held, whole or a share (summed over the kernels holding it)."
    )
    share_seconds: float = strawberry.field(
        description="Each holding kernel's share of the device x its seconds."
    )


@strawberry.type(description="One group's use over the report's range.")
class UsageRow:
    key: str = strawberry.field(
        description="The session's, user's or project's id; the domain's or resource group's name."
    )
    name: str | None = strawberry.field(
        description="The session's name, the user's email (if you may see it), the project's "
        "name, the domain's or resource group's name."
    )
    cpu_core_seconds: float
    memory_gib_seconds: float
    gpu_seconds: float = strawberry.field(
        description="GPU-equivalents x seconds: a 0.5 share for 100 s is 50."
    )
    gpu_device_seconds: list[GpuDeviceUsage]
    sessions: int = strawberry.field(description="Sessions that accrued use in the range.")

    @classmethod
    def of(cls, line: UsageLine) -> UsageRow:
        return cls(
            key=line.key,
            name=line.name,
            cpu_core_seconds=line.cpu_core_seconds,
            memory_gib_seconds=line.memory_gib_seconds,
            gpu_seconds=line.gpu_seconds,
            gpu_device_seconds=[
                GpuDeviceUsage(
                    node=d.node_id,
                    device=d.device,
                    seconds=d.seconds,
                    share_seconds=d.share_seconds,
                )
                for d in line.devices
            ],
            sessions=line.sessions,
        )


@strawberry.type(name="UsageReport")
class UsageReportType:
    from_: datetime = strawberry.field(name="from")
    to: datetime
    group_by: UsageGroup
    rows: list[UsageRow]

    @classmethod
    def of(cls, report: UsageReport) -> UsageReportType:
        return cls(
            from_=report.start,
            to=report.end,
            group_by=UsageGroup(report.group_by.value),
            rows=[UsageRow.of(line) for line in report.lines],
        )


@strawberry.type(description="One domain, project or user of a fair-share tree, in one group.")
class FairShareRow:
    level: str = strawberry.field(description="domain | project | user")
    domain: str
    project_id: strawberry.ID | None
    user_id: strawberry.ID | None
    share: int = strawberry.field(description="as given (createDomain ... fairShare)")
    normalized_share: float = strawberry.field(
        description="S: the product down the tree of share / the active siblings' shares"
    )
    usage: float = strawberry.field(
        description="resource-seconds, weighted per slot and decayed with the half-life"
    )
    normalized_usage: float = strawberry.field(
        description="usage over the group's weighted capacity held forever"
    )
    factor: float = strawberry.field(
        description="2^(-normalizedUsage/normalizedShare): 1 unused, lower used more"
    )

    @classmethod
    def of(cls, line: FairShareLine) -> FairShareRow:
        level = line.standing
        return cls(
            level=line.level, domain=line.domain,
            project_id=None if line.project_id is None else strawberry.ID(line.project_id),
            user_id=None if line.user_id is None else strawberry.ID(line.user_id),
            share=level.share, normalized_share=level.share_norm, usage=level.usage,
            normalized_usage=level.usage_norm, factor=level.factor,
        )  # fmt: skip


@strawberry.type
class UsageQuery:
    @strawberry.field(
        description="A resource group's fair-share tree now: every active domain, project "
        "and user (with usage or a session waiting) with its share, decayed usage and factor, "
        "as the scheduler weighs them (docs/scheduling.md, Fair share). All for those who read "
        "every domain, your domain's for an admin, monitor or auditor, your own lines for a user."
    )
    async def fair_share(self, info: Info[Context, Any], resource_group: str) -> list[FairShareRow]:
        try:
            lines = await fair_share_lines(
                ctx_of(info).services, who(info), resource_group, datetime.now(UTC)
            )
        except UnknownGroupError:
            raise GraphQLError(
                f"there is no resource group {resource_group[:80]!r}",
                extensions={"code": "not-found"},
            ) from None
        return [FairShareRow.of(line) for line in lines]

    @strawberry.field(
        description="Resources x time in [from, to) per session, user, project, domain or "
        "resource group: yours (a user), your domain's (an admin or monitor), or all (a "
        "superadmin). Running kernels count up to now. At most 366 days."
    )
    async def usage(
        self,
        info: Info[Context, Any],
        from_: Annotated[datetime, strawberry.argument(name="from")],
        to: datetime,
        group_by: UsageGroup,
        domain: str | None = None,
        project_id: Annotated[
            strawberry.ID | None,
            strawberry.argument(description="a project's id, or its name in the domain"),
        ] = None,
        user_id: strawberry.ID | None = None,
        resource_group: str | None = None,
    ) -> UsageReportType:
        me = who(info)
        ask = UsageAsk(
            start=from_, end=to, group_by=Group(group_by.value), domain=domain,
            project=None if project_id is None else str(project_id),
            user_id=None if user_id is None else str(user_id), resource_group=resource_group,
        )  # fmt: skip
        try:
            report = await usage_report(ctx_of(info).services, me, ask, datetime.now(UTC))
        except UsageInputError as exc:
            raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
        return UsageReportType.of(report)
