"""Images from registries, as the scheduler hands them to a node: where an image comes from, how
it is pulled, and the causes a pull fails with. Pure; reads and writes no subject.

An allocation whose image came from a registry carries an ``ImageSource``: the agent pulls
``reference`` with the registry's credentials (asked for by registry id, never on the log) when
the policy says so, and runs the container from that same reference.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict


class PullPolicy(StrEnum):
    """When a node pulls an image it is asked to run."""

    IF_NOT_PRESENT = "if-not-present"
    """Only when the node lacks the tag (a tag that moved in the registry is not followed)."""
    ALWAYS = "always"
    """Before every kernel's start: the tag as the registry has it now (pulls of one image
    on one node are shared by the kernels that wait for it)."""
    DIGEST = "digest"
    """The digest the last rescan recorded, pulled by digest and run by digest: what runs
    is exactly what was scanned, whatever the tag points at since."""


PullCause = Literal["authentication", "not-found", "unreachable", "disk-full", "timeout", "other"]
"""Why a pull failed, as a session's end reason names it."""

PULL_CAUSE_WORDS: dict[str, str] = {
    "authentication": "the registry refused the credentials",
    "not-found": "the registry has no such image or tag",
    "unreachable": "the registry could not be reached",
    "disk-full": "the node's disk is full",
    "timeout": "the pull took longer than the agent's limit",
    "other": "the pull failed",
}


class ImageSource(BaseModel):
    """Where a kernel's image comes from (on its allocation; absent for an image the node
    must already hold)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    registry: str
    """The registry's id: the agent asks for its credentials by it ("" for none)."""
    reference: str
    """What the agent pulls and runs: ``host/repo:tag``, or ``host/repo@sha256:…`` pinned."""
    digest: str = ""
    """The manifest digest the last rescan recorded ("" when unknown)."""
    policy: PullPolicy = PullPolicy.IF_NOT_PRESENT


def pinned(name: str, digest: str) -> str:
    """``host/repo@digest`` for ``host/repo:tag`` (a port's colon is not a tag's)."""
    repo = name.split("@", 1)[0]
    slash = repo.rfind("/")
    colon = repo.rfind(":")
    if colon > slash:
        repo = repo[:colon]
    return f"{repo}@{digest}"


def source_of(name: str, registry: str, digest: str, policy: PullPolicy) -> ImageSource:
    """The source an allocation carries for an image of ``registry`` under ``policy``: pinned
    to ``digest`` when the policy asks for it and a digest is known."""
    if policy is PullPolicy.DIGEST and digest:
        return ImageSource(
            registry=registry, reference=pinned(name, digest), digest=digest, policy=policy
        )
    return ImageSource(registry=registry, reference=name, digest=digest, policy=policy)


class PulledLayer(BaseModel):
    """One layer of a pull in progress: bytes fetched of its size (0 while unknown)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    layer: str
    done_bytes: int
    total_bytes: int
