"""``jetyard registry`` and a registry image through ``jetyard run``, as a superadmin types them,
on one real ``jetyard up`` with Docker and a real registry with htpasswd authentication
(``tests/registry_support``):

- ``registry add --password-stdin`` keeps the password out of the arguments, and ``ls`` (the
  table and ``--json``) says a secret is set without ever showing it;
- ``rescan`` prints the image it registered; a second one finds it unchanged;
- ``run`` of the image draws the pull on stderr (bytes in human units) and exits 0 with the
  command's output; ``images`` shows the image with its registry (and its digest in JSON);
- ``pull-policy always`` pulls it again: with a wrong password (``modify``) the run fails
  naming authentication; ``pull-policy group`` clears it; ``rm`` removes the registry;
- a wrong password: ``rescan`` exits 1 naming authentication; bad input exits 2."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Jetyard
from tests.e2e.user_support import jetyard, keypair_env, stack_for, user_env
from tests.registry_support import (
    Registry,
    build_layered_image,
    push,
    remove_local_image,
    running_registry,
)

pytestmark = pytest.mark.timeout(300)

POLICY = "{ images(first: 100) { name pullPolicy } }"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with running_registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg


@pytest.fixture(scope="module")
def signed_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Jetyard, dict[str, str]]]:
    """The stack and an environment signed in as its superadmin (the env's keypair)."""
    tmp = tmp_path_factory.mktemp("registry-cli")
    env = user_env(tmp)
    stack = stack_for(tmp, env, "docker").start()
    try:
        yield stack, {**env, **keypair_env(stack)}
    finally:
        stack.stop()


@pytest.fixture
def image(registry: Registry) -> Iterator[str]:
    """A fresh two-layer image in the registry, absent from the engine: its reference."""
    local = build_layered_image(f"jy-cli-src-{uuid.uuid4().hex[:8]}:v1", 2, 4 << 20)
    repo = f"cli-{uuid.uuid4().hex[:8]}/tool:v1"
    try:
        push(registry, local, repo)
    finally:
        remove_local_image(local)
    ref = f"{registry.host}/{repo}"
    yield ref
    remove_local_image(ref)


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_registry_add_ls_rescan_run_images_policy_rm(
    registry: Registry, signed_in: tuple[Jetyard, dict[str, str]], image: str
) -> None:
    stack, env = signed_in
    name = f"lab{uuid.uuid4().hex[:6]}"
    said: list[str] = []

    def cli(*args: str, typed: str | None = None) -> subprocess.CompletedProcess[str]:
        done = jetyard(env, *args, typed=typed)
        said.extend((done.stdout, done.stderr))
        return done

    added = cli("registry", "add", name, registry.url, "--username", registry.username,
                "--password-stdin", typed=registry.password + "\n")  # fmt: skip
    assert added.returncode == 0, added.stderr

    table = cli("registry", "ls")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith(name))
    assert registry.url in row and " set " in f" {row} " and "every project" in row, row
    listed = [r for r in _lines(cli("registry", "ls", "--json").stdout) if r["name"] == name]
    assert listed and listed[0]["hasSecret"] is True and listed[0]["url"] == registry.url

    first = cli("registry", "rescan", name)
    assert first.returncode == 0, first.stderr
    assert f"registered  {image}" in first.stdout, first.stdout
    again = cli("registry", "rescan", name, "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["registered"] == [] and result["updated"] == [], result
    assert result["unchanged"] >= 1, result

    ran = cli("run", image, "--cpu", "0.5", "--memory", "64m", "--", "sh", "-c",
              "echo ran-from-the-lab")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "ran-from-the-lab" in ran.stdout
    assert f"pulling {image} on " in ran.stderr and "PULLING" in ran.stderr, ran.stderr
    assert f"pulled {image} on " in ran.stderr and "MiB)" in ran.stderr, ran.stderr

    images = cli("images")
    assert images.returncode == 0, images.stderr
    shown = next(line for line in images.stdout.splitlines() if line.startswith(image))
    assert name in shown.split(), shown
    held = [i for i in _lines(cli("images", "--json").stdout) if i["name"] == image]
    assert held[0]["registry"] == name and held[0]["digest"].startswith("sha256:"), held
    assert held[0]["hosts"] and held[0]["hosts"][0] in shown.split(), (held, shown)  # held on

    def policy() -> str | None:
        found = stack.gql(POLICY)["data"]["images"]
        chosen: str | None = next(i["pullPolicy"] for i in found if i["name"] == image)
        return chosen

    assert cli("registry", "pull-policy", image, "always").returncode == 0
    assert policy() == "always"
    # Pulled again on every run now, with a password the registry refuses: the run fails.
    wrong_password = f"not-{registry.password}"
    changed = cli("registry", "modify", name, "--password-stdin", typed=wrong_password + "\n")
    assert changed.returncode == 0, changed.stderr
    failed = cli("run", image, "--cpu", "0.5", "--memory", "64m", "--", "true")
    assert failed.returncode == 1, (failed.stdout, failed.stderr)
    assert f"pulling {image} on " in failed.stderr, failed.stderr
    assert "failed (authentication)" in failed.stderr and "ERROR" in failed.stderr, failed.stderr
    assert cli("registry", "pull-policy", image, "group").returncode == 0
    assert policy() is None
    assert cli("registry", "pull-policy", image, "sometimes").returncode == 2

    wrong = f"wrong{uuid.uuid4().hex[:6]}"
    bad = cli("registry", "add", wrong, registry.url, "--username", registry.username,
              "--password-stdin", typed=wrong_password + "\n")  # fmt: skip
    assert bad.returncode == 0, bad.stderr
    refused = cli("registry", "rescan", wrong)
    assert refused.returncode == 1 and "authentication" in refused.stderr, refused.stderr
    unreadable = cli("registry", "add", "other", registry.url, "--ca-file", "/nonexistent.pem")
    assert unreadable.returncode == 2 and "CA file" in unreadable.stderr, unreadable.stderr

    for gone in (name, wrong):
        assert cli("registry", "rm", gone).returncode == 0
    assert name not in cli("registry", "ls").stdout
    removed = [r for r in _lines(cli("registry", "ls", "--all", "--json").stdout)
               if r["name"] == name]  # fmt: skip
    assert removed and removed[0]["removed"] is True
    assert not [text for text in said if registry.password in text]
