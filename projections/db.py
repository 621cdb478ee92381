"""The read-model database: engines for SQLite (default) or PostgreSQL, write transactions,
shared column types and the row writer the views use. Reads and writes no subjects."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Dialect,
    Table,
    and_,
    bindparam,
    delete,
    event,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import TypeDecorator

from schemas.resources import ResourceSlots

Row = Mapping[str, Any]
_WRITE = "jetyard_write"


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on both backends (SQLite keeps no offset and would hand back naive
    times, so two backends' dumps of the same view would differ)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: event times are timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


SLOTS = tuple(ResourceSlots.model_fields)  # cpu_milli, memory_bytes, gpu_hundredths


def slot_columns(prefix: str = "") -> list[Column[int]]:
    """Integer quanta columns for a ``ResourceSlots`` (exact sums, as in the scheduler)."""
    return [Column(f"{prefix}{name}", BigInteger, nullable=False) for name in SLOTS]


def slot_values(prefix: str, slots: ResourceSlots) -> dict[str, int]:
    return {f"{prefix}{name}": getattr(slots, name) for name in SLOTS}


def slots_from(row: Any, prefix: str = "") -> ResourceSlots:
    return ResourceSlots(**{name: getattr(row, f"{prefix}{name}") for name in SLOTS})


def normalise_url(url: str) -> str:
    """Accept plain ``sqlite:///`` and ``postgresql://`` URLs: the views need async drivers."""
    parsed = make_url(url)
    driver = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}.get(
        parsed.drivername, parsed.drivername
    )
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def create_engine(url: str) -> AsyncEngine:
    """An engine for the views. On SQLite: WAL (readers never block the projector), a busy
    timeout, and real transactions around DDL, because a table swap must be atomic."""
    url = normalise_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url)
    event.listen(engine.sync_engine, "connect", _sqlite_connect)
    event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    # The sqlite3 driver's legacy mode begins no transaction for DDL or SELECT: a swap of
    # tables would commit statement by statement. Take over BEGIN (SQLAlchemy's own recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # Writers take the lock up front: a deferred transaction that reads the position and then
    # writes could fail with SQLITE_BUSY when another writer (a rebuild's swap) got in between.
    immediate = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@asynccontextmanager
async def writing(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One write transaction: committed when the block ends, rolled back if it raises."""
    async with engine.connect() as conn:
        await conn.execution_options(**{_WRITE: True})
        async with conn.begin():
            yield conn


def quoted(conn: AsyncConnection, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


async def sync_rows(
    conn: AsyncConnection, table: Table, before: Mapping[Any, Row], after: Mapping[Any, Row]
) -> None:
    """Write the difference between two versions of some rows, keyed alike: insert the new,
    update the changed, delete the gone. Each kind is one executemany, whatever the count."""
    pk = list(table.primary_key.columns)
    inserts = [dict(row) for key, row in after.items() if key not in before]
    updates = [
        {**{f"pk_{c.name}": row[c.name] for c in pk}, **row}
        for key, row in after.items()
        if key in before and before[key] != row
    ]
    deletes = [
        {f"pk_{c.name}": before[key][c.name] for c in pk} for key in before if key not in after
    ]
    where = and_(*(c == bindparam(f"pk_{c.name}") for c in pk))
    if deletes:
        await conn.execute(delete(table).where(where), deletes)
    if updates:
        await conn.execute(table.update().where(where), updates)
    if inserts:
        await conn.execute(table.insert(), inserts)
