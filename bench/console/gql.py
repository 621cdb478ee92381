"""GraphQL as the superadmin, with httpx: signing in, the views caught up, and the very queries
the pages send, timed without a browser (a baseline)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.console.support import js_template, summary
from events.bus import Bus
from events.store import EventStore


@dataclass
class Gql:
    client: httpx.AsyncClient
    token: str = ""

    async def login(self, email: str, password: str) -> None:
        answer = await self.call(
            "mutation L($e: String!, $p: String!) { login(email: $e, password: $p) { token } }",
            e=email, p=password,
        )  # fmt: skip
        self.token = answer["login"]["token"]

    async def timed(self, query: str, **variables: Any) -> tuple[dict[str, Any], float, int]:
        """The data, the seconds from send to the whole answer, and its size in bytes."""
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        began = time.perf_counter()
        response = await self.client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=headers
        )
        spent = time.perf_counter() - began
        body = response.json()
        if response.status_code != 200 or body.get("errors"):
            raise RuntimeError(f"GraphQL answered {response.status_code}: {response.text[:500]}")
        data: dict[str, Any] = body["data"]
        return data, spent, len(response.content)

    async def call(self, query: str, **variables: Any) -> dict[str, Any]:
        return (await self.timed(query, **variables))[0]


async def views_caught_up(gql: Gql, bus: Bus, timeout: float = 600.0) -> float:
    """Until the views (``cluster.seq``) hold every event stored when asked."""
    target = await EventStore(bus).stream_last_seq()
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        seq = int((await gql.call("{ cluster { seq } }"))["cluster"]["seq"])
        if seq >= target:
            return time.monotonic() - began
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the views stayed behind log position {target} for {timeout:.0f}s")


async def raw_queries(gql: Gql, loads: int) -> dict[str, Any]:
    """The pages' own queries, as the pages send them, timed from here (no browser)."""
    sessions_query = js_template("pages/sessions.js", "QUERY")
    cluster_query = js_template("op/cluster.js", "CLUSTER")
    out: dict[str, list[float]] = {
        "sessions: the first page (s)": [],
        "cluster (s)": [],
        "cluster { seq } alone: the resolver's work, no list sent (s)": [],
    }
    sizes: dict[str, Any] = {}
    for _ in range(loads):
        data, seconds, length = await gql.timed(sessions_query, after=None)
        out["sessions: the first page (s)"].append(seconds)
        sizes["sessions: rows, bytes"] = [len(data["sessions"]["edges"]), length]
        data, seconds, length = await gql.timed(cluster_query)
        out["cluster (s)"].append(seconds)
        _, alone, _ = await gql.timed("query Seq { cluster { seq } }")
        out["cluster { seq } alone: the resolver's work, no list sent (s)"].append(alone)
        cluster = data["cluster"]
        sizes["cluster: bytes"] = length
        sizes["cluster: rows"] = {k: len(v) for k, v in cluster.items() if isinstance(v, list)}
    return {k: summary(v) for k, v in out.items()} | sizes
