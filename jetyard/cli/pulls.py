"""How ``jetyard run`` shows the image pulls a session waits for (``Sessions.pulls``, the
``sessionPulls`` subscription) on stderr: a progress bar per node and image on a terminal, as
``vfolder upload`` draws one; elsewhere (a pipe, a log) a line when a pull starts and one when
it ends, never a line per update. Reads no subject."""

from __future__ import annotations

import sys
from contextlib import aclosing

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from jetyard.cli.common import human_bytes
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import ImagePull


def pull_text(pull: ImagePull, total_bytes: int = 0) -> str:
    """One pull in words: ``pulling R on H: 3 MiB of 18 MiB (1 of 3 layers)``, ``pulled R
    on H (18 MiB)``, or ``pulling R on H failed (authentication): ...`` (H: the node's host
    name, as the session's reasons name it). A finished pull's own
    report carries no sizes: ``total_bytes`` is the last one its progress said."""
    where = f"{pull.reference} on {pull.node_name}"
    if pull.status == "finished":
        total = pull.total_bytes or total_bytes
        return f"pulled {where}" + (f" ({human_bytes(total)})" if total else "")
    if pull.status == "failed":
        cause = f" ({pull.cause})" if pull.cause else ""
        return f"pulling {where} failed{cause}: {pull.reason or 'no reason given'}"
    done = sum(1 for x in pull.layers if x.total_bytes and x.done_bytes >= x.total_bytes)
    layers = f" ({done} of {len(pull.layers)} layers)" if pull.layers else ""
    if not (pull.done_bytes or pull.total_bytes):
        return f"pulling {where}{layers}"
    of = f" of {human_bytes(pull.total_bytes)}" if pull.total_bytes else ""
    return f"pulling {where}: {human_bytes(pull.done_bytes)}{of}{layers}"


class PullDisplay:
    """The pulls seen so far, drawn on ``console`` (stderr)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            # The session's output goes to stdout, never through the bar's stderr console.
            redirect_stdout=False,
            disable=not console.is_terminal,
        )
        self.tasks: dict[tuple[str, str], TaskID] = {}
        self.totals: dict[tuple[str, str], int] = {}

    def show(self, pull: ImagePull) -> None:
        key = (pull.node_id, pull.reference)
        task = self.tasks.get(key)
        if task is None:
            if pull.status == "pulling":
                self._say(pull_text(pull))
            self.bars.start()
            task = self.tasks[key] = self.bars.add_task(
                f"{pull.reference} on {pull.node_name}", total=pull.total_bytes or None
            )
        if pull.status == "pulling":
            self.bars.update(task, completed=pull.done_bytes, total=pull.total_bytes or None)
            self.totals[key] = pull.total_bytes or self.totals.get(key, 0)
            return
        self.bars.remove_task(task)
        del self.tasks[key]
        self._say(pull_text(pull, self.totals.pop(key, 0)))

    def _say(self, text: str) -> None:
        if self.console.is_terminal:
            self.bars.console.print(f"jetyard: {text}", highlight=False, markup=False)
        else:
            print(f"jetyard: {text}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        self.bars.stop()


async def show_pulls(jy: AsyncClient, session_id: str, console: Console | None = None) -> None:
    """Draw the session's pulls until it runs or ends. The pulls are shown as a courtesy: a
    subscription the gateway refuses (an older one) leaves ``run`` to go on without them."""
    display = PullDisplay(console or Console(stderr=True))
    try:
        async with aclosing(jy.sessions.pulls(session_id)) as pulls:
            async for pull in pulls:
                display.show(pull)
    except JetyardError:
        pass
    finally:
        display.stop()
