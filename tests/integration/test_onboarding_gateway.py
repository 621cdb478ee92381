"""Bringing a person in through the real gateway and tenancy service: projects named by name
(a name that is not there answers with the domain's projects), people by email, a first
keypair written with the user so a password login can start a session at once, and a person
without an active keypair refused with ``no-keypair`` and what to do, never ``internal``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from events.bus import Bus
from schemas.ids import new_id
from schemas.tenancy import project_id_for
from tests.integration.gateway_support import Gateway, gql_ok, running_gateway

CREATE_USER = """mutation($e: String!, $d: String!, $p: [ID!]) {
  createUser(email: $e, password: "pw-123456", domain: $d, projects: $p) { id } }"""
SESSION = "mutation($i: CreateSessionInput!) { createSession(input: $i) { status message } }"


@pytest.fixture(scope="module")
async def gw(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("onboarding")) as started:
        yield started


async def _domain(gw: Gateway, *projects: str) -> str:
    domain = f"lab-{new_id()[:6]}"
    await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
    for name in projects:
        await gql_ok(
            gw, "mutation($d: String!, $n: String!) { createProject(domain: $d, name: $n) { id } }",
            d=domain, n=name,
        )  # fmt: skip
    return domain


async def _as(gw: Gateway, email: str, query: str, **variables: Any) -> dict[str, Any]:
    """``query`` by a person signed in with their password (a token, as the console does)."""
    login = await gw.client.post(
        f"{gw.url}/graphql",
        json={"query": "mutation($e: String!) { login(email: $e, password: \"pw-123456\") "
              "{ token } }", "variables": {"e": email}},
    )  # fmt: skip
    token = login.json()["data"]["login"]["token"]
    answer = await gw.client.post(
        f"{gw.url}/graphql", json={"query": query, "variables": variables},
        headers={"Authorization": f"Bearer {token}"},
    )  # fmt: skip
    body: dict[str, Any] = answer.json()
    return body


async def test_projects_are_named_by_name_and_people_by_email(gw: Gateway) -> None:
    domain = await _domain(gw, "ml", "vision")
    other = await _domain(gw, "ml")
    email = f"ada-{new_id()[:6]}@example.org"
    made = await gql_ok(gw, CREATE_USER, e=email, d=domain, p=["ml"])
    user_id = made["createUser"]["id"]

    missing = await gw.gql(CREATE_USER, e=f"x-{email}", d=domain, p=["nlp"])
    assert missing["errors"][0]["extensions"]["code"] == "not-found"
    assert missing["errors"][0]["message"] == (
        f"there is no project 'nlp' in domain '{domain}'; its projects: ml, vision"
    )
    elsewhere = await gw.gql(CREATE_USER, e=f"y-{email}", d=domain, p=[project_id_for(other, "ml")])
    assert f"in domain '{domain}'" in elsewhere["errors"][0]["message"]

    join = (
        """mutation($u: ID!, $p: ID!) { addUserToProject(userId: $u, projectId: $p) { message } }"""
    )
    joined = await gql_ok(gw, join, u=email.upper(), p="vision")
    assert joined["addUserToProject"]["message"] == f"user {user_id[:8]} joined vision"
    users = await gql_ok(
        gw, "query($d: String) { users(domain: $d) { id projects defaultAccessKey } }", d=domain
    )
    (user,) = users["users"]
    assert sorted(user["projects"]) == sorted(
        [project_id_for(domain, "ml"), project_id_for(domain, "vision")]
    )
    assert user["defaultAccessKey"]  # their first keypair, written with them
    issued = await gql_ok(
        gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey } }", u=email
    )
    assert issued["createKeypair"]["accessKey"] != user["defaultAccessKey"]


async def test_a_new_person_can_start_a_session_and_one_without_a_keypair_is_told_why(
    gw: Gateway,
) -> None:
    domain = await _domain(gw, "ml")
    email = f"bo-{new_id()[:6]}@example.org"
    await gql_ok(gw, CREATE_USER, e=email, d=domain, p=["ml"])
    # A group of its own: the shared log holds other tests' nodes in "default", and one too
    # small for this request would have it refused as never fitting.
    group = f"onboarding-{new_id()[:6]}"
    await gql_ok(gw, "mutation($n: String!) { createResourceGroup(name: $n) { status } }", n=group)
    wanted = {"image": "busybox", "command": ["true"], "resourceGroup": group}
    started = await _as(gw, email, SESSION, i=wanted)
    assert "errors" not in started, started

    users = await gql_ok(
        gw, "query($d: String) { users(domain: $d) { defaultAccessKey } }", d=domain
    )
    key = users["users"][0]["defaultAccessKey"]
    await gql_ok(gw, "mutation($k: ID!) { deactivateKeypair(accessKey: $k) { id } }", k=key)
    refused = await _as(gw, email, SESSION, i=wanted)
    (error,) = refused["errors"]
    assert error["extensions"]["code"] == "no-keypair", error
    assert "has no active keypair to own sessions" in error["message"]
    assert f"an admin of domain {domain} issues one" in error["message"]
