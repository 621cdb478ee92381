"""First start of ``jetyard up``: the default domain, project, policies and resource group,
and a superadmin with a keypair, created through the admin commands (the gateway's admin
module decides them) and printed once.

The credentials are generated before anything is sent and kept in ``bootstrap.pending.json``
(owner-only), so a first start interrupted half-way sends the same commands (same ids) with
the same credentials next time; ``admin.json`` (owner-only) is written when every command was
accepted, and its presence means "done".
"""

from __future__ import annotations

import json
import os
import secrets
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from commands.admin import (
    AssociateResourceGroup,
    CreateDomain,
    CreateKeypair,
    CreateProject,
    CreateResourceGroup,
    CreateResourcePolicy,
    CreateUser,
)
from commands.bus import CommandBus
from commands.messages import Command
from events.bus import Bus
from schemas.ids import derived_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.tenancy import (
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    ScopeKind,
    StoragePolicyLimits,
    email_digest,
    project_id_for,
    user_id_for,
)
from services.gateway.auth.vault import (
    PasswordStore,
    PeopleVault,
    SecretVault,
    email_key_of,
    new_access_key,
    new_secret_key,
)

BOOTSTRAP = Actor.service("bootstrap")
DEFAULT = "default"
ADMIN_EMAIL = "admin@localhost"


@dataclass(frozen=True)
class AdminCredentials:
    email: str
    password: str
    user_id: str
    access_key: str
    secret_key: str


def owner_only(path: Path, text: str) -> None:
    """Write a file only its owner can read, without a moment where others could."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


def kept_secret(data_dir: Path, name: str, make: Callable[[], str] | None = None) -> str:
    """A secret kept in ``<data-dir>/<name>`` (owner-only), made on first use by ``make``
    (default: 48 random bytes, URL-safe)."""
    path = data_dir / name
    if not path.exists():
        owner_only(path, (make or (lambda: secrets.token_urlsafe(48)))() + "\n")
    return path.read_text().strip()


def secrets_key(data_dir: Path) -> str:
    """The data directory's secrets key, made on first use."""
    return kept_secret(data_dir, "secrets.key", lambda: SecretVault.generate_key().decode())


def cluster_id(data_dir: Path) -> str:
    """The installation's id, made on its first start and kept in ``cluster.id``: its agents'
    node ids derive from it, so two installations on one machine (and one Docker engine) never
    share a node id or a container. A data directory from before there was one (it already
    holds a NATS store) keeps the empty id: its node ids stay derived from the host name
    alone, as its ledgers and containers already are."""
    path = data_dir / "cluster.id"
    if not path.exists():
        legacy = (data_dir / "nats").exists()
        data_dir.mkdir(parents=True, exist_ok=True)
        owner_only(path, ("" if legacy else uuid.uuid4().hex) + "\n")
    return path.read_text().strip()


def nats_token(data_dir: Path) -> str:
    """The stack's NATS token, made on the first start and kept (owner-only): agents on other
    machines given it keep working across restarts of ``jetyard up``."""
    return kept_secret(data_dir, "nats.token", lambda: secrets.token_urlsafe(24))


def _pending(data_dir: Path, key: bytes) -> AdminCredentials:
    path = data_dir / "bootstrap.pending.json"
    if path.exists():
        return AdminCredentials(**json.loads(path.read_text()))
    credentials = AdminCredentials(
        email=ADMIN_EMAIL,
        password=secrets.token_urlsafe(18),
        user_id=user_id_for(email_digest(ADMIN_EMAIL, email_key_of(key))),
        access_key=new_access_key(),
        secret_key=new_secret_key(),
    )
    owner_only(path, json.dumps(asdict(credentials), indent=2))
    return credentials


def _commands(c: AdminCredentials, *, digest: str, sealed: str, secret_id: str) -> list[Command]:
    project = project_id_for(DEFAULT, DEFAULT)
    common = {"actor": BOOTSTRAP, "tenant": SYSTEM_TENANT}
    made: list[Command] = [
        CreateResourcePolicy(
            kind=PolicyKind.KEYPAIR,
            name=DEFAULT,
            keypair=KeypairPolicyLimits(max_priority=100, max_containers_per_session=8),
            **common,
        ),
        CreateResourcePolicy(
            kind=PolicyKind.USER, name=DEFAULT, storage=StoragePolicyLimits(), **common
        ),
        CreateResourcePolicy(
            kind=PolicyKind.PROJECT, name=DEFAULT, storage=StoragePolicyLimits(), **common
        ),
        CreateDomain(name=DEFAULT, description="the default domain", **common),
        CreateProject(domain=DEFAULT, name=DEFAULT, **common),
        CreateResourceGroup(name=DEFAULT, description="every agent not told otherwise", **common),
        AssociateResourceGroup(name=DEFAULT, scope=ScopeKind.DOMAIN, scope_id=DEFAULT, **common),
        CreateUser(
            domain=DEFAULT,
            role=Role.SUPERADMIN,
            email_digest=digest,
            email_sealed=sealed,
            projects=(project,),
            **common,
        ),
        CreateKeypair(
            access_key=c.access_key,
            user_id=c.user_id,
            secret_key_id=secret_id,
            make_default=True,
            **common,
        ),
    ]
    # Stable ids: a start interrupted half-way sends the same commands again.
    return [
        cmd.model_copy(update={"command_id": derived_id("bootstrap", c.user_id, str(i))})
        for i, cmd in enumerate(made)
    ]


async def bootstrap(
    bus: Bus, data_dir: Path, key: bytes, *, timeout: float = 60.0
) -> AdminCredentials | None:
    """Create the first superadmin unless done before; returns their credentials the one time
    they are created (None when ``admin.json`` already exists)."""
    done = data_dir / "admin.json"
    if done.exists():
        return None
    c = _pending(data_dir, key)
    digest = email_digest(c.email, email_key_of(key))
    sealed = await PeopleVault(bus, key).seal(c.user_id, c.email)
    await PasswordStore(bus).set_password(c.user_id, c.password)
    secret_id = await SecretVault(bus, key).store_secret(c.access_key, c.secret_key)
    commands = CommandBus(bus)
    for cmd in _commands(c, digest=digest, sealed=sealed, secret_id=secret_id):
        outcome = await commands.execute(cmd, timeout=timeout)
        if outcome is None:
            raise TimeoutError(f"bootstrap: {cmd.command_name()} got no answer in {timeout}s")
        if not outcome.accepted and outcome.code != "conflict":
            raise RuntimeError(f"bootstrap: {cmd.command_name()} was refused: {outcome.message}")
    owner_only(done, json.dumps(asdict(c), indent=2) + "\n")
    (data_dir / "bootstrap.pending.json").unlink(missing_ok=True)
    return c
