"""What the gateway reads of the vfolders view (SQL), behind one small protocol whose answers
are the projection's own read shape (``projections.folders.tables.FolderRecord``). Reads the
``vfolders``, ``vfolder_members`` and ``vfolder_mounts`` tables; no subjects."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from projections.folders import queries as vfolder_queries
from projections.folders.queries import FolderPage, Scope
from projections.folders.tables import FolderRecord
from schemas.vfolder import FolderStatus, OwnerKind


class FolderViews(Protocol):
    async def page(
        self,
        *,
        scope: Scope,
        first: int,
        after: str | None,
        owner_kind: OwnerKind | None = None,
        owner_id: str | None = None,
        status: FolderStatus | None = None,
        name: str | None = None,
    ) -> FolderPage: ...

    async def get(self, folder_id: str) -> FolderRecord | None: ...

    async def named(
        self,
        name: str,
        *,
        owners: Collection[tuple[OwnerKind, str]] = (),
        shared_with: str | None = None,
    ) -> list[FolderRecord]: ...

    async def owner_bytes(self, owner_kind: OwnerKind, owner_id: str) -> int: ...

    async def mounted_by(self, folder_ids: Sequence[str]) -> dict[str, list[str]]: ...


class SqlFolderViews:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def page(
        self,
        *,
        scope: Scope,
        first: int,
        after: str | None,
        owner_kind: OwnerKind | None = None,
        owner_id: str | None = None,
        status: FolderStatus | None = None,
        name: str | None = None,
    ) -> FolderPage:
        return await vfolder_queries.list_folders(
            self._engine, scope=scope, first=first, after=after, owner_kind=owner_kind,
            owner_id=owner_id, status=status, name=name,
        )  # fmt: skip

    async def get(self, folder_id: str) -> FolderRecord | None:
        return await vfolder_queries.get_folder(self._engine, folder_id)

    async def named(
        self,
        name: str,
        *,
        owners: Collection[tuple[OwnerKind, str]] = (),
        shared_with: str | None = None,
    ) -> list[FolderRecord]:
        return await vfolder_queries.folders_named(
            self._engine, name, owners=owners, shared_with=shared_with
        )

    async def owner_bytes(self, owner_kind: OwnerKind, owner_id: str) -> int:
        return await vfolder_queries.owner_bytes(self._engine, owner_kind, owner_id)

    async def mounted_by(self, folder_ids: Sequence[str]) -> dict[str, list[str]]:
        return await vfolder_queries.mounted_by(self._engine, folder_ids)
