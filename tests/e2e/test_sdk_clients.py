"""The SDK on a real ``jetyard up`` (simulated backend), both clients:

- ``AsyncClient`` with a keypair: a batch session created, its status changes and its output
  read through the two subscriptions at once (in order, from the first), ``wait`` giving its
  exit code, its logs, an interactive one's apps and terminal URL, and its end;
- ``Client`` (blocking) with a login token: the same session listed, read, its subscriptions
  as iterators; administration (a user and a keypair that then signs as that user) and the
  usage report;
- ``examples/sdk_quickstart.py``, the README's example, run as written."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jetyard.sdk import AsyncClient, Client, JetyardError
from schemas.ids import new_id
from tests.e2e.conftest import TEST_IMAGE, Jetyard
from tests.e2e.user_support import example, keypair_env, stack_for, user_env


async def _async_client(stack: Jetyard) -> str:
    admin = stack.admin
    async with AsyncClient(stack.url, admin["access_key"], admin["secret_key"]) as jy:
        created = await jy.sessions.create(
            TEST_IMAGE, type="batch", cpu="0.5", memory="64m", command=["print", "4", "0.5"]
        )
        session_id = str(created.session_id)

        async def statuses() -> list[str]:
            return [change.status async for change in jy.sessions.statuses(session_id)]

        async def lines() -> list[str]:
            return [line async for chunk in jy.sessions.output(session_id) for line in chunk.lines]

        seen, printed = await asyncio.gather(statuses(), lines())
        assert seen[0] == "PENDING" and seen[-1] == "TERMINATED" and "RUNNING" in seen, seen
        assert [line for line in printed if line.startswith("line ")] == [
            f"line {n}" for n in range(1, 5)
        ]
        ended = await jy.sessions.wait(session_id, timeout_s=60)
        assert (ended.status, ended.exit_code, ended.result) == ("TERMINATED", 0, "success")
        assert [h.status for h in ended.history][-1] == "TERMINATED"
        assert "line 4" in await jy.sessions.logs(session_id)

        interactive = await jy.sessions.create(TEST_IMAGE, command=["sleep", "600"])
        live = str(interactive.session_id)
        async with aclosing(jy.sessions.statuses(live)) as changes:
            async for change in changes:
                if change.status == "RUNNING":
                    break
        assert await jy.apps.list(live) == []
        access = await jy.apps.start(live, "terminal")
        assert f"/apps/{live}/terminal/" in access.url and access.expires_at > datetime.now(UTC)
        assert (await jy.sessions.terminate(live)).status == "ACCEPTED"
        try:
            await jy.apps.start(live, "no-such-app")
        except JetyardError as refused:
            assert refused.code in ("not-found", "refused"), refused
        else:
            raise AssertionError("an app the session does not serve was started")
        return session_id


def _blocking_client(stack: Jetyard, session_id: str) -> None:
    admin = stack.admin
    with Client(stack.url) as anonymous:
        token = anonymous.login(admin["email"], admin["password"]).token
    with Client(stack.url, token=token) as jy:
        assert session_id in [s.id for s in jy.sessions.list()]
        found = jy.sessions.get(session_id)
        assert found is not None and found.exit_code == 0
        assert [c.status for c in jy.sessions.statuses(session_id)][-1] == "TERMINATED"
        assert "line 4" in [line for c in jy.sessions.output(session_id) for line in c.lines]
        assert jy.sessions.get("no-such-session") is None

        email = f"sdk-{new_id()[:8]}@example.org"
        project = jy.admin.viewer().projects[0]
        user = jy.admin.create_user(email, "pw-12345678", projects=[project])
        assert user.id is not None and email in [u.email for u in jy.admin.users()]
        issued = jy.admin.create_keypair(user.id)
        assert issued.access_key in [k.access_key for k in jy.admin.keypairs(user.id)]
        now = datetime.now(UTC)
        rows = jy.usage.report(now - timedelta(hours=1), now + timedelta(minutes=1), "user")
        mine = [row for row in rows if row.key == admin_user(jy)]
        assert mine and mine[0].sessions >= 2 and mine[0].cpu_core_seconds > 0, rows
        assert jy.logout() is True
    with Client(stack.url, issued.access_key, issued.secret_key) as them:
        me = them.admin.viewer()
        assert (me.user_id, me.role) == (user.id, "user")
        assert them.sessions.list() == []


def admin_user(jy: Client) -> str:
    return jy.admin.viewer().user_id


def test_the_async_and_blocking_clients_and_the_readme_example(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    stack = stack_for(tmp_path, env, "simulated").start()
    session_id = asyncio.run(_async_client(stack))
    _blocking_client(stack, session_id)

    ran = example({**env, **keypair_env(stack)}, "print", "2", "0.2")
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    assert "  | line 2" in ran.stdout and "ended TERMINATED with exit code 0" in ran.stdout
    stack.stop()
