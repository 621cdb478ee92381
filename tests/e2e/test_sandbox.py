"""A session's sandbox end to end on a real ``jetyard up`` with Docker: a batch session of the
default group, started through GraphQL with a folder mounted read-write, cannot make a device
node in it (nothing appears on the host's disk), runs with no-new-privileges and without the
dropped capabilities, and what it leaves in the folder lies under a directory only root (or the
stack's user) can enter."""

from __future__ import annotations

from pathlib import Path

from schemas.vfolder import folder_relpath
from services.node.mounts import private_ancestor
from tests.e2e.conftest import Jetyard
from tests.e2e.test_vfolders import admin_of

# MKNOD 27, NET_RAW 13, AUDIT_WRITE 29, SETFCAP 31 (linux/capability.h).
DROPPED = (1 << 27) | (1 << 13) | (1 << 29) | (1 << 31)
PROBE = (
    "cd /home/work/devs; "
    "if mknod null c 1 3; then echo made-a-device; fi; "
    "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status"
)


def test_a_session_cannot_make_a_device_node_in_its_folder(jetyard_docker: Jetyard) -> None:
    me = admin_of(jetyard_docker)
    me.ok("create", "devs")

    ended = me.finished(me.start_session(PROBE, [{"folder": "devs"}], type="batch"))

    assert (ended["session"]["status"], ended["session"]["exitCode"]) == ("TERMINATED", 0), ended
    logs = ended["sessionLogs"]
    assert "mknod: null: Operation not permitted" in logs, logs
    assert "made-a-device" not in logs
    status = dict(
        line.split(":", 1) for line in logs.splitlines() if line.startswith(("CapEff", "NoNew"))
    )
    assert status["NoNewPrivs"].strip() == "1", logs
    assert int(status["CapEff"], 16) & DROPPED == 0, logs

    host = jetyard_docker.data_dir / "volumes" / "local" / folder_relpath(me.folder_id("devs"))
    assert host.is_dir() and not (host / "null").exists()
    assert private_ancestor(Path(host)) is not None
