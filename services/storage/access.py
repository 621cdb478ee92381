"""Who may do what on the data plane: the token, and nothing else. The token is checked
before anything else is read from the request, so a caller without one learns nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request

from schemas.folder_paths import FolderPath, parse_path
from services.storage.errors import StorageError
from services.storage.reservations import Creations
from services.storage.settings import StorageSettings
from services.storage.tokens import Claims, Operation, TokenError, UsedTokens, check_scope, verify
from services.storage.volumes import Volume


@dataclass(frozen=True)
class OwnerRoom:
    """The total size the policy of a folder's owner allows across its folders (``folders``,
    their ids), and what those folders hold: as last measured, plus what uploads finished
    since have added."""

    owner: str
    limit: int
    used: int
    folders: frozenset[str] = frozenset()


def _no_limit(folder_id: str) -> OwnerRoom | None:
    return None


def _nobody(volume: str, folder_id: str) -> None:
    return None


def _unheard(folder_id: str, added: int) -> None:
    return None


@dataclass
class PlaneHooks:
    """What the data plane asks of, and tells, the control part in the same process (the
    storage service); alone, it asks nothing and tells no one.

    ``owner_room``: the owner's policy total for a folder (None: no limit, or unknown).
    ``changed``: called (in the event loop) after an upload completed, or a mkdir, move or
    delete, in a folder: its usage is measured again.
    ``landed``: called (in the event loop) when an upload finished, with the bytes it added
    to the folder: they count in the owner's total until a measurement holds them."""

    owner_room: Callable[[str], OwnerRoom | None] = _no_limit
    changed: Callable[[str, str], None] = _nobody
    landed: Callable[[str, int], None] = _unheard


@dataclass
class DataPlane:
    """Everything a request handler needs, built once at start-up (``app.state.plane``)."""

    settings: StorageSettings
    volumes: Mapping[str, Volume]
    used: UsedTokens = field(default_factory=UsedTokens)
    now: Callable[[], float] = time.time
    hooks: PlaneHooks = field(default_factory=PlaneHooks)
    creations: Creations = field(default_factory=Creations)

    def changed(self, grant: Grant) -> None:
        self.hooks.changed(grant.volume.name, grant.folder_id)

    @property
    def key(self) -> bytes:
        return self.settings.token_key.get_secret_value().encode()


@dataclass(frozen=True)
class Grant:
    claims: Claims
    volume: Volume
    folder_id: str
    root: Path
    paths: tuple[FolderPath, ...]

    @property
    def path(self) -> FolderPath:
        return self.paths[0]


def plane_of(request: Request) -> DataPlane:
    plane: DataPlane = request.app.state.plane
    return plane


def token_of(request: Request) -> str:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise TokenError(
                "token_missing", 401, "send the token as 'Authorization: Bearer <token>'"
            )
        return value.strip()
    query = request.query_params.get("token")
    if not query:
        raise TokenError(
            "token_missing", 401, "send the token as 'Authorization: Bearer <token>' or ?token="
        )
    return query


@dataclass(frozen=True)
class Admission:
    """A token verified for an operation on the URL's folder; paths are checked next."""

    plane: DataPlane
    claims: Claims
    volume_name: str
    folder_id: str
    now: float

    def volume(self) -> Volume:
        volume = self.plane.volumes.get(self.volume_name)
        if volume is None:
            raise StorageError("unknown_volume", 404, f"no volume {self.volume_name!r} here")
        return volume

    def grant(self, *paths: FolderPath, consume: bool = True) -> Grant:
        """Check ``paths`` against the token (none: the token's own path) and find the
        folder; a one-use token is spent here, once every check has passed."""
        wanted = paths or (self.claims.folder_path,)
        check_scope(
            self.claims,
            op=self.claims.op,
            volume=self.volume_name,
            folder=self.folder_id,
            paths=wanted,
        )
        volume = self.volume()
        root = volume.folder_root(self.folder_id)
        if consume:
            self.plane.used.use(self.claims, now=self.now)
        return Grant(self.claims, volume, self.folder_id, root, wanted)


def admit(request: Request, op: Operation) -> Admission:
    """Verify the request's token for ``op`` on the folder its URL names."""
    plane = plane_of(request)
    now = plane.now()
    claims = verify(plane.key, token_of(request), now=now, max_ttl_s=plane.settings.max_token_ttl_s)
    volume_name, folder_id = request.path_params["volume"], request.path_params["folder"]
    check_scope(claims, op=op, volume=volume_name, folder=folder_id, paths=())
    return Admission(plane, claims, volume_name, folder_id, now)


def query_path(request: Request, claims: Claims) -> FolderPath:
    """``?path=`` if given, else the token's own path."""
    text = request.query_params.get("path")
    return claims.folder_path if text is None else parse_path(text)
