"""The gateway's probes: ``/livez`` (the process answers), ``/readyz`` (it serves what the log
holds: NATS connected, and the views reach the log's end as it was when asked within
``READY_WAIT_S``) and ``/healthz`` (``/readyz`` with the detail an operator reads: positions,
and the quarantined events that make it ``degraded``). Reads the events stream's end, the views'
position and the quarantine (``jy-quarantine``); writes nothing.

Why a wait and not "views == end now": under ordinary load an event is folded some tens of ms
after it is stored, so a look at one instant found the views behind in a third of samples and
a probe restarted or unlisted a healthy gateway. Waiting up to ``READY_WAIT_S`` for the end
asked about keeps the meaning (the views hold what the log held) without the flapping; a
projector that stays further behind than that is what ``/readyz`` must report.
"""

from __future__ import annotations

from typing import Any

from events.store import EventStore
from services.gateway.context import Services

READY_WAIT_S = 0.5
"""How long a probe waits for the views to reach the log's end it read: well under a
Kubernetes probe's default 1 s timeout, many times ordinary fold lag (tens of ms)."""


async def livez() -> tuple[bool, dict[str, Any]]:
    """Alive whenever the event loop answers: no I/O, so a busy log never fails it."""
    return True, {"ok": True, "status": "alive"}


async def readyz(services: Services, store: EventStore) -> tuple[bool, dict[str, Any]]:
    """Ready = NATS connected and the views hold every event the log had when asked, within
    ``READY_WAIT_S``."""
    try:
        log_end = await store.stream_last_seq()
        caught_up = await services.views.wait_for(log_end, READY_WAIT_S)
        views = await services.views.position()
    except Exception as exc:
        return False, {"ok": False, "status": "down", "error": repr(exc)}
    connected = services.bus.nc.is_connected
    ok = caught_up and connected
    status = "ok" if ok else ("catching-up" if connected else "down")
    body: dict[str, Any] = {"ok": ok, "status": status, "log_end": log_end}
    body["views_position"] = views
    if not connected:
        body["error"] = "NATS is unreachable"
    return ok, body


async def healthz(services: Services, store: EventStore) -> tuple[bool, dict[str, Any]]:
    """``readyz``, and the quarantined events: with some it is ``degraded`` (still 200: the
    API serves), naming them, until an operator acts."""
    ok, body = await readyz(services, store)
    if not ok:
        return ok, body
    try:
        held = [] if services.quarantine is None else await services.quarantine.recent_entries()
    except Exception as exc:
        return False, {"ok": False, "status": "down", "error": repr(exc)}
    if held:
        body["status"] = "degraded"
        body["quarantined"] = [
            {"consumer": p.consumer, "seq": p.seq, "subject": p.subject, "error": p.error}
            for p in held[:20]
        ]
        body["quarantined_count"] = len(held)
    return ok, body
