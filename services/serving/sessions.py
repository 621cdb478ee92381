"""The session commands the controller sends for replicas: a ``CreateSession`` per replica
(type inference, as the endpoint's owner, the command id ``replica_command_id``), a
``TerminateSession`` per retired one. Re-sent with the same ids until the log shows their
effect: the ids make a re-send the same session, the same termination."""

from __future__ import annotations

from commands.messages import CreateSession, TerminateSession
from commands.serving.aggregate import Endpoint
from commands.serving.replicas import Replica
from schemas.ids import new_id
from schemas.principal import Actor, Tenant
from schemas.serving import replica_command_id

SERVING = Actor.service("serving")
SESSION_NAME_MAX = 64


def session_name(endpoint: Endpoint, number: int) -> str:
    suffix = f"-r{number}"
    return endpoint.name[: SESSION_NAME_MAX - len(suffix)] + suffix


def create_replica(endpoint: Endpoint, replica: Replica) -> CreateSession:
    owner = endpoint.owner
    assert owner is not None, "an endpoint always has an owner"
    spec = endpoint.revisions[replica.revision]
    session = spec.replica_spec(session_name(endpoint, replica.number))
    return CreateSession(
        command_id=replica_command_id(endpoint.id, endpoint.incarnation, replica.number),
        actor=SERVING,
        tenant=Tenant(domain=owner.domain, project=owner.project_id), spec=session,
        owner=owner, correlation_id=endpoint.id,
    )  # fmt: skip


def terminate_replica(endpoint: Endpoint, replica: Replica) -> TerminateSession:
    owner = endpoint.owner
    assert owner is not None, "an endpoint always has an owner"
    reason = f"endpoint {endpoint.name} replica {replica.number}: {replica.reason}"
    return TerminateSession(
        command_id=new_id(),  # a re-send must not meet the outcome of one sent too early
        actor=SERVING, tenant=Tenant(domain=owner.domain, project=owner.project_id),
        session_id=replica.session_id, reason=reason[:512], correlation_id=endpoint.id,
    )  # fmt: skip
