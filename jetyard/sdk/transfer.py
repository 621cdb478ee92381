"""The bytes of a virtual folder, between this machine and the storage data plane: what the
calls share (tokens for one operation, ``Grants``; retries; progress), and the small calls
(listings, mkdir, move, delete) that uploads (``jetyard.sdk.uploads``) and downloads
(``jetyard.sdk.downloads``) build on; ``jetyard.sdk.files`` puts them together. Talks HTTP
only, with short-lived tokens the gateway issues; never reads a file whole (docs/storage.md,
"The HTTP API").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from jetyard.sdk.errors import JetyardError

Progress = Callable[[int, int | None], None]
"""Called with (bytes done, bytes in all); the total is None where it is not known ahead
(a directory's archive)."""

Send = Callable[["Access"], Awaitable[httpx.Response]]
TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"
PART_SUFFIX = ".jetyard-part"
"""A download in progress: ``<target>.jetyard-part``, beside ``<target>.jetyard-part.etag``
(the version it holds), renamed into place when complete."""
_REFRESH = frozenset({"token_expired", "token_used"})
_RETRY_STATUS = frozenset({423, 502, 503, 504})


@dataclass(frozen=True)
class Access:
    """A token for one operation on one folder, and the URL of that operation."""

    url: str
    token: str
    operation: str
    path: str = ""
    max_bytes: int | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class Grants(Protocol):
    """Issues tokens for one folder (the gateway's ``vfolderAccess``)."""

    def __call__(
        self, operation: str, path: str, *, size: int | None = None, prefix: bool = False
    ) -> Awaitable[Access]: ...


@dataclass(frozen=True)
class Entry:
    name: str
    type: str
    """``file``, ``directory``, ``symlink`` or ``other``."""
    size: int
    mtime: str
    """ISO 8601, with its time zone."""
    safe: bool
    """False for a name on disk the path rules refuse: listed, not addressable."""


class Retryable(Exception):
    """A broken connection, a busy upload, or a token to renew: try again."""

    def __init__(self, reason: str, refresh: bool = False) -> None:
        super().__init__(reason)
        self.refresh = refresh


def plane_refusal(response: httpx.Response) -> JetyardError:
    """The data plane's ``{"error", "message"}`` as the SDK's error."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return JetyardError(str(body["message"]), response.status_code, code=body.get("error"))
    text = response.text.strip()[:300] or response.reason_phrase
    return JetyardError(
        f"the storage service answered {response.status_code}: {text}", response.status_code
    )


def check(response: httpx.Response) -> None:
    """Raise ``Retryable`` for what a retry mends, ``JetyardError`` for the rest."""
    if response.status_code < 400:
        return
    error = plane_refusal(response)
    # A HEAD answer has no body to say why: a 401 there is taken as a token to renew.
    if error.code in _REFRESH or (response.status_code == 401 and error.code is None):
        raise Retryable(str(error), refresh=True)
    if response.status_code in _RETRY_STATUS:
        raise Retryable(str(error))
    raise error


def _entry(listed: dict[str, Any]) -> Entry:
    return Entry(
        name=listed["name"],
        type=listed["type"],
        size=int(listed.get("size") or 0),
        mtime=str(listed.get("mtime") or ""),
        safe=bool(listed.get("safe", True)),
    )


def remote_join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


class Tally:
    """Bytes done across the files of one call, reported to ``progress``."""

    def __init__(self, total: int | None, progress: Progress | None) -> None:
        self.total, self.done, self.progress = total, 0, progress

    def set(self, done: int) -> None:
        self.done = done
        if self.progress is not None:
            self.progress(self.done, self.total)

    def add(self, count: int) -> None:
        self.set(self.done + count)


class FileCalls:
    """The small calls on one folder's files (listings, mkdir, delete, move), and what the
    uploads and downloads share. ``grants`` issues its tokens; ``http`` is a plain client
    (the token is the only credential the data plane takes)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        grants: Grants,
        *,
        chunk_bytes: int = 1 << 20,
        patch_bytes: int = 64 << 20,
        retries: int = 10,
        retry_delay_s: float = 0.2,
    ) -> None:
        self._http, self._grants = http, grants
        self.chunk_bytes, self.patch_bytes = chunk_bytes, patch_bytes
        self.retries, self.retry_delay_s = retries, retry_delay_s

    async def _call(
        self, operation: str, path: str, send: Send, *, prefix: bool = False
    ) -> httpx.Response:
        access = await self._grants(operation, path, prefix=prefix)
        for attempt in range(self.retries + 1):
            try:
                response = await send(access)
                check(response)
                return response
            except (httpx.TransportError, Retryable) as exc:
                if attempt == self.retries:
                    raise JetyardError(f"{operation} {path!r} failed: {exc}") from exc
                if isinstance(exc, Retryable) and exc.refresh:
                    access = await self._grants(operation, path, prefix=prefix)
                await asyncio.sleep(self.retry_delay_s * (attempt + 1))
        raise AssertionError("unreachable")

    async def ls(self, path: str = "") -> list[Entry]:
        """Every entry of directory ``path`` (all pages), in byte order of names."""
        entries: list[Entry] = []
        after = ""
        while True:
            params = {"path": path, "after": after}

            def page_of(
                access: Access, params: dict[str, str] = params
            ) -> Awaitable[httpx.Response]:
                return self._http.get(access.url, params=params, headers=access.headers)

            page = (await self._call("list", path, page_of)).json()
            entries += [_entry(e) for e in page["entries"]]
            if not page.get("more") or not page.get("next_after"):
                return entries
            after = page["next_after"]

    async def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = False) -> None:
        try:
            await self._call(
                "mkdir",
                path,
                lambda a: self._http.post(
                    a.url, json={"path": path, "parents": parents}, headers=a.headers
                ),
            )
        except JetyardError as exc:
            if not (exist_ok and exc.code == "exists"):
                raise

    async def rm(self, path: str, *, recursive: bool = False) -> None:
        await self._call(
            "delete",
            path,
            lambda a: self._http.post(
                a.url, json={"path": path, "recursive": recursive}, headers=a.headers
            ),
        )

    async def mv(self, source: str, target: str) -> None:
        # One token must cover both paths: the folder's root, with everything beneath it.
        body = {"from": source, "to": target}
        await self._call(
            "move", "", lambda a: self._http.post(a.url, json=body, headers=a.headers), prefix=True
        )
