"""Admin commands on people: users (``cmd.user.*``) and their keypairs (``cmd.keypair.*``).
No secret and no email in clear: the gateway stores a keypair's secret key (encrypted) before
sending ``CreateKeypair`` with its key id, and seals a user's email with that person's own key
before sending ``CreateUser``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from commands.admin.fields import Name, Reason
from commands.messages import Command
from schemas.fair_share import SHARE_DEFAULT, FairShare
from schemas.ids import Token
from schemas.subjects import AggregateType
from schemas.tenancy import Role

U, K = AggregateType.USER, AggregateType.KEYPAIR

# ---- users --------------------------------------------------------------------------------


class FirstKeypair(BaseModel):
    """The keypair a new user is given with their account (its secret stored by the gateway
    first, as for ``CreateKeypair``): a person can own sessions from their first login."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    access_key: Token
    secret_key_id: Annotated[str, Field(min_length=1, max_length=256)]
    policy: Name = "default"


class CreateUser(Command):
    """The user's id is ``user_id_for(email_digest)``: a second user with the same email is
    refused by the create-once guard. With ``keypair``, the user and their default keypair
    are written in one decision (nothing half-created)."""

    aggregate_type, verb = U, "create"
    domain: Name
    role: Role = Role.USER
    email_digest: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    email_sealed: Annotated[str, Field(min_length=1, max_length=4096)]
    policy: Name = "default"
    projects: tuple[Token, ...] = ()
    keypair: FirstKeypair | None = None
    fair_share: FairShare = SHARE_DEFAULT


class ModifyUser(Command):
    aggregate_type, verb = U, "modify"
    user_id: Token
    role: Role
    policy: Name
    fair_share: FairShare | None = None
    """None keeps the user's share."""


class AddUserToProject(Command):
    aggregate_type, verb = U, "join"
    user_id: Token
    project_id: Token


class RemoveUserFromProject(Command):
    aggregate_type, verb = U, "leave"
    user_id: Token
    project_id: Token


class DeactivateUser(Command):
    aggregate_type, verb = U, "deactivate"
    user_id: Token
    reason: Reason = ""


class ReactivateUser(Command):
    aggregate_type, verb = U, "reactivate"
    user_id: Token


# ---- keypairs -----------------------------------------------------------------------------


class CreateKeypair(Command):
    """``secret_key_id`` names the encrypted secret the gateway stored before sending this.
    A user's first keypair becomes their default one."""

    aggregate_type, verb = K, "create"
    access_key: Token
    user_id: Token
    secret_key_id: Annotated[str, Field(min_length=1, max_length=256)]
    policy: Name = "default"
    rate_limit: int | None = Field(default=None, ge=1)
    make_default: bool = False


class ModifyKeypair(Command):
    aggregate_type, verb = K, "modify"
    access_key: Token
    policy: Name
    rate_limit: int | None = Field(default=None, ge=1)


class SetDefaultKeypair(Command):
    aggregate_type, verb = K, "make-default"
    access_key: Token


class DeactivateKeypair(Command):
    """The keypair can no longer sign requests or create sessions; the scheduler cancels its
    pending sessions."""

    aggregate_type, verb = K, "deactivate"
    access_key: Token
    reason: Reason = ""


class ReactivateKeypair(Command):
    aggregate_type, verb = K, "reactivate"
    access_key: Token
