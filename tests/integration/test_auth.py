"""Authentication on a real NATS server: the Authenticator fed with requests signed by the SDK
(so the SDK and the gateway are proven to agree on the scheme), login then bearer tokens, and
subscriptions' connection parameters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from commands.authorisation import Principal
from events.bus import Bus
from jetyard.sdk import AsyncClient, JetyardAuth, JetyardError
from schemas.ids import new_id
from schemas.principal import Actor, ActorKind
from schemas.tenancy import Role, email_digest, user_id_for
from services.gateway.auth.authenticate import Authenticator, AuthError, signed_target
from services.gateway.auth.logins import LoginStore
from services.gateway.auth.nonces import NonceStore
from services.gateway.auth.vault import (
    PasswordStore,
    SecretVault,
    new_access_key,
    new_secret_key,
)
from tests.integration.auth_support import (
    CHEAP,
    EMAIL_KEY,
    HOST,
    FakeDirectory,
    FakeKeypair,
    FakeUser,
)


@dataclass
class World:
    bus: Bus
    directory: FakeDirectory
    vault: SecretVault
    nonces: NonceStore
    logins: LoginStore
    passwords: PasswordStore
    now: datetime

    def authenticator(self, window_s: float = 300.0) -> Authenticator:
        return Authenticator(
            self.vault,
            self.nonces,
            self.logins,
            self.passwords,
            self.directory,
            window_s,
            clock=lambda: self.now,
        )

    async def person(self, email: str, password: str | None = None) -> tuple[str, str, str]:
        """A user with one active keypair: (user id, access key, secret key)."""
        digest = email_digest(email, EMAIL_KEY)
        user_id = user_id_for(digest)
        self.directory.digests[digest] = FakeUser(user_id)
        self.directory.people[user_id] = Principal(
            user_id=user_id,
            role=Role.USER,
            domain="default",
            projects=frozenset(),
            access_key=None,
        )
        access_key, secret_key = new_access_key(), new_secret_key()
        await self.vault.store_secret(access_key, secret_key)
        self.directory.keypairs[access_key] = FakeKeypair(user_id)
        if password is not None:
            await self.passwords.set_password(user_id, password)
        return user_id, access_key, secret_key


@pytest.fixture
def world(bus: Bus) -> World:
    return World(
        bus=bus,
        directory=FakeDirectory(),
        vault=SecretVault(bus, SecretVault.generate_key()),
        nonces=NonceStore(bus),
        logins=LoginStore(bus, ttl_s=3600),
        passwords=PasswordStore(bus, CHEAP),
        now=datetime.now(UTC),
    )


def signed(
    access_key: str,
    secret_key: str,
    body: bytes = b'{"query":"{ me }"}',
    *,
    at: datetime | None = None,
    path: str = "/graphql?op=me",
) -> httpx.Request:
    """A request as the SDK would send it."""
    request = httpx.Request(
        "POST", f"http://{HOST}{path}", content=body, headers={"content-type": "application/json"}
    )
    auth = JetyardAuth(access_key, secret_key, clock=lambda: at or datetime.now(UTC))
    return next(auth.auth_flow(request))


async def present(authenticator: Authenticator, request: httpx.Request) -> Principal:
    return await authenticator.authenticate(
        request.method,
        request.url.raw_path.decode(),
        dict(request.headers),
        request.content,
        request.headers["host"],
    )


async def refused(authenticator: Authenticator, request: httpx.Request) -> AuthError:
    with pytest.raises(AuthError) as caught:
        await present(authenticator, request)
    return caught.value


# ---- the authenticator, with requests signed by the SDK ------------------------------------


async def test_a_good_signed_request_is_accepted_once(world: World) -> None:
    user_id, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    authenticator = world.authenticator()
    request = signed(access_key, secret_key, path="/graphql?op=me&x=a%20b")

    principal = await present(authenticator, request)

    assert principal.user_id == user_id
    assert principal.access_key == access_key
    assert principal.actor == Actor(kind=ActorKind.KEYPAIR, id=access_key)
    replayed = await refused(authenticator, request)
    assert replayed.code == "replayed"
    assert request.headers["x-jetyard-nonce"] in replayed.message


async def test_a_wrong_secret_is_refused_without_using_up_the_nonce(world: World) -> None:
    _, access_key, _ = await world.person(f"{new_id()}@example.com")
    request = signed(access_key, new_secret_key())

    error = await refused(world.authenticator(), request)

    assert error.code == "bad-signature"
    assert error.message == (
        "the signature does not match: check the secret key and the string to sign"
    )
    assert await world.nonces.claim(access_key, request.headers["x-jetyard-nonce"])


async def test_a_tampered_body_is_refused(world: World) -> None:
    _, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    good = signed(access_key, secret_key)
    tampered = httpx.Request(
        "POST", good.url, content=b'{"query":"{ everything }"}', headers=good.headers
    )

    assert (await refused(world.authenticator(), tampered)).code == "bad-signature"


async def test_a_stale_date_is_refused_naming_the_window_and_the_server_time(
    world: World,
) -> None:
    _, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    late = signed(access_key, secret_key, at=world.now - timedelta(seconds=301))
    early = signed(access_key, secret_key, at=world.now + timedelta(seconds=301))
    just_in = signed(access_key, secret_key, at=world.now - timedelta(seconds=299))
    authenticator = world.authenticator()

    error = await refused(authenticator, late)
    assert error.code == "stale-date"
    assert "300 s" in error.message
    assert world.now.isoformat(timespec="seconds") in error.message
    assert (await refused(authenticator, early)).code == "stale-date"
    assert (await present(authenticator, just_in)).access_key == access_key


async def test_a_deactivated_or_unknown_keypair_is_refused(world: World) -> None:
    user_id, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    world.directory.keypairs[access_key].active = False
    authenticator = world.authenticator()

    error = await refused(authenticator, signed(access_key, secret_key))
    assert error.code == "keypair-inactive"
    assert error.message == f"keypair {access_key} is deactivated"

    world.directory.keypairs[access_key].active = True
    del world.directory.people[user_id]  # the owner was deactivated
    assert (await refused(authenticator, signed(access_key, secret_key))).code == (
        "keypair-inactive"
    )
    unknown = await refused(authenticator, signed(new_access_key(), secret_key))
    assert unknown.code == "unknown-keypair"


async def test_missing_and_malformed_credentials_are_refused(world: World) -> None:
    _, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    authenticator = world.authenticator()
    good = signed(access_key, secret_key)

    async def with_headers(**changes: str | None) -> AuthError:
        headers = {k: v for k, v in {**dict(good.headers), **changes}.items() if v is not None}
        with pytest.raises(AuthError) as caught:
            await authenticator.authenticate("POST", "/graphql?op=me", headers, good.content, HOST)
        return caught.value

    assert (await with_headers(authorization=None)).code == "missing-credentials"
    bad_scheme = await with_headers(authorization="Basic dXNlcjpwYXNz")
    assert bad_scheme.code == "malformed-authorization"
    no_date = await with_headers(**{"x-jetyard-date": None})
    assert (no_date.code, "X-Jetyard-Date" in no_date.message) == ("malformed-authorization", True)
    short_nonce = await with_headers(**{"x-jetyard-nonce": "short"})
    assert short_nonce.code == "malformed-authorization"


async def test_login_then_bearer_token(world: World) -> None:
    email = f"{new_id()}@Example.com"
    user_id, _, _ = await world.person(email, password="s3cret pass")
    authenticator = world.authenticator()

    token = await authenticator.login(f"  {email.upper()} ", "s3cret pass", EMAIL_KEY)
    principal = await authenticator.authenticate(
        "POST", "/graphql", {"Authorization": f"Bearer {token}"}, b"", HOST
    )

    assert principal.user_id == user_id
    assert principal.actor == Actor(kind=ActorKind.USER, id=user_id)
    await authenticator.logout(token)
    with pytest.raises(AuthError) as gone:
        await authenticator.authenticate(
            "GET", "/", {"authorization": f"Bearer {token}"}, b"", HOST
        )
    assert gone.value.code == "bad-token"


async def test_every_failed_login_says_the_same_thing(world: World) -> None:
    email = f"{new_id()}@example.com"
    user_id, _, _ = await world.person(email, password="right")
    _, _, _ = await world.person(nopass := f"{new_id()}@example.com")
    authenticator = world.authenticator()
    attempts = [(email, "wrong"), (f"{new_id()}@example.com", "right"), (nopass, "")]

    errors = []
    for who, password in attempts:
        with pytest.raises(AuthError) as caught:
            await authenticator.login(who, password, EMAIL_KEY)
        errors.append((caught.value.code, caught.value.message))
    del world.directory.people[user_id]  # deactivated: the right password no longer logs in
    with pytest.raises(AuthError) as deactivated:
        await authenticator.login(email, "right", EMAIL_KEY)

    assert set(errors) == {("bad-login", "wrong email or password")}
    assert deactivated.value.code == "bad-login"


async def test_the_sdk_client_and_the_authenticator_agree_end_to_end(world: World) -> None:
    user_id, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    world.now = datetime.now(UTC)
    authenticator = world.authenticator()

    async def graphql(request: Request) -> JSONResponse:
        try:
            who = await authenticator.authenticate(
                request.method,
                signed_target(request.scope),
                request.headers,
                await request.body(),
                request.headers["host"],
            )
        except AuthError as exc:
            return JSONResponse({"detail": exc.message, "code": exc.code}, status_code=401)
        query = (await request.json())["query"]
        return JSONResponse({"data": {"me": who.user_id, "query": query}})

    app = Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])
    transport = httpx.ASGITransport(app=app)

    async with AsyncClient(f"http://{HOST}", access_key, secret_key, transport=transport) as jy:
        assert await jy.graphql("{ me }", {"a": 1}) == {"me": user_id, "query": "{ me }"}
        assert (await jy.graphql("{ me }"))["me"] == user_id  # a fresh nonce each time
    async with AsyncClient(f"http://{HOST}", access_key, "wrong", transport=transport) as jy:
        with pytest.raises(JetyardError, match="401 Unauthorized: the signature does not match"):
            await jy.graphql("{ me }")


async def test_subscription_connection_params_sign_a_bodiless_get(world: World) -> None:
    user_id, access_key, secret_key = await world.person(f"{new_id()}@example.com")
    params = JetyardAuth(access_key, secret_key).connection_params(HOST)
    headers = {k.lower(): v for k, v in params.items()}

    principal = await world.authenticator().authenticate(
        "GET", "/graphql", headers, b"", headers["host"]
    )

    assert principal.user_id == user_id
