"""What the SDK returns for registries, their rescans and the image pulls a session waits for
(``jetyard.sdk.images``, ``Sessions.pulls``)."""

from __future__ import annotations

from jetyard.sdk.wire import Model


class RegistryInfo(Model):
    """A registry images are found in and pulled from. Its password or token never comes
    back: ``has_secret`` says whether one is set; ``projects`` are project ids (none: every
    project may use its images)."""

    id: str
    name: str
    url: str
    kind: str
    username: str
    has_secret: bool
    projects: list[str]
    verify_tls: bool
    has_ca: bool
    removed: bool


class RescanProgress(Model):
    """How far a rescan is, as the gateway publishes it while the rescan runs."""

    repositories_done: int
    repositories_total: int
    tags_done: int
    tags_total: int


class SkippedTag(Model):
    reference: str
    reason: str


class RescanResult(Model):
    """What a rescan found: images seen for the first time (``registered``), changed ones
    (``updated``), how many were already known as they are, and the tags it could not use."""

    registry: str
    registered: list[str]
    updated: list[str]
    unchanged: int
    skipped: list[SkippedTag]


class PullLayer(Model):
    layer: str
    done_bytes: int
    total_bytes: int


class ImagePull(Model):
    """How the pull of a session's image goes on one node: ``status`` pulling, finished or
    failed (``cause``: authentication, not-found, ...; ``reason`` in words). ``total_bytes``
    grows as layers start."""

    node_id: str
    node_name: str
    """The node's host name."""
    reference: str
    status: str
    done_bytes: int
    total_bytes: int
    layers: list[PullLayer]
    cause: str
    reason: str
