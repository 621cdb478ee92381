"""A Docker Registry HTTP API v2 client (distribution, Harbor, GitHub, NGC): list repositories
and tags, read manifests and image configs, and scan a registry into its images with their
digests, sizes and labels. Talks HTTP to the registry only; no subjects.

Authentication is basic, or the token flow a ``Bearer`` challenge asks for (the realm is asked
for a token with the basic credentials, one token kept per scope). Every failure is a
``RegistryError`` whose kind says what went wrong and whose message names the URL; the
password never appears in one.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

ErrorKind = Literal["authentication", "not-found", "unreachable", "tls", "protocol"]

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
ACCEPT = ", ".join((DOCKER_MANIFEST, DOCKER_LIST, OCI_MANIFEST, OCI_INDEX))
MAX_MANIFEST_BYTES = 4 << 20
"""distribution's own limit on a manifest."""
MAX_JSON_BYTES = 16 << 20
"""A catalog page, a tag list or an image config: far above any real one."""
_REPO = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
"""Docker's repository name grammar: it also keeps "..", "?" and "#" out of the URL path."""
_DIGEST = re.compile(r"^[a-z0-9]+:[a-f0-9]{32,}$")
_REFERENCE = re.compile(rf"^[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}$|{_DIGEST.pattern}")
"""A tag, or a digest."""
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class RegistryError(Exception):
    """``kind`` says what went wrong; ``message`` says it in a sentence naming the URL."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


@dataclass(frozen=True)
class Manifest:
    """One image's manifest (for an index: the chosen platform's)."""

    digest: str
    media_type: str
    config_digest: str
    config_size: int
    layer_sizes: tuple[int, ...]
    index_digest: str | None = None
    """The manifest list / OCI index it was chosen from, if any."""

    @property
    def size_bytes(self) -> int:
        return self.config_size + sum(self.layer_sizes)


@dataclass(frozen=True)
class ScannedImage:
    ref: str
    """``<host[:port]>/<repo>:<tag>``, as Docker names it."""
    repo: str
    tag: str
    digest: str
    config_digest: str
    architecture: str
    size_bytes: int
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ScanProgress:
    repos_done: int
    repos_total: int
    tags_done: int
    tags_total: int
    """Grows as repositories' tags are listed."""


@dataclass(frozen=True)
class ScanResult:
    images: tuple[ScannedImage, ...]
    skipped: tuple[tuple[str, str], ...]
    """``(ref, reason)`` of each repository or tag that could not be read."""


class RegistryClient:
    """``async with RegistryClient(url, username, password) as c``. ``ca_pem`` adds a CA to
    trust; ``verify_tls=False`` trusts any certificate."""

    def __init__(
        self,
        url: str,
        username: str | None = None,
        password: str | None = None,
        *,
        ca_pem: str | None = None,
        verify_tls: bool = True,
        timeout_s: float = 30,
        page_size: int = 100,
    ) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
            # The v2 API lives at the root of its host: a path would be dropped silently.
            raise ValueError(f"registry URL {url!r} is not http(s)://host[:port]")
        netloc = parts.netloc.rsplit("@", 1)[-1]  # never keep credentials written in the URL
        self.url = f"{parts.scheme}://{netloc}"
        self.host = netloc
        # A header, not aiohttp.BasicAuth (deprecated); aiohttp drops it on a redirect to
        # another host (a blob store), as it must.
        self._credentials = _basic_header(username, password or "") if username else None
        self._username = username
        self._ssl: ssl.SSLContext | bool = True
        if not verify_tls:
            self._ssl = False
        elif ca_pem is not None:
            self._ssl = ssl.create_default_context(cadata=ca_pem)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._page_size = page_size
        self._basic = False
        self._tokens: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl), timeout=self._timeout
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    # ---- reading ------------------------------------------------------------------------

    async def ping(self) -> None:
        """Check the registry answers the v2 API and accepts the credentials."""
        await self._get("/v2/", scope="")

    async def catalog(self, n: int | None = None) -> AsyncIterator[str]:
        """Every repository, page by page (``n`` a page)."""
        async for page in self._pages(
            f"/v2/_catalog?n={n or self._page_size}", "registry:catalog:*"
        ):
            for name in _strings(page, "repositories", self.url + "/v2/_catalog"):
                yield name

    async def tags(self, repo: str, n: int | None = None) -> list[str]:
        found: list[str] = []
        path = f"/v2/{_checked(repo, _REPO, 'repository name')}/tags/list"
        async for page in self._pages(f"{path}?n={n or self._page_size}", _pull(repo)):
            found.extend(_strings(page, "tags", self.url + path))
        return found

    async def manifest(self, repo: str, tag: str, architecture: str = "amd64") -> Manifest:
        """The image manifest of ``repo:tag`` (a digest works as ``tag``); from a manifest list
        or OCI index, the ``linux/<architecture>`` one."""
        digest, body, where = await self._manifest(repo, tag)
        if body.get("manifests") is not None:
            chosen = _platform_entry(body, architecture, where)
            child_digest, child, where = await self._manifest(repo, chosen)
            if child.get("manifests") is not None:
                raise RegistryError("protocol", f"{where}: an index inside an index")
            return _image_manifest(child_digest, child, where, index_digest=digest)
        return _image_manifest(digest, body, where)

    async def config(self, repo: str, digest: str) -> dict[str, Any]:
        """The image config blob (``config.Labels``, ``architecture``, ``os``...)."""
        path = f"/v2/{_checked(repo, _REPO, 'repository name')}/blobs/"
        path += _checked(digest, _DIGEST, "digest")
        _, body = await self._get(path, scope=_pull(repo), limit=MAX_JSON_BYTES)
        algorithm, _, expected = digest.partition(":")
        if algorithm == "sha256" and hashlib.sha256(body).hexdigest() != expected:
            raise RegistryError("protocol", f"{self.url}{path}: the blob does not match its digest")
        return _json_object(body, self.url + path)

    async def image(self, repo: str, tag: str, architecture: str = "amd64") -> ScannedImage:
        manifest = await self.manifest(repo, tag, architecture)
        config = await self.config(repo, manifest.config_digest)
        settings = config.get("config")
        labels = (settings.get("Labels") if isinstance(settings, dict) else None) or {}
        return ScannedImage(
            ref=f"{self.host}/{repo}:{tag}",
            repo=repo,
            tag=tag,
            digest=manifest.digest,
            config_digest=manifest.config_digest,
            architecture=str(config.get("architecture", "")),
            size_bytes=manifest.size_bytes,
            labels={str(k): str(v) for k, v in labels.items() if isinstance(v, str)},
        )

    async def scan(
        self,
        repos: Iterable[str] | None = None,
        *,
        concurrency: int = 4,
        architecture: str = "amd64",
        progress: Callable[[ScanProgress], None] | None = None,
    ) -> ScanResult:
        """Read every tag of ``repos`` (default: the catalog's). A repository or tag that cannot
        be read is skipped with its reason; an unreachable registry, a TLS failure or refused
        credentials end the scan with ``RegistryError`` (a partial list would look whole).
        A registry that keeps its catalog from the user (Harbor for non-admins, GitHub) is
        scanned with ``repos`` named."""
        await self.ping()
        if repos is None:
            repos = [r async for r in self.catalog()]
        names = list(dict.fromkeys(repos))  # a repository named twice is read once
        scan = _Scan(self, names, asyncio.Semaphore(concurrency), architecture, progress)
        try:
            async with asyncio.TaskGroup() as group:
                for repo in names:
                    group.create_task(scan.repo(group, repo))
        except BaseExceptionGroup as failed:
            raise _first(failed) from None
        images = sorted(scan.images, key=lambda i: (i.repo, i.tag))
        return ScanResult(images=tuple(images), skipped=tuple(sorted(scan.skipped)))

    # ---- HTTP and authentication ----------------------------------------------------------

    async def _manifest(self, repo: str, reference: str) -> tuple[str, dict[str, Any], str]:
        path = f"/v2/{_checked(repo, _REPO, 'repository name')}/manifests/"
        path += _checked(reference, _REFERENCE, "tag or digest")
        headers, body = await self._get(
            path, scope=_pull(repo), accept=ACCEPT, limit=MAX_MANIFEST_BYTES
        )
        digest = headers.get("Docker-Content-Digest") or (
            "sha256:" + hashlib.sha256(body).hexdigest()
        )
        return digest, _json_object(body, self.url + path), self.url + path

    async def _pages(self, first: str, scope: str) -> AsyncIterator[dict[str, Any]]:
        url: URL | None = URL(self.url + first)
        seen: set[URL] = set()
        while url is not None and url not in seen:
            seen.add(url)
            headers, body = await self._get(str(url), scope=scope, limit=MAX_JSON_BYTES)
            yield _json_object(body, str(url))
            link = _NEXT_LINK.search(headers.get("Link", ""))
            url = URL(self.url).join(URL(link.group(1))) if link else None

    async def _get(
        self, path: str, *, scope: str, accept: str | None = None, limit: int = MAX_JSON_BYTES
    ) -> tuple[Mapping[str, str], bytes]:
        """GET ``path`` (or an absolute URL) answering a challenge once: (headers, body)."""
        url = path if path.startswith(("http://", "https://")) else self.url + path
        for attempt in (1, 2):
            headers = {"Accept": accept} if accept else {}
            if scope in self._tokens:
                headers["Authorization"] = f"Bearer {self._tokens[scope]}"
            elif self._basic and self._credentials:
                headers["Authorization"] = self._credentials
            status, reply_headers, body = await self._fetch(url, headers, limit)
            if status == 401 and attempt == 1:
                await self._answer(reply_headers.get("WWW-Authenticate", ""), scope, url)
                continue
            if 200 <= status < 300:
                return reply_headers, body
            raise self._refusal(status, body, url)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _answer(self, challenge: str, scope: str, url: str) -> None:
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if self._credentials is None:
                raise RegistryError("authentication", f"{url}: the registry wants a login")
            self._basic = True
        elif scheme == "bearer":
            params = dict(_CHALLENGE_PARAM.findall(challenge))
            self._tokens[scope] = await self._token(params, url)
        else:
            raise RegistryError(
                "authentication", f"{url}: 401 with no challenge Jetyard can answer: {challenge!r}"
            )

    async def _token(self, params: Mapping[str, str], url: str) -> str:
        realm = params.get("realm")
        if not realm:
            raise RegistryError("protocol", f"{url}: a Bearer challenge without a realm")
        query = {k: v for k, v in params.items() if k in ("service", "scope")}
        if self._username:
            query["account"] = self._username
        status, _, body = await self._fetch(
            str(URL(realm).update_query(query)),
            {"Authorization": self._credentials} if self._credentials else {},
            MAX_JSON_BYTES,
        )
        if status in (401, 403):
            raise RegistryError(
                "authentication",
                f"the token service {realm} refused {self._who()} ({status}) for {url}",
            )
        if status != 200:
            raise self._refusal(status, body, realm)
        reply = _json_object(body, realm)
        token = reply.get("token") or reply.get("access_token")
        if not isinstance(token, str) or not token:
            raise RegistryError("protocol", f"the token service {realm} answered no token")
        return token

    async def _fetch(
        self, url: str, headers: Mapping[str, str], limit: int
    ) -> tuple[int, Mapping[str, str], bytes]:
        if self._session is None:
            raise RuntimeError("use RegistryClient in `async with`")
        try:
            async with self._session.get(url, headers=headers) as reply:
                body = bytearray()
                async for chunk in reply.content.iter_chunked(1 << 16):
                    body.extend(chunk)
                    if len(body) > limit:
                        raise RegistryError("protocol", f"{url}: the answer is over {limit} bytes")
                return reply.status, reply.headers, bytes(body)
        except aiohttp.ClientSSLError as exc:
            raise RegistryError("tls", f"{url}: TLS failed: {_reason(exc)}") from None
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            raise RegistryError("unreachable", f"{url}: cannot reach it: {_reason(exc)}") from None

    def _refusal(self, status: int, body: bytes, url: str) -> RegistryError:
        said = _registry_says(body)
        if status in (401, 403):
            return RegistryError(
                "authentication", f"{url}: the registry refused {self._who()} ({status}){said}"
            )
        if status == 404:
            return RegistryError("not-found", f"{url}: not found{said}")
        return RegistryError("protocol", f"{url}: answered {status}{said}")

    def _who(self) -> str:
        return f"user {self._username!r}" if self._username else "anonymous access"


class _Scan:
    """One scan's counters and findings; the tasks run on one loop, so no locks."""

    def __init__(
        self,
        client: RegistryClient,
        repos: list[str],
        gate: asyncio.Semaphore,
        architecture: str,
        progress: Callable[[ScanProgress], None] | None,
    ) -> None:
        self.client, self.gate, self.architecture = client, gate, architecture
        self.report = progress
        self.repos_total, self.repos_done = len(repos), 0
        self.tags_total, self.tags_done = 0, 0
        self.left: dict[str, int] = {}
        self.images: list[ScannedImage] = []
        self.skipped: list[tuple[str, str]] = []

    async def repo(self, group: asyncio.TaskGroup, repo: str) -> None:
        try:
            async with self.gate:
                tags = await self.client.tags(repo)
        except RegistryError as exc:
            _raise_if_fatal(exc)
            self.skipped.append((f"{self.client.host}/{repo}", exc.message))
            tags = []
        self.tags_total += len(tags)
        self.left[repo] = len(tags)
        if not tags:
            self.repos_done += 1
        self._tell()
        for tag in tags:
            group.create_task(self.tag(repo, tag))

    async def tag(self, repo: str, tag: str) -> None:
        try:
            async with self.gate:
                self.images.append(await self.client.image(repo, tag, self.architecture))
        except RegistryError as exc:
            _raise_if_fatal(exc)
            self.skipped.append((f"{self.client.host}/{repo}:{tag}", exc.message))
        self.tags_done += 1
        self.left[repo] -= 1
        if self.left[repo] == 0:
            self.repos_done += 1
        self._tell()

    def _tell(self) -> None:
        if self.report is not None:
            self.report(
                ScanProgress(self.repos_done, self.repos_total, self.tags_done, self.tags_total)
            )


def _raise_if_fatal(exc: RegistryError) -> None:
    # A 401/403 on one repository is a permission of that repository (ping checked the login).
    if exc.kind in ("unreachable", "tls"):
        raise exc


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    for exc in group.exceptions:
        found = _first(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(found, RegistryError):
            return found
    return group.exceptions[0]


def _basic_header(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _checked(name: str, grammar: re.Pattern[str], what: str) -> str:
    # Not-found: no such repository or tag can exist (a scan skips it and goes on).
    if len(name) > 255 or not grammar.match(name):
        raise RegistryError("not-found", f"{name[:80]!r} is not a {what}")
    return name


def _pull(repo: str) -> str:
    return f"repository:{repo}:pull"


def _platform_entry(index: Mapping[str, Any], architecture: str, where: str) -> str:
    offered: list[str] = []
    for entry in index.get("manifests") or []:
        if not isinstance(entry, dict):
            continue
        platform = entry.get("platform") or {}
        os_arch = f"{platform.get('os')}/{platform.get('architecture')}"
        if os_arch == f"linux/{architecture}" and isinstance(entry.get("digest"), str):
            return str(entry["digest"])
        offered.append(os_arch)
    raise RegistryError(
        "not-found",
        f"{where}: no linux/{architecture} image in the index "
        f"(it has {', '.join(offered) or 'none'})",
    )


def _image_manifest(
    digest: str, body: Mapping[str, Any], where: str, index_digest: str | None = None
) -> Manifest:
    if body.get("schemaVersion") == 1:
        raise RegistryError(
            "protocol", f"{where}: a schema 1 manifest, which Jetyard does not read"
        )
    config, layers = body.get("config"), body.get("layers")
    try:
        if not isinstance(config, dict) or not isinstance(layers, list):
            raise TypeError
        return Manifest(
            digest=digest,
            media_type=str(body.get("mediaType") or OCI_MANIFEST),
            config_digest=str(config["digest"]),
            config_size=int(config["size"]),
            layer_sizes=tuple(int(layer["size"]) for layer in layers),
            index_digest=index_digest,
        )
    except (KeyError, TypeError, ValueError):
        raise RegistryError(
            "protocol", f"{where}: not an image manifest (no config and layers with sizes)"
        ) from None


def _json_object(body: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        raise RegistryError("protocol", f"{where}: the answer is not JSON") from None
    if not isinstance(value, dict):
        raise RegistryError("protocol", f"{where}: the answer is not a JSON object")
    return value


def _strings(page: Mapping[str, Any], key: str, where: str) -> list[str]:
    values = page.get(key) or []  # distribution answers "tags": null for a repo emptied
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise RegistryError("protocol", f"{where}: '{key}' is not a list of names")
    return values


def _registry_says(body: bytes) -> str:
    """The registry's own error code and message, if it sent the v2 error JSON."""
    try:
        first = json.loads(body)["errors"][0]
        return f": {first['code']}: {first.get('message', '')}"[:300]
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
