"""The image the README's walk runs, ``jetyard-busybox:latest``: made when it is missing, so that
the walk works on a machine where only ``jetyard up`` ran. No registry is needed: Debian's
``busybox-static`` is downloaded with ``apt-get download``, unpacked with ``dpkg -x``, given a
shell's worth of applet links, ``/tmp`` and an ``/etc/passwd``, and imported with
``docker import`` (2 MiB; it starts in milliseconds). ``jetyard up`` calls ``ensure`` before
it starts the node agent (which then reports the image); ``scripts/ensure-docker`` runs this
module for the tests.

Only where a Docker engine answers; where there is no ``apt-get`` it says how to make the image
instead. Reads and writes no subject.

``python -m jetyard.runtime.walk_image [IMAGE]``: make sure IMAGE (default the walk's) exists.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

WALK_IMAGE = "jetyard-busybox:latest"
TIMEOUT_S = 300


def _quiet(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, timeout=TIMEOUT_S, check=False, **kwargs)  # type: ignore[call-overload, no-any-return]


def engine_answers() -> bool:
    return shutil.which("docker") is not None and _quiet(["docker", "info"]).returncode == 0


def present(image: str) -> bool:
    return _quiet(["docker", "image", "inspect", image]).returncode == 0


def _root_tar(busybox: Path) -> bytes:
    """The image's filesystem: ``/bin/busybox`` and a link per applet, ``/tmp``, ``/etc``."""
    listed = _quiet([str(busybox), "--list"])
    if listed.returncode != 0:
        raise RuntimeError(f"{busybox} --list failed: {listed.stderr.decode(errors='replace')}")
    applets = sorted(set(listed.stdout.decode().split()) - {"busybox"})
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, mode in (("bin", 0o755), ("etc", 0o755), ("tmp", 0o1777)):
            entry = tarfile.TarInfo(name)
            entry.type, entry.mode = tarfile.DIRTYPE, mode
            tar.addfile(entry)
        tar.add(str(busybox), "bin/busybox")
        for applet in applets:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(link)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        entry = tarfile.TarInfo("etc/passwd")
        entry.size, entry.mode = len(passwd), 0o644
        tar.addfile(entry, io.BytesIO(passwd))
    return data.getvalue()


def build(image: str) -> None:
    """Download, unpack and import; ``RuntimeError`` saying which step failed."""
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise RuntimeError(
            "this is not a Debian-like machine (no apt-get/dpkg): import any image with a "
            f"/bin/sh as {image} (e.g. `docker import` of a busybox root filesystem)"
        )
    with tempfile.TemporaryDirectory(prefix="jetyard-image-") as work:
        fetched = _quiet(["apt-get", "download", "-q", "busybox-static"], cwd=work)
        debs = sorted(Path(work).glob("busybox-static_*.deb"))
        if fetched.returncode != 0 or not debs:
            why = fetched.stderr.decode(errors="replace").strip()
            raise RuntimeError(f"apt-get download busybox-static failed: {why}")
        unpacked = Path(work) / "pkg"
        if _quiet(["dpkg", "-x", str(debs[0]), str(unpacked)]).returncode != 0:
            raise RuntimeError(f"dpkg -x {debs[0].name} failed")
        tar = _root_tar(unpacked / "bin" / "busybox")
    imported = _quiet(
        ["docker", "import", "-c", 'CMD ["/bin/sh"]', "-c", "ENV PATH=/bin", "-", image],
        input=tar,
    )
    if imported.returncode != 0:
        raise RuntimeError(f"docker import failed: {imported.stderr.decode(errors='replace')}")


def ensure(image: str = WALK_IMAGE, say: Callable[[str], None] = print) -> bool:
    """Whether ``image`` exists now (made if it was missing); what happened is said."""
    if not engine_answers():
        return False
    if present(image):
        return True
    say(f"making the image {image} (Debian's busybox-static, docker import)...")
    try:
        build(image)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        say(f"could not make {image}: {exc}")
        return False
    say(f"made {image}")
    return True


if __name__ == "__main__":
    sys.exit(0 if ensure(sys.argv[1] if len(sys.argv) > 1 else WALK_IMAGE) else 1)
