"""What the SDK returns for a virtual folder (``jetyard.sdk.folders``): the folder, its shares,
and the GraphQL fields it is read from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FOLDER_FIELDS = """id name ownerKind ownerId domain volume usageMode status quotaBytes
bytesUsed files links otherEntries permission clonedFrom createdAt updatedAt
shares { userId permission } invitations { userId permission } mountedBy"""


@dataclass(frozen=True)
class Share:
    user_id: str
    permission: str


@dataclass(frozen=True)
class VFolder:
    id: str
    name: str
    owner_kind: str
    owner_id: str
    domain: str
    volume: str
    usage_mode: str
    status: str
    quota_bytes: int | None
    bytes_used: int
    """Apparent sizes of its regular files, a file with several names once."""
    files: int
    """Names of regular files."""
    links: int
    """Symlinks."""
    other_entries: int
    """FIFOs, sockets and devices."""
    permission: str | None
    """The caller's: ``ro``, ``rw`` or ``rwd``."""
    cloned_from: str | None
    created_at: str
    updated_at: str
    shares: tuple[Share, ...] = ()
    invitations: tuple[Share, ...] = ()
    mounted_by: tuple[str, ...] = ()
    """Live sessions that mount it (shown to its owner and admins)."""

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> VFolder:
        def shares(key: str) -> tuple[Share, ...]:
            return tuple(Share(s["userId"], s["permission"]) for s in node.get(key) or ())

        quota = node.get("quotaBytes")
        return cls(
            id=node["id"],
            name=node["name"],
            owner_kind=node.get("ownerKind") or "",
            owner_id=node.get("ownerId") or "",
            domain=node.get("domain") or "",
            volume=node.get("volume") or "",
            usage_mode=node.get("usageMode") or "",
            status=node.get("status") or "",
            quota_bytes=None if quota is None else int(quota),
            bytes_used=int(node.get("bytesUsed") or 0),
            files=int(node.get("files") or 0),
            links=int(node.get("links") or 0),
            other_entries=int(node.get("otherEntries") or 0),
            permission=node.get("permission"),
            cloned_from=node.get("clonedFrom"),
            created_at=str(node.get("createdAt") or ""),
            updated_at=str(node.get("updatedAt") or ""),
            shares=shares("shares"),
            invitations=shares("invitations"),
            mounted_by=tuple(node.get("mountedBy") or ()),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "ownerKind": self.owner_kind,
            "ownerId": self.owner_id,
            "domain": self.domain,
            "volume": self.volume,
            "usageMode": self.usage_mode,
            "status": self.status,
            "quotaBytes": self.quota_bytes,
            "bytesUsed": self.bytes_used,
            "files": self.files,
            "links": self.links,
            "otherEntries": self.other_entries,
            "permission": self.permission,
            "clonedFrom": self.cloned_from,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "shares": [{"userId": s.user_id, "permission": s.permission} for s in self.shares],
            "invitations": [
                {"userId": s.user_id, "permission": s.permission} for s in self.invitations
            ],
            "mountedBy": list(self.mounted_by),
        }
