"""The gateway's per-request lookups while the log is out of reach (a head cut from its
quorum, or NATS gone): a login seen before is taken as it was (nothing newer could be stored
meanwhile) and an unknown one is not; a signed request's nonce is claimed in the gateway's
memory, so a replay to it is still refused; the rate limiter limits in the process. On a real
nats-server of the test's own, stopped half-way. (A partition of a three-node cluster:
``test_cluster_partition.py``.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from events.bus import connect, ensure_streams, is_unavailable
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings
from schemas.signing import new_nonce
from services.gateway.auth.logins import LoginStore
from services.gateway.auth.nonces import NonceStore
from services.gateway.auth.ratelimit_shared import SharedRateLimiter


async def test_lookups_fall_back_while_the_log_is_out_of_reach(tmp_path: Path) -> None:
    server = NatsServer(data_dir=tmp_path / "nats").start()
    bus = await connect(NatsSettings(url=server.url, request_timeout_s=2.0), name="outage")
    try:
        await ensure_streams(bus)
        logins, nonces = LoginStore(bus, ttl_s=3600), NonceStore(bus)
        limiter = await SharedRateLimiter.open(bus)
        seen, unseen = await logins.issue("user-seen"), await logins.issue("user-unseen")
        assert await logins.resolve(seen) == "user-seen"
        before, during = new_nonce(), new_nonce()
        assert await nonces.claim("AKOUTAGE", before)
        assert (await limiter.take("outage-key", 3)).allowed

        server.stop()  # the log is gone

        assert await logins.resolve(seen) == "user-seen"
        with pytest.raises(Exception) as raised:  # noqa: PT011 (checked just below)
            await logins.resolve(unseen)  # never resolved here: no answer to give
        assert is_unavailable(raised.value)
        assert await nonces.claim("AKOUTAGE", during)
        assert not await nonces.claim("AKOUTAGE", during)  # replayed to this gateway
        decisions = [await limiter.take("outage-key", 3) for _ in range(5)]
        assert [d.allowed for d in decisions] == [True, True, True, False, False]

        server.start()  # back (same port and store): the buckets answer again
        for _ in range(100):
            if bus.nc.is_connected:
                break
            await asyncio.sleep(0.1)
        assert await logins.resolve(unseen) == "user-unseen"
    finally:
        if server.process is None or server.process.poll() is not None:
            server.start()  # a client closes cleanly only with its server there
        await bus.close()
        server.stop()
