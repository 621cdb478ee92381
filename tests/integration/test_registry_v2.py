"""The registry client against a real registry (``tests/registry_support.py``): the scan finds
what was pushed with the pushed digests and the image's labels, pages through a catalog one
repository at a time, picks the platform from a manifest list or OCI index, and says what is
wrong (credentials, address, TLS, names) in an error of the right kind. No subjects."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.gateway.images.registry_v2 import (
    DOCKER_LIST,
    OCI_INDEX,
    RegistryClient,
    RegistryError,
    ScanProgress,
)
from tests.registry_support import (
    BASE_IMAGE,
    Registry,
    build_layered_image,
    push,
    remove_local_image,
    running_registry,
)

LABELS = {"ai.backend.resource.min.mem": "1g", "ai.backend.service-ports": "jupyter:http:8888"}
LAYERS, LAYER_BYTES = 2, 64 * 1024


@dataclass(frozen=True)
class Pushed:
    registry: Registry
    digests: dict[str, str]
    """``repo:tag`` -> manifest digest."""
    layered: str
    """``repo:tag`` of the image with labels."""


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    local = f"jetyard-layered-{uuid.uuid4().hex[:8]}:v1"
    with running_registry(tmp_path_factory.mktemp("registry")) as reg:
        digests = {
            name: push(reg, BASE_IMAGE, name)
            for name in (f"{prefix}/a:v1", f"{prefix}/a:v2", f"{prefix}/b:v1", f"{prefix}/b:v2")
        }
        layered = f"{prefix}/layered:v1"
        try:
            build_layered_image(local, LAYERS, LAYER_BYTES, LABELS)
            digests[layered] = push(reg, local, layered)
        finally:
            remove_local_image(local)
        yield Pushed(reg, digests, layered)


def client(
    reg: Registry, *, trust_ca: bool = True, verify_tls: bool = True, page_size: int = 100
) -> RegistryClient:
    """A client of ``reg`` with its credentials (and its CA, unless ``trust_ca`` is false)."""
    return RegistryClient(
        reg.url,
        reg.username,
        reg.password,
        ca_pem=reg.ca_pem if trust_ca else None,
        verify_tls=verify_tls,
        page_size=page_size,
    )


def put_manifest(reg: Registry, repo: str, tag: str, media_type: str, body: bytes) -> None:
    request = urllib.request.Request(
        f"{reg.url}/v2/{repo}/manifests/{tag}", data=body, method="PUT"
    )
    token = base64.b64encode(f"{reg.username}:{reg.password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    request.add_header("Content-Type", media_type)
    with urllib.request.urlopen(request, timeout=5) as reply:
        assert reply.status == 201


def index(media_type: str, entries: list[tuple[str, str]]) -> bytes:
    """A manifest list or OCI index of (manifest digest, linux architecture)."""
    manifests = [
        {
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "digest": digest,
            "size": 1,
            "platform": {"os": "linux", "architecture": arch},
        }
        for digest, arch in entries
    ]
    return json.dumps(
        {"schemaVersion": 2, "mediaType": media_type, "manifests": manifests}
    ).encode()


async def test_scan_finds_every_tag_with_its_pushed_digest_and_labels(pushed: Pushed) -> None:
    seen: list[ScanProgress] = []
    async with client(pushed.registry) as c:
        result = await c.scan(progress=seen.append)

    host = pushed.registry.host
    assert result.skipped == ()
    assert {i.ref: i.digest for i in result.images} == {
        f"{host}/{name}": digest for name, digest in pushed.digests.items()
    }
    layered = next(i for i in result.images if f"{i.repo}:{i.tag}" == pushed.layered)
    assert {k: layered.labels[k] for k in LABELS} == LABELS
    assert layered.architecture == "amd64"
    assert layered.config_digest.startswith("sha256:")
    assert layered.size_bytes > LAYERS * LAYER_BYTES
    plain = next(i for i in result.images if i.repo != layered.repo)
    assert plain.labels == {}
    assert seen[-1] == ScanProgress(repos_done=3, repos_total=3, tags_done=5, tags_total=5)


async def test_catalog_and_tags_page_one_name_at_a_time(pushed: Pushed) -> None:
    repos = sorted({name.split(":")[0] for name in pushed.digests})
    async with client(pushed.registry, page_size=1) as c:
        listed = [repo async for repo in c.catalog()]
        tags = await c.tags(repos[0])

    assert listed == repos
    assert sorted(tags) == ["v1", "v2"]


async def test_scan_of_named_repos_skips_the_missing_one(pushed: Pushed) -> None:
    repo = pushed.layered.split(":")[0]
    async with client(pushed.registry) as c:
        result = await c.scan([repo, "no/such-repo"], concurrency=1)

    assert [f"{i.repo}:{i.tag}" for i in result.images] == [pushed.layered]
    [(ref, reason)] = result.skipped
    assert ref == f"{pushed.registry.host}/no/such-repo"
    assert "not found" in reason and "NAME_UNKNOWN" in reason


@pytest.mark.parametrize("media_type", [DOCKER_LIST, OCI_INDEX])
async def test_an_index_gives_the_manifest_of_the_asked_platform(
    tmp_path: Path, media_type: str
) -> None:
    repo, local = f"t-{uuid.uuid4().hex[:8]}/multi", f"jetyard-layered-{uuid.uuid4().hex[:8]}:v1"
    # A registry of its own: the index's tags stay out of the other tests' scans.
    with running_registry(tmp_path) as reg:
        # Both entries must live in the index's repository.
        plain = push(reg, BASE_IMAGE, f"{repo}:plain")
        try:
            layered = push(reg, build_layered_image(local, 1, 1024, {}), f"{repo}:layered")
        finally:
            remove_local_image(local)
        async with client(reg) as c:
            sizes = {d: (await c.manifest(repo, d)).size_bytes for d in (plain, layered)}
            entries = [(plain, "arm64"), (layered, "amd64")]
            put_manifest(reg, repo, "multi", media_type, index(media_type, entries))
            put_manifest(reg, repo, "arm-only", media_type, index(media_type, entries[:1]))

            amd64 = await c.manifest(repo, "multi")
            arm64 = await c.manifest(repo, "multi", architecture="arm64")
            with pytest.raises(RegistryError) as missing:
                await c.manifest(repo, "arm-only")
            result = await c.scan([repo])

    assert (amd64.digest, arm64.digest) == (layered, plain)
    assert amd64.index_digest is not None and amd64.index_digest.startswith("sha256:")
    assert amd64.size_bytes == sizes[layered]
    assert missing.value.kind == "not-found"
    assert (
        "no linux/amd64 image" in missing.value.message and "linux/arm64" in missing.value.message
    )
    assert {i.tag: i.digest for i in result.images}["multi"] == layered
    assert [ref.rsplit(":", 1)[1] for ref, _ in result.skipped] == ["arm-only"]


async def test_unknown_repo_or_tag_is_not_found(pushed: Pushed) -> None:
    repo = pushed.layered.split(":")[0]
    async with client(pushed.registry) as c:
        for name, tag in (("no/such-repo", "v1"), (repo, "no-such-tag")):
            with pytest.raises(RegistryError) as caught:
                await c.manifest(name, tag)
            assert caught.value.kind == "not-found"
            assert f"{pushed.registry.url}/v2/{name}/manifests/{tag}" in caught.value.message
        # A name no repository can have never reaches the URL (".." would climb out of /v2/).
        for name, tag in (("../v2/x", "v1"), (repo, "../../_catalog")):
            with pytest.raises(RegistryError) as caught:
                await c.manifest(name, tag)
            assert caught.value.kind == "not-found"
            assert "is not a" in caught.value.message


async def test_wrong_password_is_an_authentication_error_that_keeps_it_secret(
    pushed: Pushed,
) -> None:
    reg = pushed.registry
    wrong = "not-" + reg.password
    async with RegistryClient(reg.url, reg.username, wrong) as c:
        with pytest.raises(RegistryError) as caught:
            await c.scan()
    async with RegistryClient(reg.url) as anonymous:
        with pytest.raises(RegistryError) as refused:
            await anonymous.tags(pushed.layered.split(":")[0])

    assert caught.value.kind == "authentication"
    assert reg.url in caught.value.message and reg.username in caught.value.message
    assert wrong not in caught.value.message and wrong not in repr(caught.value)
    assert refused.value.kind == "authentication"


async def test_a_closed_port_is_unreachable(tmp_path: Path) -> None:
    # The port of a registry stopped a moment ago: nothing listens there.
    with running_registry(tmp_path) as gone:
        url = gone.url
    async with RegistryClient(url, "someone", "secret", timeout_s=5) as c:
        with pytest.raises(RegistryError) as caught:
            await c.ping()

    assert caught.value.kind == "unreachable"
    assert url in caught.value.message


async def test_tls_registry_is_read_with_its_ca_and_refused_without(tmp_path: Path) -> None:
    repo = f"t-{uuid.uuid4().hex[:8]}/tls:v1"
    with running_registry(tmp_path, tls_name="registry.jetyard.test") as reg:
        digest = push(reg, BASE_IMAGE, repo)
        async with client(reg) as trusted:
            result = await trusted.scan()
        async with client(reg, trust_ca=False) as untrusted:
            with pytest.raises(RegistryError) as caught:
                await untrusted.ping()
        async with client(reg, trust_ca=False, verify_tls=False) as unverified:
            await unverified.ping()
        async with RegistryClient(
            reg.url.replace("https:", "http:"), reg.username, reg.password
        ) as plain:
            with pytest.raises(RegistryError) as wrong_scheme:
                await plain.ping()

    assert [(i.ref, i.digest) for i in result.images] == [(f"{reg.host}/{repo}", digest)]
    assert caught.value.kind == "tls"
    assert reg.url in caught.value.message
    assert wrong_scheme.value.kind == "protocol"


async def test_a_token_registry_is_read_with_one_token_per_scope(tmp_path: Path) -> None:
    repos = [f"t-{uuid.uuid4().hex[:8]}/{name}" for name in ("a", "b")]
    with running_registry(tmp_path, token_auth=True) as reg:
        assert reg.tokens is not None
        digests = {f"{reg.host}/{repo}:v1": push(reg, BASE_IMAGE, f"{repo}:v1") for repo in repos}
        reg.tokens.scopes.clear()
        async with client(reg) as c:
            result = await c.scan()
            again = await c.scan()
        asked = list(reg.tokens.scopes)
        async with RegistryClient(reg.url, reg.username, "not-" + reg.password) as wrong:
            with pytest.raises(RegistryError) as caught:
                await wrong.scan()

    assert {i.ref: i.digest for i in result.images} == digests
    assert again == result
    # The second scan reuses every token of the first.
    assert sorted(asked) == sorted(
        ["", "registry:catalog:*", *(f"repository:{repo}:pull" for repo in repos)]
    )
    assert caught.value.kind == "authentication"
    assert reg.tokens.realm in caught.value.message and reg.username in caught.value.message
