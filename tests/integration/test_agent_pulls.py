"""The agent's pulls on real NATS with the simulated backend, and the gateway's credentials desk:
kernels waiting for one image make one pull, named in its facts (a kernel that joins later is
named too); progress grows to the total; a failed pull fails every waiting kernel with the cause;
the credentials reach the agent only sealed to its key (the desk refuses an unknown registry,
and what crosses NATS never holds the password); a pull interrupted by the agent's stop begins
again, and one no kernel waits for is failed, so nothing stays in flight."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from cryptography.fernet import Fernet

from commands.directory import Directory
from commands.node.aggregate import Node
from commands.registry import Registry, RegistrySettings
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id, node_id_for_host
from schemas.images import ImageSource, PullPolicy
from schemas.resources import ResourceSlots
from schemas.subjects import REGISTRY_CREDENTIALS_SUBJECT
from services.gateway.auth.registry_secrets import RegistrySecrets
from services.gateway.images.credentials import CredentialsDesk
from services.node.backend_simulated import SimulatedBackend
from services.node.credentials import RegistryCredentials
from services.node.pulls import PullFailedError, RegistryAuth
from services.node.settings import AgentSettings
from tests.integration.node_support import change_ledger, eventually, facts
from tests.integration.test_node_agent import running
from tests.support import NOW

BASE = "python:3.12"


def machine(**backend: Any) -> tuple[AgentSettings, SimulatedBackend]:
    settings = AgentSettings(
        hostname=f"sim-{new_id()}", backend="simulated", simulated_images=(BASE,),
        pull_progress_interval_s=0.05,
    )  # fmt: skip
    node_id = node_id_for_host(settings.hostname)
    return settings, SimulatedBackend(node_id, [BASE], **backend)


@asynccontextmanager
async def desk(bus: Bus, password: str) -> AsyncIterator[tuple[Directory, str]]:
    """A credentials desk over a directory holding one registry whose password is sealed."""
    directory = Directory()
    secrets = RegistrySecrets(bus, Fernet.generate_key())
    name = f"lab{new_id()[:8]}"
    registry = Registry.add(name, "docker", RegistrySettings(url="http://reg.lab:5000"), NOW)
    secret_id = await secrets.store(registry.id, password)
    registry.settings = RegistrySettings(url="http://reg.lab:5000", username="bot",
                                         secret_id=secret_id)  # fmt: skip
    directory.registries[registry.id] = registry
    running_desk = CredentialsDesk(bus, secrets, directory)
    await running_desk.start()
    try:
        yield directory, registry.id
    finally:
        await running_desk.stop()


def pulled(kernel_id: str, ref: str, registry: str = "") -> Any:
    source = ImageSource(registry=registry, reference=ref, policy=PullPolicy.IF_NOT_PRESENT)
    return lambda node: node.allocate(
        kernel_id, f"session-{kernel_id}", _slots(), NOW, image=ref, command=("sleep", "600"),
        source=source,
    )  # fmt: skip


def purge(ref: str) -> Callable[[Node], object]:
    return lambda node: node.request_purge(ref, "tidy", NOW)


def _slots() -> ResourceSlots:
    return ResourceSlots.of(cpu="0.5", memory=64 << 20)


async def test_kernels_waiting_for_one_image_make_one_pull_with_growing_progress(
    bus: Bus,
) -> None:
    store = EventStore(bus)
    settings, backend = machine(pull_seconds=0.6, pull_bytes=10_000_000)
    node_id, ref = node_id_for_host(settings.hostname), f"reg.lab:5000/t/{new_id()[:8]}:1"
    first, second, late = new_id(), new_id(), new_id()
    async with running(bus, settings, backend):
        await change_ledger(store, node_id, pulled(first, ref))
        await change_ledger(store, node_id, pulled(second, ref))
        await eventually(lambda: _named(store, node_id, "ImagePullProgressed"), what="progress")
        await change_ledger(store, node_id, pulled(late, ref))  # joins the pull under way

        async def all_started() -> bool | None:
            started = {p["kernel_id"] for n, p in await facts(store, node_id)
                       if n == "KernelStarted"}  # fmt: skip
            return True if started >= {first, second, late} else None

        await eventually(all_started, timeout=15, what="every kernel started")
    pulls = [(n, p) for n, p in await facts(store, node_id) if n.startswith("ImagePull")]
    names = [n for n, _ in pulls]
    assert names.count("ImagePullFinished") == 1  # one pull for every kernel
    waiting = {k for n, p in pulls if n == "ImagePullStarted" for k in p["kernels"]}
    assert waiting == {first, second, late}
    done = [p["done_bytes"] for n, p in pulls if n == "ImagePullProgressed"]
    assert done == sorted(done) and done[-1] == 10_000_000
    assert ref in await backend.images()


async def test_a_failed_pull_fails_every_waiting_kernel_with_its_cause(bus: Bus) -> None:
    store = EventStore(bus)
    ref = f"reg.lab:5000/t/{new_id()[:8]}:gone"
    settings, backend = machine(pull_seconds=0.1, pull_failures={ref: "not-found"})
    node_id, one, two = node_id_for_host(settings.hostname), new_id(), new_id()
    async with running(bus, settings, backend):
        both = (pulled(one, ref), pulled(two, ref))
        await change_ledger(store, node_id, lambda node: [allocate(node) for allocate in both])

        async def both_failed() -> list[str] | None:
            reasons = [p["reason"] for n, p in await facts(store, node_id)
                       if n == "KernelFailedToStart"]  # fmt: skip
            return reasons if len(reasons) == 2 else None

        reasons = await eventually(both_failed, what="both kernels failed")
    assert all(r.startswith("image pull failed (not-found: ") and ref in r for r in reasons)
    failed = [p for n, p in await facts(store, node_id) if n == "ImagePullFailed"]
    assert [p["cause"] for p in failed] == ["not-found"]  # one pull, failed once


async def test_credentials_reach_the_agent_sealed_and_an_unknown_registry_is_refused(
    bus: Bus,
) -> None:
    password = f"pw-{new_id()}"
    seen: list[bytes] = []
    watch = await bus.nc.subscribe(f"{REGISTRY_CREDENTIALS_SUBJECT}", cb=_keep(seen))
    replies = await bus.nc.subscribe("_INBOX.>", cb=_keep(seen))
    try:
        async with desk(bus, password) as (_, registry_id):
            ask = RegistryCredentials(bus, "node-x", timeout_s=5)
            assert await ask(registry_id) == RegistryAuth("bot", password)
            try:
                await ask("no-such-registry")
                raise AssertionError("an unknown registry was answered")
            except PullFailedError as exc:
                assert exc.cause == "other" and "no registry with the id" in str(exc)
    finally:
        await watch.unsubscribe()
        await replies.unsubscribe()
    assert seen and all(password.encode() not in data for data in seen)
    answers = [json.loads(d) for d in seen if d.startswith(b'{"box"')]
    assert answers and all(set(a) == {"box"} for a in answers)


async def test_an_agent_pulls_with_the_registrys_credentials(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine(pull_seconds=0.1)
    node_id, kernel, ref = node_id_for_host(settings.hostname), new_id(), f"reg.lab:5000/p:{1}"
    asked: list[RegistryAuth | None] = []
    real_pull = backend.pull

    async def pull(r: str, auth: RegistryAuth | None, progress: Any) -> str:
        asked.append(auth)
        return await real_pull(r, auth, progress)

    backend.pull = pull  # type: ignore[method-assign,assignment]
    async with desk(bus, "s3cret") as (_, registry_id), running(bus, settings, backend):
        await change_ledger(store, node_id, pulled(kernel, ref, registry_id))
        await eventually(lambda: _named(store, node_id, "KernelStarted"), what="the start")
    assert asked == [RegistryAuth("bot", "s3cret")]


async def test_a_pull_cut_by_a_stop_begins_again_and_a_forgotten_one_is_failed(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine(pull_seconds=30.0)
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    ref = f"reg.lab:5000/t/{new_id()[:8]}:1"
    async with running(bus, settings, backend):
        await change_ledger(store, node_id, pulled(kernel, ref))
        await eventually(lambda: _named(store, node_id, "ImagePullStarted"), what="the pull")
    # Stopped mid-pull; the kernel's allocation is gone before the next start.
    await change_ledger(store, node_id, lambda node: node.release(kernel, "gone", NOW))
    async with running(bus, settings, backend):
        await eventually(lambda: _named(store, node_id, "ImagePullFailed"), what="the failure")
    failed = [p for n, p in await facts(store, node_id) if n == "ImagePullFailed"]
    assert failed[0]["reference"] == ref and "interrupted" in failed[0]["reason"]


async def _named(store: EventStore, node_id: str, name: str) -> bool | None:
    return True if any(n == name for n, _ in await facts(store, node_id)) else None


def _keep(into: list[bytes]) -> Any:
    async def keep(msg: Any) -> None:
        into.append(bytes(msg.data))

    return keep


async def test_a_purge_removes_an_unused_image_and_is_refused_for_one_in_use(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine(pull_seconds=0.05, pull_bytes=5000)
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    used, spare = f"reg.lab:5000/t/{new_id()[:8]}:used", f"reg.lab:5000/t/{new_id()[:8]}:spare"
    async with running(bus, settings, backend):
        await change_ledger(store, node_id, pulled(kernel, used))
        await eventually(lambda: _named(store, node_id, "KernelStarted"), what="the start")
        await backend.pull(spare, None, lambda _: None)  # an image nothing uses
        for ref in (used, spare):
            await change_ledger(store, node_id, purge(ref))

        async def answered() -> list[dict[str, Any]] | None:
            found = [p for n, p in await facts(store, node_id) if n == "ImagePurged"]
            return found if len(found) == 2 else None

        purged = await eventually(answered, what="both purges answered")
    by_ref = {p["reference"]: p for p in purged}
    assert by_ref[spare]["freed_bytes"] == 5000 and by_ref[spare]["refused"] == ""
    assert by_ref[used]["freed_bytes"] == 0 and "uses it" in by_ref[used]["refused"]
    assert await backend.images() == sorted([BASE, used])
    images = [p["images"] for n, p in await facts(store, node_id) if n == "AgentImagesChanged"]
    assert spare not in images[-1] and used in images[-1]


async def test_a_disk_budget_evicts_the_least_recently_used_image_no_kernel_uses(
    bus: Bus,
) -> None:
    store = EventStore(bus)
    settings, backend = machine(pull_seconds=0.05, pull_bytes=4000)
    settings = settings.model_copy(update={"image_disk_budget_bytes": 5000})
    node_id, one, two = node_id_for_host(settings.hostname), new_id(), new_id()
    old, new = f"reg.lab:5000/t/{new_id()[:8]}:old", f"reg.lab:5000/t/{new_id()[:8]}:new"
    async with running(bus, settings, backend):
        await change_ledger(store, node_id, pulled(one, old))
        await eventually(lambda: _named(store, node_id, "KernelStarted"), what="the first start")
        await change_ledger(store, node_id, lambda node: node.release(one, "done", NOW))
        await change_ledger(store, node_id, pulled(two, new))

        async def evicted() -> bool | None:
            return True if old not in await backend.images() else None

        await eventually(evicted, what="the old image evicted")
    # Each image is 4000 simulated bytes: only one fits in 5000. The kernel's stays; the
    # others (the base image, never used here, and old, released) went, least recent first.
    assert await backend.images() == [new]


async def test_credentials_wait_for_a_gateway_that_comes_back(bus: Bus) -> None:
    """No gateway answers at first (one restarting): the agent asks again, and the pull goes
    on once one answers; with none at all it fails, saying so."""
    ask = RegistryCredentials(bus, "node-x", timeout_s=1, retries_s=(0.3, 0.3, 0.3, 0.3, 0.3))
    asking = asyncio.create_task(ask(f"registry-{new_id()}"))
    await asyncio.sleep(0.5)  # asked at least once, with nobody there
    assert not asking.done()
    async with desk(bus, "later") as (_, registry_id):
        assert await ask(registry_id) == RegistryAuth("bot", "later")
        try:
            await asking  # a registry this desk does not know: refused, not waited for
            raise AssertionError("an unknown registry was answered")
        except PullFailedError as exc:
            assert "no registry with the id" in str(exc)
    nobody = RegistryCredentials(bus, "node-x", timeout_s=0.5, retries_s=(0.1,))
    try:
        await nobody(registry_id)
        raise AssertionError("answered with no gateway")
    except PullFailedError as exc:
        assert "no gateway answered" in str(exc)
