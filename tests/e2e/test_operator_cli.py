"""The operator commands on the running stack, found through the pointer ``jetyard up``
leaves (no ``nats.env`` sourced, no ``--data-dir``): ``jetyard log`` prints JSON objects
carrying their ``seq``, the whole log or one aggregate; ``projections rebuild`` rebuilds that
stack's views; ``quarantine list`` reads its quarantine; ``backup`` and ``audit verify``
check its sealed log; ``audit state --at`` answers a session as it was then. Once it stops,
they say no stack runs instead of acting on a default directory; ``--data-dir`` still names
it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import TEST_IMAGE
from tests.e2e.user_support import jetyard, keypair_env, stack_for, user_env


def audit_the_sealed_log(env: dict[str, str], data_dir: Path, tmp_path: Path) -> None:
    """The stack's sealer seals the log; a backup verifies offline with the public key alone;
    a changed byte is named by its position."""
    backup = tmp_path / "backup.jsonl"
    made = jetyard(env, "backup", str(backup))
    assert made.returncode == 0, made.stderr
    assert "not in it: folder contents" in made.stdout
    online = jetyard(env, "audit", "verify")
    assert online.returncode == 0 and online.stdout.startswith("verified:"), online.stdout
    seals = [json.loads(line) for line in jetyard(env, "audit", "seals").stdout.splitlines()]
    assert seals and seals[0]["number"] == 1 and seals[0]["first"] == 1
    public = str(data_dir / "seal.key.pub")
    offline = jetyard(
        {"PATH": env["PATH"]}, "audit", "verify", "--backup", str(backup),
        "--public-key", public, "--invariants", "--anchor", seals[-1]["digest"],
    )  # fmt: skip
    assert offline.returncode == 0, offline.stdout + offline.stderr
    lines = backup.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if json.loads(line).get("seq") == 5)
    event = json.loads(lines[at])
    event["subject"] = event["subject"] + "x"
    lines[at] = json.dumps(event) + "\n"
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(lines))
    refused = jetyard(
        env, "audit", "verify", "--backup", str(changed), "--public-key", public, "--json"
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["problem"]["position"] == 5


def test_operator_commands_act_on_the_running_stack(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    stack = stack_for(tmp_path, env, "simulated").start()
    created = stack.gql(
        "mutation($i: CreateSessionInput!) { createSession(input: $i) { sessionId } }",
        i={"image": TEST_IMAGE, "type": "batch", "command": ["exit", "0"]},
    )
    session_id = created["data"]["createSession"]["sessionId"]

    log = jetyard(env, "log")
    assert log.returncode == 0, log.stderr
    events = [json.loads(line) for line in log.stdout.splitlines()]
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs) and seqs[0] == 1 and len(set(seqs)) == len(seqs)
    assert {"name", "aggregate_type", "aggregate_id", "payload"} <= set(events[0])
    one = jetyard(env, "log", "--aggregate", f"session/{session_id}")
    names = [json.loads(line)["name"] for line in one.stdout.splitlines()]
    assert names[0] == "SessionRequested", one.stdout
    requested_at = json.loads(one.stdout.splitlines()[0])["seq"]
    signed_in = {**env, **keypair_env(stack)}  # a gateway command: the superadmin's keypair
    past = jetyard(signed_in, "audit", "state", "--at", str(requested_at), "--only", "sessions")
    assert past.returncode == 0, past.stderr
    then = {s["id"]: s["status"] for s in json.loads(past.stdout)["sessions"]}
    assert then[session_id] == "PENDING", then  # as it was right after it was asked for
    assert (stack.data_dir / "history").is_dir()  # kept with the stack

    rebuilt = jetyard(env, "projections", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert str(stack.data_dir / "views.db") in rebuilt.stderr and "rebuilt" in rebuilt.stdout
    quarantine = jetyard(env, "quarantine", "list")
    assert quarantine.returncode == 0 and "nothing is quarantined" in quarantine.stderr
    audit_the_sealed_log(env, stack.data_dir, tmp_path)
    stack.stop()

    after = jetyard(env, "log")
    assert after.returncode == 2 and "no `jetyard up` is running" in after.stderr, after.stderr
    quick = {**env, "JETYARD_NATS_CONNECT_TIMEOUT_S": "1"}
    named = jetyard(quick, "log", "--data-dir", str(stack.data_dir))
    assert named.returncode == 2 and "cannot connect to NATS" in named.stderr, named.stderr
