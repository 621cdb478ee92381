"""A rescan: read a registry (``registry_v2``) with its sealed credentials, and record each image
found with ``RecordScannedImage`` (the tenancy service registers a new one, records a moved or
changed one, and writes nothing for one it already knows as it is). Progress goes to
``jy.progress.rescan.<registry id>`` (core NATS, not kept) as it is made. Sends
``cmd.image.record_scan``; reads ``jy-registry-secrets``.
"""

from __future__ import annotations

import asyncio
import json
import logging

import strawberry
from graphql import GraphQLError
from pydantic import ValidationError

from commands import admin
from commands.authorisation import Principal
from commands.messages import explain
from commands.registry import Registry
from schemas.image_labels import image_facts
from schemas.subjects import RESCAN_PROGRESS_PREFIX
from services.gateway.context import Context
from services.gateway.core.outcomes import directory_holds
from services.gateway.images.registry_v2 import (
    RegistryClient,
    RegistryError,
    ScannedImage,
    ScanProgress,
)

log = logging.getLogger(__name__)

RECORDING = 8
"""Commands in flight at once while recording what a rescan found."""


@strawberry.type(description="One tag a rescan could not use, and why.")
class SkippedTag:
    reference: str
    reason: str


@strawberry.type(description="What a rescan found and recorded.")
class RescanResult:
    registry: str
    registered: list[str] = strawberry.field(description="images seen for the first time")
    updated: list[str] = strawberry.field(description="images whose digest or labels changed")
    unchanged: int = strawberry.field(description="images already known as they are")
    skipped: list[SkippedTag]


async def rescan(
    ctx: Context, me: Principal, registry: Registry, repositories: list[str] | None
) -> RescanResult:
    if registry.removed:
        raise GraphQLError(f"registry {registry.name} was removed", extensions={"code": "invalid"})
    s = registry.settings
    password = ""
    if s.secret_id:
        found = await ctx.services.registry_secrets.secret(registry.id, s.secret_id)
        if found is None:
            raise GraphQLError(
                f"the secret of registry {registry.name} is missing: set it again",
                extensions={"code": "invalid"},
            )
        password = found
    subject = f"{RESCAN_PROGRESS_PREFIX}.{registry.id}"
    nc = ctx.services.bus.nc

    def progressed(p: ScanProgress) -> None:
        seen = {
            "repositories_done": p.repos_done, "repositories_total": p.repos_total,
            "tags_done": p.tags_done, "tags_total": p.tags_total,
        }  # fmt: skip
        asyncio.get_running_loop().create_task(nc.publish(subject, json.dumps(seen).encode()))

    try:
        async with RegistryClient(
            s.url, s.username or None, password or None, ca_pem=s.ca_pem or None,
            verify_tls=s.verify_tls,
        ) as client:  # fmt: skip
            scanned = await client.scan(repositories, progress=progressed)
    except RegistryError as exc:
        raise GraphQLError(str(exc), extensions={"code": f"registry-{exc.kind}"}) from exc
    except ValueError as exc:  # a repository name the registry's grammar refuses
        raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
    result = RescanResult(
        registry=registry.name, registered=[], updated=[], unchanged=0,
        skipped=[SkippedTag(reference=r, reason=why) for r, why in scanned.skipped],
    )  # fmt: skip
    limit = asyncio.Semaphore(RECORDING)

    async def record(image: ScannedImage) -> None:
        async with limit:
            await _record(ctx, me, registry, image, result)

    await asyncio.gather(*(record(i) for i in scanned.images))
    result.registered.sort()
    result.updated.sort()
    log.info(
        "rescan of %s: %d registered, %d updated, %d unchanged, %d skipped", registry.name,
        len(result.registered), len(result.updated), result.unchanged, len(result.skipped),
    )  # fmt: skip
    return result


async def _record(
    ctx: Context, me: Principal, registry: Registry, image: ScannedImage, result: RescanResult
) -> None:
    facts = image_facts(image.labels)
    for problem in facts.problems:
        result.skipped.append(SkippedTag(reference=image.ref, reason=f"label ignored: {problem}"))
    try:
        cmd = admin.RecordScannedImage(
            actor=me.actor, tenant=me.tenant(), name=image.ref, registry=registry.name,
            digest=image.digest, architecture=image.architecture, size_bytes=image.size_bytes,
            min_resources=facts.min_resources, service_ports=facts.service_ports,
        )  # fmt: skip
    except ValidationError as exc:
        result.skipped.append(SkippedTag(reference=image.ref, reason=explain(exc)))
        return
    outcome = await ctx.commands.execute(cmd, timeout=ctx.settings.command_timeout_s)
    await directory_holds(ctx, outcome)
    if outcome is None:
        result.skipped.append(SkippedTag(reference=image.ref, reason="not decided in time"))
    elif not outcome.accepted:
        result.skipped.append(SkippedTag(reference=image.ref, reason=outcome.message))
    elif outcome.message.endswith(" registered"):
        result.registered.append(image.ref)
    elif outcome.message.endswith(" updated"):
        result.updated.append(image.ref)
    else:
        result.unchanged += 1
