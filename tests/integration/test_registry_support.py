"""The test registry of ``tests/registry_support.py`` on the real ``docker-registry`` and Docker
engine: it authenticates, stores what is pushed, leaves the engine without the pushed tag, and
serves TLS with its test CA. No subjects."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.registry_support import (
    BASE_IMAGE,
    build_layered_image,
    local_image_exists,
    push,
    remove_local_image,
    running_registry,
)


def test_a_pushed_image_is_in_the_catalog_for_the_user_alone(tmp_path: Path) -> None:
    repo = f"t-{uuid.uuid4().hex[:8]}/busybox"
    with running_registry(tmp_path) as reg:
        digest = push(reg, BASE_IMAGE, f"{repo}:v1")

        status, body = reg.get("/v2/_catalog")
        assert status == 200
        assert repo in json.loads(body)["repositories"]
        assert reg.get("/v2/_catalog", auth=False)[0] == 401
        status, body = reg.get(f"/v2/{repo}/tags/list")
        assert json.loads(body)["tags"] == ["v1"]
        assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
        # The engine holds neither the pushed tag nor its digest: a pull must fetch it.
        assert not local_image_exists(f"{reg.host}/{repo}:v1")
        assert not local_image_exists(f"{reg.host}/{repo}@{digest}")
        assert local_image_exists(BASE_IMAGE)
    assert reg.process.poll() is not None


def test_tls_registry_is_trusted_with_its_ca_alone(tmp_path: Path) -> None:
    with running_registry(tmp_path, tls_name="registry.jetyard.test") as reg:
        assert reg.url.startswith("https://") and reg.ca_pem and reg.ca_path
        assert reg.ca_path.read_text() == reg.ca_pem
        assert reg.get("/v2/")[0] == 200
        with pytest.raises(urllib.error.URLError) as caught:
            urllib.request.urlopen(
                reg.url + "/v2/", timeout=5, context=ssl.create_default_context()
            )
        assert isinstance(caught.value.reason, ssl.SSLCertVerificationError)


def test_a_layered_image_has_its_layers_and_labels(tmp_path: Path) -> None:
    tag = f"jetyard-layered-{uuid.uuid4().hex[:8]}:v1"
    labels = {"ai.backend.resource.min.mem": "1g", "jetyard.service-ports": '[{"a": "$HOME"}]'}
    try:
        build_layered_image(tag, layers=2, layer_bytes=4096, labels=labels)
        inspect = json.loads(
            subprocess.run(
                ["docker", "image", "inspect", tag], capture_output=True, check=True
            ).stdout
        )[0]
        base = json.loads(
            subprocess.run(
                ["docker", "image", "inspect", BASE_IMAGE], capture_output=True, check=True
            ).stdout
        )[0]
        assert len(inspect["RootFS"]["Layers"]) == len(base["RootFS"]["Layers"]) + 2
        assert {k: inspect["Config"]["Labels"][k] for k in labels} == labels
    finally:
        remove_local_image(tag)
    assert not local_image_exists(tag)
