"""The gateway's ``Views`` over the projections' SQL tables (SQLite or PostgreSQL)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from projections import queries
from projections.db import create_engine
from projections.runner import create_tables
from projections.settings import ProjectionSettings
from services.gateway.views import NodeRow, SessionPage, SessionRow, StatusChangeRow


def _session(view: queries.SessionView) -> SessionRow:
    r = view.record
    return SessionRow(
        id=r.id,
        seq=r.last_seq,
        name=r.name,
        status=r.status.value,
        reason=r.status_reason,
        type=r.type,
        image=r.image,
        cpu_milli=r.cpu_milli,
        memory_bytes=r.memory_bytes,
        gpu_hundredths=r.gpu_hundredths,
        command=list(r.command) if r.command is not None else None,
        node_ids=list(r.node_ids),
        kernel_ids=list(r.kernel_ids),
        exit_code=r.exit_code,
        created_at=r.created_at,
        updated_at=r.updated_at,
        history=[StatusChangeRow(h.seq, h.status.value, h.reason, h.at) for h in view.history],
        access_key=r.access_key,
        user_id=r.user_id,
        project_id=r.project_id,
        domain=r.domain,
        priority=r.priority,
        admitted=r.admitted,
        result=r.result,
        depends_on=r.depends_on,
        starts_at=r.starts_at,
        timeout_s=r.timeout_s,
        cluster_mode=r.cluster_mode,
    )


class SqlViews:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    @classmethod
    async def open(cls, settings: ProjectionSettings, bus: Bus) -> SqlViews:
        engine = create_engine(settings.database_url)
        # The projector may not have run yet: empty tables answer "nothing yet" instead of
        # failing, and /healthz says "not caught up" until it has.
        await create_tables(engine)
        return cls(engine)

    async def sessions(
        self,
        *,
        first: int,
        after: str | None,
        status: str | None,
        domain: str | None = None,
        user_id: str | None = None,
    ) -> SessionPage:
        page = await queries.list_sessions(
            self._engine,
            first=first,
            after=after,
            status=status,
            domain=domain,
            user_id=user_id,
            with_history=True,
        )
        return SessionPage([_session(v) for v in page.rows], page.cursors, page.has_next)

    async def session(self, session_id: str) -> SessionRow | None:
        view = await queries.get_session(self._engine, session_id)
        return None if view is None else _session(view)

    async def nodes(self) -> list[NodeRow]:
        return [
            NodeRow(
                id=n.id,
                hostname=n.hostname,
                resource_group=n.resource_group,
                cpu_milli=n.capacity.cpu_milli,
                memory_bytes=n.capacity.memory_bytes,
                gpu_hundredths=n.capacity.gpu_hundredths,
                used_cpu_milli=n.used.cpu_milli,
                used_memory_bytes=n.used.memory_bytes,
                used_gpu_hundredths=n.used.gpu_hundredths,
                allocations=n.allocations,
                cordoned=n.cordoned,
                lost=n.lost,
            )
            for n in await queries.list_nodes(self._engine)
        ]

    async def position(self) -> int:
        return await queries.position(self._engine)

    async def wait_for(self, seq: int, timeout: float) -> bool:
        return await queries.wait_for_position(self._engine, seq, timeout)

    async def close(self) -> None:
        await self._engine.dispose()
