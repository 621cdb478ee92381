"""The Jetyard SDK in one script: who you are, a batch session whose output streams live
(the ``sessionOutput`` subscription), its exit code, then your last sessions through the
blocking client. It signs in as the ``jetyard`` command does: ``JETYARD_ENDPOINT``,
``JETYARD_ACCESS_KEY`` and ``JETYARD_SECRET_KEY`` if set, else what ``jetyard login`` kept.

    .venv/bin/python examples/sdk_quickstart.py                     # sh -c 'echo ...; exit 3'
    .venv/bin/python examples/sdk_quickstart.py sh -c 'uname -a'    # any other command

It exits with the session's exit code.
"""

from __future__ import annotations

import asyncio
import sys

from jetyard.sdk import AsyncClient, Client

IMAGE = "jetyard-busybox:latest"
COMMAND = ["sh", "-c", "echo hello from jetyard; echo the answer is 42; exit 3"]


async def run_and_follow(command: list[str]) -> int:
    async with AsyncClient.from_config() as jy:
        me = await jy.admin.viewer()
        print(f"signed in to {jy.endpoint} as {me.user_id} ({me.role})")
        created = await jy.sessions.create(
            IMAGE, type="batch", cpu="0.5", memory="64m", command=command
        )
        session_id = str(created.session_id)
        print(f"session {session_id}: {created.status}")
        async for chunk in jy.sessions.output(session_id):  # from line 0, then live
            for line in chunk.lines:
                print(f"  | {line}")
        ended = await jy.sessions.wait(session_id)
        print(f"session {session_id} ended {ended.status} with exit code {ended.exit_code}")
        return ended.exit_code if ended.exit_code is not None else 1


def last_sessions(count: int = 3) -> None:
    with Client.from_config() as jy:  # the same calls, blocking
        for session in jy.sessions.list()[-count:]:
            print(f"{session.id}  {session.status:<10}  exit {session.exit_code}")


if __name__ == "__main__":
    exit_code = asyncio.run(run_and_follow(sys.argv[1:] or COMMAND))
    last_sessions()
    sys.exit(exit_code)
