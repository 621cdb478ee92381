"""Pulling images with the Docker engine (aiodocker), listing the images it holds and removing
one. No subjects; talks only to the local engine (which talks to the registries).

The engine's pull answers a stream of JSON status lines, per layer: "Pulling fs layer",
"Waiting", "Downloading" (``progressDetail`` current/total: compressed bytes), "Verifying
Checksum", "Download complete", "Extracting", "Pull complete", or "Already exists". ``PullStream``
(pure) turns them into byte progress: a layer's done bytes are those downloaded, its total is
known from its first "Downloading" (or "Extracting") line, so the pull's total grows as layers
start. A layer already on the machine stays in the list at 0 of 0 bytes: nothing to download.
Errors (an ``error`` line, or the engine refusing the request) become ``PullFailedError`` with
a cause read from the message (``classify``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiodocker
import aiohttp

from schemas.images import PullCause
from services.node.image_budget import ImageInUseError, LocalImage
from services.node.pulls import (
    LayerProgress,
    ProgressCallback,
    PullFailedError,
    PullProgress,
    RegistryAuth,
    scrub,
)

# Lower-case fragments of the engine's and registries' messages, checked in this order: the
# first cause with a matching fragment wins. "repository does not exist or may require
# 'docker login'" (Docker Hub's answer for both) reads as not-found, before the bare "denied".
_CAUSES: tuple[tuple[PullCause, tuple[str, ...]], ...] = (
    ("disk-full", ("no space left on device",)),
    ("unreachable", ("connection refused", "no such host", "i/o timeout", "dial tcp",
                     "network is unreachable", "tls handshake timeout", "connection reset",
                     "server gave http response to https client")),
    ("authentication", ("unauthorized", "authentication required", "no basic auth credentials",
                        "incorrect username or password")),
    ("not-found", ("manifest unknown", "not found", "repository does not exist",
                   "name unknown")),
    ("authentication", ("denied",)),
)  # fmt: skip
_FINISHED = ("Verifying Checksum", "Download complete", "Extracting", "Pull complete")
_LAYER = ("Pulling fs layer", "Waiting", "Downloading", "Already exists", *_FINISHED)


def classify(message: str) -> PullCause:
    text = message.lower()
    for cause, fragments in _CAUSES:
        if any(fragment in text for fragment in fragments):
            return cause
    return "other"


class PullStream:
    """What one pull's status lines said so far: progress, the digest, the error if any."""

    def __init__(self) -> None:
        self._layers: dict[str, LayerProgress] = {}
        self.digest = ""
        self.error: PullFailedError | None = None

    @property
    def progress(self) -> PullProgress:
        layers = tuple(self._layers.values())
        return PullProgress(
            sum(x.done_bytes for x in layers), sum(x.total_bytes for x in layers), layers
        )

    def feed(self, status: Mapping[str, Any]) -> bool:
        """Take one line; True when the progress changed."""
        if "error" in status or "errorDetail" in status:
            detail = status.get("errorDetail")
            message = str((detail or {}).get("message") or status.get("error") or "unknown error")
            self.error = PullFailedError(classify(message), message)
            return False
        text = str(status.get("status", ""))
        if text.startswith("Digest: "):
            self.digest = text.removeprefix("Digest: ").strip()
        layer = str(status.get("id", ""))
        if not layer or text not in _LAYER:
            return False  # "Pulling from <repo>" carries the tag as its id: not a layer
        seen = layer in self._layers
        old = self._layers.get(layer, LayerProgress(layer, 0, 0))
        detail = status.get("progressDetail") or {}
        total = old.total_bytes or int(detail.get("total") or 0)
        if text == "Downloading":
            new = LayerProgress(layer, int(detail.get("current") or 0), total)
        elif text in _FINISHED:
            new = LayerProgress(layer, total, total)
        else:
            new = old
        self._layers[layer] = new
        return new != old or not seen


async def docker_pull(
    docker: aiodocker.Docker, ref: str, auth: RegistryAuth | None, progress: ProgressCallback
) -> str:
    """Pull ``ref`` (with ``auth`` its reference must name the registry host) and return the
    manifest digest it has in its repository."""
    stream = PullStream()
    credentials = None if auth is None else {"username": auth.username, "password": auth.password}
    try:
        async for status in docker.images.pull(ref, auth=credentials, stream=True):
            if stream.feed(status):
                progress(stream.progress)
            if stream.error is not None:
                raise stream.error
    except aiodocker.DockerError as exc:
        raise PullFailedError(classify(exc.message), scrub(exc.message, auth)) from exc
    except aiohttp.ClientError as exc:
        raise PullFailedError("other", f"the Docker engine stopped answering: {exc!r}") from exc
    except ValueError as exc:  # aiodocker: credentials for a reference without a registry
        raise PullFailedError("other", str(exc)) from exc
    return _repo_digest(await docker.images.inspect(ref), ref) or stream.digest


def repository(ref: str) -> str:
    """``ref`` without its tag or digest, in Docker's short form (``busybox``, not
    ``docker.io/library/busybox``)."""
    name = ref.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    name = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "library/"):
        name = name.removeprefix(prefix)
    return name


def _repo_digest(image: Mapping[str, Any], ref: str) -> str:
    for entry in image.get("RepoDigests") or []:
        repo, _, digest = str(entry).partition("@")
        if repository(repo) == repository(ref):
            return digest
    return ""


async def local_images(docker: aiodocker.Docker) -> list[LocalImage]:
    """Every image the engine holds (one per image, with all its tags)."""
    found: list[LocalImage] = []
    for entry in await docker.images.list():
        try:
            details = await docker.images.inspect(str(entry["Id"]))
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                continue  # removed meanwhile
            raise
        created = datetime.fromtimestamp(int(entry.get("Created") or 0), UTC)
        tagged = _time((details.get("Metadata") or {}).get("LastTagTime"))
        found.append(
            LocalImage(
                image_id=str(entry["Id"]),
                refs=tuple(t for t in entry.get("RepoTags") or () if t != "<none>:<none>"),
                size_bytes=int(entry.get("Size") or 0),
                repo_digests=tuple(
                    d for d in entry.get("RepoDigests") or () if d != "<none>@<none>"
                ),
                created=created,
                last_used=max(created, tagged) if tagged is not None else created,
            )
        )
    return found


def _time(text: object) -> datetime | None:
    # "0001-01-01T00:00:00Z" means never tagged; Go writes nanoseconds, Python reads micro.
    if not isinstance(text, str) or text.startswith("0001-"):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text)
    return None


async def remove_image(docker: aiodocker.Docker, ref: str) -> int:
    """Remove the name ``ref``; the bytes freed (its size if the image went with it, 0 when it
    keeps another name or was not there). Raises ``ImageInUseError`` when a container uses
    it."""
    try:
        image = await docker.images.inspect(ref)
        removed = await docker.images.delete(ref)
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            return 0
        if exc.status == 409:
            raise ImageInUseError(f"image {ref} is used by a container: {exc.message}") from exc
        raise
    deleted = {entry.get("Deleted") for entry in removed if isinstance(entry, dict)}
    return int(image.get("Size") or 0) if image.get("Id") in deleted else 0
