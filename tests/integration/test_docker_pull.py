"""Pulling on the real Docker engine from a real registry (``tests/registry_support.py``):
``docker_pull`` and ``ImagePuller`` over it fetch what was pushed with growing progress and its
digest, a refused pull says why (wrong password, unknown tag, registry gone), and pulled images
are listed and removed (``services/node/docker_pull.py``). Each test removes what it pulled."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiodocker
import pytest

from schemas.images import PullCause
from services.node.docker_pull import docker_pull, local_images, remove_image
from services.node.image_budget import ImageInUseError
from services.node.pulls import (
    ImagePuller,
    ProgressCallback,
    PullFailedError,
    PullProgress,
    RegistryAuth,
)
from tests.integration.docker_support import open_docker
from tests.registry_support import (
    Registry,
    build_layered_image,
    local_image_exists,
    push,
    remove_local_image,
    running_registry,
)

LAYERS, LAYER_BYTES = 2, 3 << 20


@dataclass(frozen=True)
class Pushed:
    registry: Registry
    ref: str
    digest: str

    @property
    def auth(self) -> RegistryAuth:
        return RegistryAuth(self.registry.username, self.registry.password)


@pytest.fixture
def pushed(tmp_path: Path) -> Iterator[Pushed]:
    """A registry holding a fresh image of two 3 MB random layers, which the engine has not."""
    name = f"jy-pull-{uuid.uuid4().hex[:10]}"
    with running_registry(tmp_path) as registry:
        local = build_layered_image(f"{name}:v1", LAYERS, LAYER_BYTES)
        try:
            digest = push(registry, local, f"{name}/app:v1")
        finally:
            remove_local_image(local)
        ref = f"{registry.host}/{name}/app:v1"
        assert not local_image_exists(ref)
        try:
            yield Pushed(registry, ref, digest)
        finally:
            remove_local_image(ref)


@pytest.fixture
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client = await open_docker()
    yield client
    await client.close()


async def test_a_pull_fetches_the_pushed_image_with_growing_progress(
    docker: aiodocker.Docker, pushed: Pushed
) -> None:
    seen: list[PullProgress] = []
    digest = await docker_pull(docker, pushed.ref, pushed.auth, seen.append)
    assert digest == pushed.digest
    assert local_image_exists(pushed.ref)
    done = [p.done_bytes for p in seen]
    assert done == sorted(done) and len(set(done)) > 1
    last = seen[-1]
    assert last.done_bytes == last.total_bytes >= LAYERS * LAYER_BYTES  # compressed random bytes
    assert sum(1 for x in last.layers if x.total_bytes > 0) == LAYERS

    [image] = [i for i in await local_images(docker) if pushed.ref in i.refs]
    assert image.size_bytes >= LAYERS * LAYER_BYTES
    assert f"{pushed.ref.rsplit(':', 1)[0]}@{pushed.digest}" in image.repo_digests
    assert image.last_used >= image.created

    assert await remove_image(docker, pushed.ref) == image.size_bytes
    assert not local_image_exists(pushed.ref)
    assert await remove_image(docker, pushed.ref) == 0  # not there: nothing freed


@pytest.mark.parametrize(
    ("what", "cause"),
    [("wrong password", "authentication"), ("no credentials", "authentication"),
     ("unknown tag", "not-found"), ("registry gone", "unreachable")],
)  # fmt: skip
async def test_a_refused_pull_says_why(
    docker: aiodocker.Docker, pushed: Pushed, what: str, cause: PullCause
) -> None:
    ref, auth, password = pushed.ref, pushed.auth, pushed.registry.password
    auth_used: RegistryAuth | None = auth
    if what == "wrong password":
        auth_used = RegistryAuth(auth.username, "not-" + password)
    elif what == "no credentials":
        auth_used = None
    elif what == "unknown tag":
        ref = ref.rsplit(":", 1)[0] + ":nope"
    else:
        pushed.registry.stop()
    with pytest.raises(PullFailedError) as failed:
        await docker_pull(docker, ref, auth_used, lambda _: None)
    assert failed.value.cause == cause, str(failed.value)
    assert password not in str(failed.value)
    assert not local_image_exists(ref)


async def test_an_image_a_container_uses_is_not_removed(
    docker: aiodocker.Docker, pushed: Pushed
) -> None:
    await docker_pull(docker, pushed.ref, pushed.auth, lambda _: None)
    container = await docker.containers.create({"Image": pushed.ref, "Cmd": ["true"]})
    try:
        with pytest.raises(ImageInUseError, match="used by a container"):
            await remove_image(docker, pushed.ref)
        assert local_image_exists(pushed.ref)
    finally:
        await container.delete(force=True)


@dataclass
class Told:
    calls: list[tuple[str, object]] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    async def pull_started(self, ref: str) -> None:
        self.calls.append(("started", None))

    async def pull_progressed(self, ref: str, progress: PullProgress) -> None:
        self.calls.append(("progressed", progress))

    async def pull_finished(self, ref: str, digest: str) -> None:
        self.calls.append(("finished", digest))

    async def pull_failed(self, ref: str, cause: PullCause, reason: str) -> None:
        self.calls.append(("failed", (cause, reason)))


@dataclass
class Engine:
    """``Pulling`` on the engine, as ``DockerBackend.pull`` is."""

    docker: aiodocker.Docker

    async def pull(self, ref: str, auth: RegistryAuth | None, progress: ProgressCallback) -> str:
        return await docker_pull(self.docker, ref, auth, progress)


async def test_the_puller_pulls_once_for_many_and_ends_at_the_total(
    docker: aiodocker.Docker, pushed: Pushed
) -> None:
    told = Told()
    fetched: list[str] = []

    async def credentials(registry_id: str) -> RegistryAuth | None:
        fetched.append(registry_id)
        return pushed.auth

    puller = ImagePuller(
        Engine(docker), told, credentials=credentials, done=told.ended.set, throttle_s=0.05
    )
    try:
        for _ in range(3):
            puller.request(pushed.ref, "reg-1")
        await asyncio.wait_for(told.ended.wait(), 120)
        state = puller.state(pushed.ref)
        assert state is not None and (state.status, state.digest) == ("done", pushed.digest)
        assert fetched == ["reg-1"]
        assert [w for w, _ in told.calls if w != "progressed"] == ["started", "finished"]
        final = told.calls[-2][1]
        assert isinstance(final, PullProgress)
        assert final.done_bytes == final.total_bytes >= LAYERS * LAYER_BYTES
    finally:
        await puller.close()
        await remove_image(docker, pushed.ref)
