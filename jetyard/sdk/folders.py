"""Virtual folders from Python: the gateway's folder queries and mutations as typed calls,
and each folder's files through the storage data plane (``jetyard.sdk.files``) with
tokens from ``vfolderAccess``. Reached as ``AsyncClient.folders`` (``Client.folders`` blocks):

    async with AsyncClient(endpoint, access_key, secret_key) as jy:
        await jy.folders.create("data")
        await jy.folders.upload("data", "train.csv", progress=print)
        await jy.folders.download("data", "results", "results")

A folder is named by its id or its name (the caller's own, then their projects', then one
shared with them). Every refusal, of the gateway or of the data plane, is a ``JetyardError``
with the server's message.
"""

from __future__ import annotations

import asyncio
import builtins
from pathlib import Path
from typing import Any

import httpx

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.files import FolderFiles
from jetyard.sdk.models import FOLDER_FIELDS, VFolder
from jetyard.sdk.transfer import Access, Entry, Progress
from jetyard.sdk.wire import Caller, arguments, literal, past

APPEAR_WAIT_S = 15.0  # how long an accepted folder may take to show in the views


class Folders:
    """The folder calls of one ``AsyncClient``."""

    def __init__(
        self,
        client: Caller,
        *,
        data_transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 60.0,
        **transfer: Any,
    ) -> None:
        self._client = client
        self._data = httpx.AsyncClient(timeout=timeout_s, transport=data_transport)
        self._transfer = transfer

    async def aclose(self) -> None:
        await self._data.aclose()

    # ---- queries ----------------------------------------------------------------------------

    async def list(
        self,
        *,
        owner_kind: str | None = None,
        project: str | None = None,
        status: str | None = None,
        name: str | None = None,
        page_size: int = 50,
        as_of: int | None = None,
    ) -> list[VFolder]:
        """Every folder the caller sees (all pages), filtered as asked; ``as_of``: as they
        were at that log position (administrators and auditors)."""
        found: list[VFolder] = []
        after: str | None = None
        while True:
            args = arguments(
                first=page_size,
                after=after,
                ownerKind=owner_kind,
                project=project,
                status=status,
                name=name,
                asOf=past(as_of),
            )
            data = await self._client.graphql(
                f"{{ vfolders{args} {{ edges {{ node {{ {FOLDER_FIELDS} }} }} "
                "pageInfo { hasNextPage endCursor } } }"
            )
            page = data["vfolders"]
            found += [VFolder.of(edge["node"]) for edge in page["edges"]]
            if not page["pageInfo"]["hasNextPage"]:
                return found
            after = page["pageInfo"]["endCursor"]

    async def get(self, folder: str) -> VFolder:
        """The folder named ``folder`` (an id or a name); ``JetyardError`` if none is seen."""
        data = await self._client.graphql(
            f"{{ vfolder(id: {literal(folder)}) {{ {FOLDER_FIELDS} }} }}"
        )
        if data.get("vfolder") is None:
            raise JetyardError(f"there is no folder {folder}", code="not-found")
        return VFolder.of(data["vfolder"])

    # ---- mutations --------------------------------------------------------------------------

    async def _mutate(self, mutation: str, /, **args: Any) -> VFolder | None:
        data = await self._client.graphql(
            f"mutation {{ {mutation}{arguments(**args)} {{ commandId status code message "
            f"folder {{ {FOLDER_FIELDS} }} }} }}"
        )
        outcome = data[mutation]
        status = str(outcome.get("status", "")).lower()
        if status == "pending":
            raise JetyardError(
                f"{mutation} was sent but not decided in the gateway's wait; it may still take "
                f"effect (command {outcome.get('commandId')})",
                code="pending",
            )
        if status != "accepted":
            raise JetyardError(
                outcome.get("message") or f"{mutation} was refused", code=outcome.get("code")
            )
        folder = outcome.get("folder")
        return None if folder is None else VFolder.of(folder)

    async def _id(self, folder: str) -> str:
        return (await self.get(folder)).id

    async def _changed(self, mutation: str, folder: str, /, **args: Any) -> VFolder:
        """Run a mutation on ``folder`` and return the folder as it is now."""
        folder_id = await self._id(folder)
        changed = await self._mutate(mutation, id=folder_id, **args)
        return changed if changed is not None else await self.get(folder_id)

    async def create(
        self,
        name: str,
        *,
        owner_kind: str = "user",
        project: str | None = None,
        volume: str | None = None,
        usage_mode: str = "general",
        quota_bytes: int | None = None,
    ) -> VFolder:
        fields = {
            "name": name,
            "ownerKind": owner_kind,
            "project": project,
            "volume": volume,
            "usageMode": usage_mode,
            "quotaBytes": quota_bytes,
        }
        given = {k: v for k, v in fields.items() if v is not None}
        created = await self._mutate("createVFolder", input=given)
        return created if created is not None else await self._appearing(name)

    async def _appearing(self, folder: str) -> VFolder:
        """The accepted folder once the gateway's views hold it: a loaded gateway answers
        a mutation after its bounded wait for the views, which may not have caught up."""
        deadline = asyncio.get_running_loop().time() + APPEAR_WAIT_S
        while True:
            try:
                return await self.get(folder)
            except JetyardError as refused:
                if refused.code != "not-found" or asyncio.get_running_loop().time() > deadline:
                    raise JetyardError(
                        f"folder {folder} was created but is not visible yet", code="pending"
                    ) from refused
            await asyncio.sleep(0.2)

    async def rename(self, folder: str, name: str) -> VFolder:
        return await self._changed("renameVFolder", folder, name=name)

    async def clone(self, folder: str, name: str) -> VFolder:
        folder_id = await self._id(folder)
        clone = await self._mutate("cloneVFolder", id=folder_id, name=name)
        return clone if clone is not None else await self._appearing(name)

    async def trash(self, folder: str, reason: str | None = None) -> VFolder:
        return await self._changed("trashVFolder", folder, reason=reason)

    async def restore(self, folder: str) -> VFolder:
        return await self._changed("restoreVFolder", folder)

    async def purge(self, folder: str, reason: str | None = None) -> None:
        await self._mutate("purgeVFolder", id=await self._id(folder), reason=reason)

    async def share(self, folder: str, user: str, permission: str = "ro") -> VFolder:
        """Invite ``user`` (an email or a user id); the share exists once they accept."""
        return await self._changed("inviteToVFolder", folder, user=user, permission=permission)

    async def accept(self, folder: str) -> VFolder:
        return await self._changed("answerVFolderInvitation", folder, accept=True)

    async def decline(self, folder: str) -> None:
        await self._mutate("answerVFolderInvitation", id=await self._id(folder), accept=False)

    async def revoke(self, folder: str, user: str) -> VFolder:
        return await self._changed("revokeVFolderShare", folder, user=user)

    async def leave(self, folder: str) -> None:
        await self._mutate("leaveVFolder", id=await self._id(folder))

    async def set_quota(self, folder: str, quota_bytes: int | None) -> VFolder:
        """``None`` clears the quota. Written inline, as null is not skipped here."""
        folder_id = await self._id(folder)
        data = await self._client.graphql(
            f"mutation {{ setVFolderQuota(id: {literal(folder_id)}, quotaBytes: "
            f"{literal(quota_bytes)}) {{ status code message folder {{ {FOLDER_FIELDS} }} }} }}"
        )
        outcome = data["setVFolderQuota"]
        if str(outcome.get("status", "")).lower() != "accepted":
            raise JetyardError(
                outcome.get("message") or "setVFolderQuota was refused", code=outcome.get("code")
            )
        return VFolder.of(outcome["folder"]) if outcome.get("folder") else await self.get(folder_id)

    # ---- files ------------------------------------------------------------------------------

    async def access(
        self,
        folder: str,
        operation: str,
        path: str = "",
        *,
        size: int | None = None,
        prefix: bool = False,
    ) -> Access:
        """A data-plane token for one operation (``vfolderAccess``)."""
        args = arguments(
            id=folder, operation=operation, path=path, size=size, prefix=prefix or None
        )
        data = await self._client.graphql(
            f"mutation {{ vfolderAccess{args} {{ url token operation path maxBytes }} }}"
        )
        given = data["vfolderAccess"]
        limit = given.get("maxBytes")
        return Access(
            url=given["url"],
            token=given["token"],
            operation=operation,
            path=given.get("path") or path,
            max_bytes=None if limit is None else int(limit),
        )

    async def files(self, folder: str) -> FolderFiles:
        """The files of ``folder`` (resolved once to its id)."""
        folder_id = await self._id(folder)

        async def grants(
            operation: str, path: str, *, size: int | None = None, prefix: bool = False
        ) -> Access:
            return await self.access(folder_id, operation, path, size=size, prefix=prefix)

        return FolderFiles(self._data, grants, **self._transfer)

    async def upload(
        self,
        folder: str,
        local_path: str | Path,
        remote_path: str = "",
        progress: Progress | None = None,
    ) -> int:
        """Upload a file or a directory tree (see ``FolderFiles.upload``); the bytes sent."""
        return await (await self.files(folder)).upload(Path(local_path), remote_path, progress)

    async def download(
        self,
        folder: str,
        remote_path: str,
        local_path: str | Path,
        progress: Progress | None = None,
    ) -> int:
        """Download a file (resumable) or a directory (see ``FolderFiles.download``)."""
        return await (await self.files(folder)).download(remote_path, Path(local_path), progress)

    async def ls(self, folder: str, path: str = "") -> builtins.list[Entry]:
        return await (await self.files(folder)).ls(path)

    async def mkdir(self, folder: str, path: str, *, parents: bool = True) -> None:
        await (await self.files(folder)).mkdir(path, parents=parents)

    async def rm(self, folder: str, path: str, *, recursive: bool = False) -> None:
        await (await self.files(folder)).rm(path, recursive=recursive)

    async def mv(self, folder: str, source: str, target: str) -> None:
        await (await self.files(folder)).mv(source, target)
