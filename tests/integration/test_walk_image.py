"""The README's image made where it is missing (``jetyard.runtime.walk_image``), on the real
Docker engine from Debian's ``busybox-static``: under a name of this test's own, it runs a
shell with the applets the walk uses, and a second ``ensure`` finds it and makes nothing."""

from __future__ import annotations

import subprocess

from jetyard.runtime import walk_image
from schemas.ids import new_id


def test_the_walk_image_is_made_once_and_runs_a_shell() -> None:
    image = f"jetyard-walk-test:{new_id()[:12].lower()}"
    said: list[str] = []
    try:
        assert walk_image.ensure(image, said.append), said
        assert said == [
            f"making the image {image} (Debian's busybox-static, docker import)...",
            f"made {image}",
        ]
        ran = subprocess.run(
            ["docker", "run", "--rm", image, "sh", "-c", "echo hello; env | grep ^PATH; sleep 0"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines() == ["hello", "PATH=/bin"]
        again: list[str] = []
        assert walk_image.ensure(image, again.append) and again == []
    finally:
        subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True, check=False)
