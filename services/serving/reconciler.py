"""The reconcile pass, run by the one controller replica holding the serving lease: probe the
replicas that are due, gather what is known of each endpoint's replicas (their sessions, the
scheduler's refusals, the probes, the scaling metrics), decide on each endpoint
(``rules.reconcile``, stored through the unit of work), then send the session commands the
new state calls for (``rules.reconcile.wanted``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from commands.bus import CommandBus
from commands.outcome import OutcomeStatus
from commands.serving.aggregate import Endpoint
from commands.serving.replicas import Replica
from commands.unit_of_work import Changes, UnitOfWork
from events.envelope import Cause
from events.writes import UnavailableError
from schemas.activity import ActivitySource
from schemas.ids import new_id
from schemas.principal import Tenant
from schemas.serving import HealthCheck, replica_command_id
from schemas.serving_load import LoadBoard
from services.serving.load import mean_use, rule_value
from services.serving.probes import Key, Prober
from services.serving.rules.reconcile import (
    Facts,
    Phase,
    SessionFact,
    Wanted,
    drained,
    reconcile,
    wanted,
)
from services.serving.sessions import SERVING, create_replica, terminate_replica
from services.serving.state import ServingState

log = logging.getLogger(__name__)


class Reconciler:
    def __init__(
        self,
        state: ServingState,
        work: UnitOfWork[Changes],
        commands: CommandBus,
        board: LoadBoard,
        prober: Prober,
        clock: Callable[[], datetime],
        *,
        resend_after_s: float,
        drain_timeout_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state, self.work, self.commands = state, work, commands
        self.board, self.prober, self.clock = board, prober, clock
        self.resend_after_s = resend_after_s
        self.drain_timeout_s = drain_timeout_s
        self._monotonic = monotonic
        self._sent: dict[tuple[Wanted, Key], float] = {}
        """What was sent last, when: a command is sent again only after ``resend_after_s``."""
        self.refused: dict[Key, str] = {}
        """Creates the scheduler refused (read from their outcomes)."""
        self.uncreated: set[Key] = set()
        """Retired replicas whose create has no outcome (no session will come)."""
        self.passes = 0
        """Passes run (for tests)."""

    async def run_pass(self) -> None:
        await self._probe()
        for endpoint_id in list(self.state.endpoints):
            endpoint = self.state.endpoints.get(endpoint_id)
            if endpoint is None:
                continue
            if endpoint.destroyed and not self._has_live_sessions(endpoint):
                self._forget(endpoint_id)
                continue
            try:
                await self._decide(endpoint_id)
                await self._send(endpoint_id)
            except UnavailableError:
                raise  # the log is out of reach: the whole pass waits, not one endpoint
            except Exception:
                # One endpoint that cannot be worked on (a bug, a value no rule expected) costs
                # that endpoint, never the others: said, and tried again next pass.
                log.exception("serving: endpoint %s could not be reconciled", endpoint_id)
        self.passes += 1

    def _forget(self, endpoint_id: str) -> None:
        """Drop what is kept in memory about a destroyed endpoint's replicas."""
        self._sent = {k: t for k, t in self._sent.items() if k[1][0] != endpoint_id}
        self.refused = {k: why for k, why in self.refused.items() if k[0] != endpoint_id}
        self.uncreated = {k for k in self.uncreated if k[0] != endpoint_id}

    # ---- facts ---------------------------------------------------------------------------

    def _session(self, replica: Replica) -> Phase | None:
        fact = self.state.sessions.get(replica.session_id)
        return None if fact is None else fact.phase

    def _has_live_sessions(self, endpoint: Endpoint) -> bool:
        return any(self._session(r) not in (None, Phase.ENDED) for r in endpoint.replicas.values())

    async def _probe(self) -> None:
        targets: list[tuple[Key, str, HealthCheck]] = []
        probed: set[Key] = set()
        for endpoint in self.state.endpoints.values():
            for replica in endpoint.live:
                address = self.state.addresses.get(replica.session_id)
                if address is None or self._session(replica) is not Phase.RUNNING:
                    continue
                key = (endpoint.id, replica.number)
                probed.add(key)
                check = endpoint.revisions[replica.revision].health
                if self.prober.due(key, check):
                    targets.append((key, address, check))
        self.prober.keep_only(probed)
        await self.prober.probe(targets)

    def _sessions(self, endpoint: Endpoint) -> dict[int, SessionFact]:
        sessions = {}
        for replica in endpoint.replicas.values():
            fact = self.state.sessions.get(replica.session_id)
            if fact is not None:
                sessions[replica.number] = fact
        return sessions

    def _refusals(self, endpoint_id: str) -> dict[int, str]:
        return {n: why for (e, n), why in self.refused.items() if e == endpoint_id}

    def facts(self, endpoint: Endpoint, now: datetime) -> Facts:
        """Everything a reconcile step on ``endpoint`` reads besides the endpoint."""
        probes = {n: p for (e, n), p in self.prober.results.items() if e == endpoint.id}
        running = [r for r in endpoint.live if self._session(r) is Phase.RUNNING]
        serving = sum(1 for r in endpoint.live if r.serving)

        def use(source: ActivitySource, window_s: float) -> float | None:
            kept = [self.state.utilisation.get(r.session_id, ()) for r in running]
            return mean_use(kept, source, window_s, now)

        metrics = {
            i: rule_value(rule, endpoint.id, serving, self.board, use)
            for i, rule in enumerate(endpoint.scaling.rules)
        }
        return Facts(
            sessions=self._sessions(endpoint),
            refused=self._refusals(endpoint.id),
            uncreated=frozenset(n for e, n in self.uncreated if e == endpoint.id),
            probes=probes,
            metrics=metrics,
        )

    # ---- deciding ------------------------------------------------------------------------

    async def _decide(self, endpoint_id: str) -> None:
        cause_id = new_id()

        def decide(changes: Changes) -> int:
            endpoint = self.state.endpoints.get(endpoint_id)
            if endpoint is None:
                return 0
            now = self.clock()
            copy = changes.track(endpoint)
            reconcile(copy, self.facts(endpoint, now), now)
            owner = endpoint.owner
            tenant = Tenant(domain=owner.domain if owner else "default",
                            project=owner.project_id if owner else None)  # fmt: skip
            cause = Cause(
                causation_id=cause_id, correlation_id=endpoint_id, actor=SERVING, tenant=tenant
            )
            return changes.unit(cause, copy)

        await self.work.run(decide, what=f"reconcile endpoint {endpoint_id}")

    # ---- session commands ----------------------------------------------------------------

    async def _send(self, endpoint_id: str) -> None:
        endpoint = self.state.endpoints.get(endpoint_id)
        if endpoint is None:
            return
        now = self._monotonic()
        known = Facts(sessions=self._sessions(endpoint), refused=self._refusals(endpoint_id))
        for want, replica in wanted(endpoint, known):
            key = (endpoint_id, replica.number)
            inflight = self.board.replica_inflight(endpoint_id, replica.number)
            if want is Wanted.TERMINATE and not drained(
                replica, inflight, self.clock(), self.drain_timeout_s
            ):
                continue  # its last requests are still being answered
            sent = self._sent.get((want, key))
            if sent is not None and now - sent < self.resend_after_s:
                continue
            if want is Wanted.CREATE and sent is not None and await self._refused(key):
                continue
            self._sent[(want, key)] = now
            build = create_replica if want is Wanted.CREATE else terminate_replica
            cmd = build(endpoint, replica)
            log.info("endpoint %s replica %d: %s session %s", endpoint.name, replica.number,
                     want.value, replica.session_id)  # fmt: skip
            await self.commands.send(cmd)
        await self._check_unborn(endpoint)

    async def _refused(self, key: Key) -> bool:
        """Whether the scheduler refused the replica's create (then remembered)."""
        return await self._create_outcome(key) is OutcomeStatus.REJECTED

    async def _create_outcome(self, key: Key) -> OutcomeStatus | None:
        """The outcome of the replica's create (None: not decided, or never sent); a refusal
        is remembered with its message."""
        endpoint_id, number = key
        endpoint = self.state.endpoints.get(endpoint_id)
        if endpoint is None:
            return None
        outcome = await self.commands.outcome(
            replica_command_id(endpoint_id, endpoint.incarnation, number)
        )
        if outcome is None:
            return None
        if outcome.status is OutcomeStatus.REJECTED:
            self.refused[key] = outcome.message
        return outcome.status

    async def _check_unborn(self, endpoint: Endpoint) -> None:
        """Retired replicas without a session: refused, or never decided (no session will
        come; if one does after all, it is terminated then)."""
        now = self._monotonic()
        for replica in endpoint.replicas.values():
            key = (endpoint.id, replica.number)
            if replica.live or replica.lifecycle.has_ended or self._session(replica) is not None:
                continue
            if key in self.refused or key in self.uncreated:
                continue
            sent = self._sent.get((Wanted.CREATE, key))
            if sent is not None and now - sent < self.resend_after_s:
                continue
            if await self._create_outcome(key) is None:
                self.uncreated.add(key)
