"""Virtual folders end to end on a real ``jetyard up`` with Docker, as a user drives them:
``jetyard vfolder`` in a subprocess for the folders and their files, GraphQL for sessions.

- a file uploaded with the CLI is read by a batch session that mounts its folder and writes
  a result into it; the result downloaded with the CLI is byte-identical to what the
  session's command produces;
- a folder shared read-only: the other user's session reads it and its write fails; once
  the share is revoked, a new session of theirs cannot mount it;
- a folder mounted by a live session cannot be trashed nor purged; an upload beyond a
  folder's quota is refused and leaves nothing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.tenancy import project_id_for
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until

JETYARD = str(Path(sys.executable).parent / "jetyard")
CREATE = """
mutation($input: CreateSessionInput!) {
  createSession(input: $input) { status code message sessionId }
}"""
SESSION = """
query($id: ID!) {
  session(id: $id) { status statusReason exitCode mounts { folderId name path readOnly } }
  sessionLogs(id: $id)
}"""


class User:
    """Someone with a keypair: the CLI and GraphQL as them."""

    def __init__(self, stack: Jetyard, access_key: str, secret_key: str, email: str) -> None:
        self.stack, self.email = stack, email
        self.access_key, self.secret_key = access_key, secret_key

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "JETYARD_ENDPOINT": self.stack.url,
            "JETYARD_ACCESS_KEY": self.access_key,
            "JETYARD_SECRET_KEY": self.secret_key,
        }
        return subprocess.run(
            [JETYARD, "vfolder", *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        done = self.cli(*args, cwd=cwd)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def gql(self, query: str, **variables: Any) -> dict[str, Any]:
        response = httpx.post(
            f"{self.stack.url}/graphql",
            json={"query": query, "variables": variables},
            auth=JetyardAuth(self.access_key, self.secret_key),
            timeout=60,
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def folder_id(self, name: str) -> str:
        info = self.gql("query($id: String!) { vfolder(id: $id) { id } }", id=name)
        assert info["data"]["vfolder"] is not None, info
        found: str = info["data"]["vfolder"]["id"]
        return found

    def create_session(
        self, command: str, mounts: list[dict[str, Any]], **spec: Any
    ) -> dict[str, Any]:
        return self.gql(
            CREATE,
            input={
                "image": TEST_IMAGE,
                "cpu": "0.5",
                "memory": "64m",
                "mounts": mounts,
                "command": ["sh", "-c", command],
                **spec,
            },
        )

    def start_session(self, command: str, mounts: list[dict[str, Any]], **spec: Any) -> str:
        answer = self.create_session(command, mounts, **spec)
        assert "errors" not in answer, answer
        outcome: dict[str, Any] = answer["data"]["createSession"]
        assert outcome["status"] == "ACCEPTED", outcome
        session_id: str = outcome["sessionId"]
        return session_id

    def finished(
        self,
        session_id: str,
        wanted: frozenset[str] = frozenset({"TERMINATED", "ERROR"}),
        timeout: float = 90,
    ) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def done() -> bool:
            nonlocal seen
            seen = self.gql(SESSION, id=session_id)["data"]
            return (seen["session"] or {}).get("status") in wanted

        wait_until(done, f"session {session_id} reached {set(wanted)}", timeout)
        return seen


def admin_of(stack: Jetyard) -> User:
    admin = stack.admin
    return User(stack, admin["access_key"], admin["secret_key"], admin["email"])


def another_user(stack: Jetyard) -> User:
    """A plain user of the default domain and project, with a keypair (the admin API)."""
    email = f"researcher-{new_id()[:6]}@example.org"
    created = stack.gql(
        """mutation($e: String!, $p: [ID!]) { createUser(email: $e, password: "pw-123456",
             domain: "default", role: "user", projects: $p) { id } }""",
        e=email,
        p=[project_id_for("default", "default")],
    )
    assert "errors" not in created, created
    user_id = created["data"]["createUser"]["id"]
    issued = stack.gql(
        "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }", u=user_id
    )
    assert "errors" not in issued, issued
    keys = issued["data"]["createKeypair"]
    return User(stack, keys["accessKey"], keys["secretKey"], email)


def test_upload_run_on_it_and_download_the_result(jetyard_docker: Jetyard, tmp_path: Path) -> None:
    me = admin_of(jetyard_docker)
    assert "created work" in me.ok("create", "work")
    text = "".join(
        f"line {n}: the quick brown fox {hashlib.sha256(str(n).encode()).hexdigest()}\n"
        for n in range(5000)
    )
    (tmp_path / "input.txt").write_text(text)
    assert "uploaded" in me.ok("upload", "work", str(tmp_path / "input.txt"), "data/", "-q")
    listed = me.ok("files", "work", "data", "--json")
    assert '"name": "input.txt"' in listed and f'"size": {len(text)}' in listed

    command = (
        "set -e; cd /home/work/work; tr a-z A-Z < data/input.txt > result.txt; "
        "sha256sum data/input.txt >> result.txt"
    )
    ended = me.finished(me.start_session(command, [{"folder": "work"}], type="batch"))
    assert ended["session"]["status"] == "TERMINATED", ended
    assert ended["session"]["exitCode"] == 0, ended
    mount = ended["session"]["mounts"][0]
    assert (mount["name"], mount["path"], mount["readOnly"]) == ("work", "/home/work/work", False)

    me.ok("download", "work", "result.txt", str(tmp_path / "result.txt"), "-q")
    digest = hashlib.sha256(text.encode()).hexdigest()
    expected = text.upper() + f"{digest}  data/input.txt\n"
    assert (tmp_path / "result.txt").read_bytes() == expected.encode()

    # The whole folder comes back as a tree, with the input and the result.
    me.ok("download", "work", "", str(tmp_path / "everything"), "-q")
    assert (tmp_path / "everything" / "data" / "input.txt").read_text() == text
    assert (tmp_path / "everything" / "result.txt").read_bytes() == expected.encode()


def test_a_read_only_share_reads_refuses_writes_and_ends_with_the_revoke(
    jetyard_docker: Jetyard, tmp_path: Path
) -> None:
    owner, guest = admin_of(jetyard_docker), another_user(jetyard_docker)
    owner.ok("create", "reference")
    (tmp_path / "facts.txt").write_text("the earth is round\n")
    owner.ok("upload", "reference", str(tmp_path / "facts.txt"), "-q")
    folder_id = owner.folder_id("reference")
    owner.ok("share", "reference", guest.email, "--permission", "ro")
    guest.ok("accept", folder_id)
    assert '"permission": "ro"' in guest.ok("info", folder_id, "--json")

    command = (
        "cat /home/work/reference/facts.txt; "
        "if echo scribble > /home/work/reference/mine.txt; then echo WRITE-SUCCEEDED; "
        "else echo WRITE-FAILED; fi"
    )
    ended = guest.finished(guest.start_session(command, [{"folder": folder_id}], type="batch"))
    assert ended["session"]["mounts"][0]["readOnly"] is True, ended
    logs = ended["sessionLogs"]
    assert "the earth is round" in logs and "WRITE-FAILED" in logs, logs
    assert "WRITE-SUCCEEDED" not in logs
    assert "mine.txt" not in owner.ok("files", "reference")

    owner.ok("unshare", "reference", guest.email)
    refused = guest.create_session(
        "cat /home/work/reference/facts.txt", [{"folder": folder_id}], type="batch"
    )
    assert refused["data"] is None, refused  # refused at creation: no session exists
    error = refused["errors"][0]
    assert (error["message"], error["extensions"]["code"]) == (
        f"there is no folder {folder_id}",
        "not-found",
    )
    denied = guest.cli("files", folder_id)
    assert denied.returncode == 1 and f"there is no folder {folder_id}" in denied.stderr


def test_a_mounted_folder_is_not_purged_and_the_quota_holds(
    jetyard_docker: Jetyard, tmp_path: Path
) -> None:
    me = admin_of(jetyard_docker)
    me.ok("create", "busy")
    session_id = me.start_session("sleep 300", [{"folder": "busy"}])
    me.finished(session_id, frozenset({"RUNNING"}))
    for verb in ("rm", "purge"):
        refused = me.cli(verb, "busy")
        assert refused.returncode == 1, (verb, refused.stdout, refused.stderr)
        assert "mount" in refused.stderr or "trash" in refused.stderr, refused.stderr
    assert '"status": "ready"' in me.ok("info", "busy", "--json")
    stopped = me.gql("mutation($id: ID!) { terminateSession(id: $id) { status } }", id=session_id)
    assert stopped["data"]["terminateSession"]["status"] == "ACCEPTED", stopped
    me.finished(session_id, frozenset({"TERMINATED"}))
    wait_until(lambda: me.cli("rm", "busy").returncode == 0, "the folder went to the trash")
    me.ok("purge", "busy")

    me.ok("create", "small", "--quota", "100k")
    (tmp_path / "big.bin").write_bytes(os.urandom(200 * 1024))
    refused = me.cli("upload", "small", str(tmp_path / "big.bin"), "-q")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "quota" in refused.stderr, refused.stderr
    (tmp_path / "fits.bin").write_bytes(os.urandom(50 * 1024))
    me.ok("upload", "small", str(tmp_path / "fits.bin"), "-q")
    assert "big.bin" not in me.ok("files", "small")


def test_links_a_session_plants_are_never_followed_out_of_the_folder(
    jetyard_docker: Jetyard, tmp_path: Path
) -> None:
    """A session writes links to the host's files (absolute, relative, to the folder's
    parent) and a FIFO into its folder: downloads refuse them one by one, the folder as a
    whole comes back without them and without anything they point at."""
    me = admin_of(jetyard_docker)
    me.ok("create", "planted")
    command = (
        "set -e; cd /home/work/planted; echo honest > real.txt; "
        "ln -s /etc/hostname leak; ln -s ../../.. up; ln -s real.txt alias; mkfifo pipe"
    )
    ended = me.finished(me.start_session(command, [{"folder": "planted"}], type="batch"))
    assert (ended["session"]["status"], ended["session"]["exitCode"]) == ("TERMINATED", 0), ended

    for path, local in (("leak", "leak"), ("alias", "alias"), ("up/etc/passwd", "passwd")):
        refused = me.cli("download", "planted", path, str(tmp_path / local), "-q")
        assert refused.returncode == 1, (path, refused.stdout, refused.stderr)
        assert "link" in refused.stderr, (path, refused.stderr)
        assert not (tmp_path / local).exists()
    refused = me.cli("download", "planted", "pipe", str(tmp_path / "pipe"), "-q")
    assert refused.returncode == 1 and not (tmp_path / "pipe").exists(), refused.stderr

    me.ok("download", "planted", "", str(tmp_path / "whole"), "-q")
    got = sorted(
        p.relative_to(tmp_path / "whole").as_posix() for p in (tmp_path / "whole").rglob("*")
    )
    assert got == ["real.txt"], got
    assert (tmp_path / "whole" / "real.txt").read_text() == "honest\n"
