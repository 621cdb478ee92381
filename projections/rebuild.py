"""Rebuild the views from the first event into shadow tables, then swap them in at once.

Reads ``ev.>`` from seq 1 (through ``Projector``). The shadow tables live in the same database
as the live ones, named ``<table>__r<8 hex>`` (indexes too, so the names never collide); once
they hold the log up to its end as read at the start, one transaction drops the live tables,
renames the shadows into their place and moves the positions. Both SQLite and PostgreSQL run
DDL inside transactions, so readers see the old view or the new one, never a mix, and the same
code serves both backends (a separate SQLite file swapped by rename would leave every open
connection reading the old file). A projector running meanwhile is serialised with the swap by
the position rows it locks, and reads again from the swapped-in position when that lies behind
it. One rebuild at a time: a new one first drops what an interrupted one left behind.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Sequence

from sqlalchemy import Connection, inspect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from events.bus import Bus, connect
from projections.base import (
    SHADOW_MARK,
    View,
    positions,
    positions_metadata,
    read_positions,
    write_position,
)
from projections.db import create_engine, quoted, writing
from projections.runner import Projector
from projections.settings import ProjectionSettings
from projections.views import VIEWS
from schemas.settings import NatsSettings

log = logging.getLogger(__name__)


async def rebuild(
    engine_url: str, bus: Bus, views: Sequence[View] = VIEWS, *, batch: int = 256
) -> int:
    """Rebuild ``views`` from seq 1 and swap them in; returns the position swapped in."""
    engine = create_engine(engine_url)
    try:
        return await rebuild_on(engine, bus, views, batch=batch)
    finally:
        await engine.dispose()


async def rebuild_on(
    engine: AsyncEngine, bus: Bus, views: Sequence[View] = VIEWS, *, batch: int = 256
) -> int:
    await drop_shadows(engine, views)
    suffix = f"{SHADOW_MARK}{secrets.token_hex(4)}"
    shadow = Projector(engine, bus, views, suffix=suffix, batch=batch)
    await shadow.start()
    try:
        target = await shadow.catch_up()
    finally:
        await shadow.close()
    log.info("views %s rebuilt up to seq %d; swapping in", [v.name for v in views], target)
    await swap(engine, views, suffix, shadow)
    return shadow.position


async def swap(engine: AsyncEngine, views: Sequence[View], suffix: str, shadow: Projector) -> None:
    """Put the shadow tables and their positions in place of the live ones, atomically."""
    async with writing(engine) as conn:
        # Lock the live position rows first, as the projector does, so that a projector's
        # batch commits wholly before the swap or runs wholly after it.
        await read_positions(conn, [v.name for v in views], lock=True)
        for view in views:
            for live, built in zip(view.table_names(), view.table_names(suffix), strict=True):
                await conn.exec_driver_sql(f"DROP TABLE IF EXISTS {quoted(conn, live)}")
                await conn.exec_driver_sql(
                    f"ALTER TABLE {quoted(conn, built)} RENAME TO {quoted(conn, live)}"
                )
            await write_position(conn, view.name, view.version, shadow.positions[view.name])
            await conn.execute(positions.delete().where(positions.c.view == shadow.key(view)))


async def drop_shadows(engine: AsyncEngine, views: Sequence[View]) -> None:
    """Drop the shadow tables and positions an interrupted rebuild left behind."""
    async with writing(engine) as conn:
        await conn.run_sync(positions_metadata.create_all)
        existing = await conn.run_sync(_table_names)
        for view in views:
            for live in view.table_names():
                pattern = re.compile(re.escape(live) + re.escape(SHADOW_MARK) + "[0-9a-f]{8}")
                for name in filter(pattern.fullmatch, existing):
                    await _drop(conn, name)
            await conn.execute(
                positions.delete().where(positions.c.view.like(f"{view.name}{SHADOW_MARK}%"))
            )


def _table_names(conn: Connection) -> list[str]:
    return inspect(conn).get_table_names()


async def _drop(conn: AsyncConnection, name: str) -> None:
    log.info("dropping %s, left by an interrupted rebuild", name)
    await conn.exec_driver_sql(f"DROP TABLE IF EXISTS {quoted(conn, name)}")


async def rebuild_views(settings: ProjectionSettings, nats_settings: NatsSettings) -> int:
    """``jetyard projections rebuild``: rebuild every view and swap it in; the exit status."""
    bus = await connect(nats_settings, name="jetyard-projections-rebuild")
    try:
        position = await rebuild(settings.database_url, bus, batch=settings.batch)
    finally:
        await bus.close()
    print(f"views {', '.join(v.name for v in VIEWS)} rebuilt up to seq {position} and swapped in")
    return 0
