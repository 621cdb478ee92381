"""Stream, bucket and subject names: the one place that spells them."""

from __future__ import annotations

import functools
from enum import StrEnum

from schemas.ids import TOKEN_PATTERN, check_token

EVENTS_STREAM = "JY_EVENTS"
COMMANDS_STREAM = "JY_COMMANDS"
OUTCOMES_STREAM = "JY_OUTCOMES"
PARKED_STREAM = "JY_PARKED"
ACCESS_STREAM = "JY_ACCESS"  # the access log: every request and command, by domain
OUTPUT_STREAM = "JY_OUTPUT"  # running kernels' stdout/stderr, live, the tail of each kept
SEALS_STREAM = "JY_SEALS"  # signed seals over JY_EVENTS (events.audit), forever

EVENTS_PREFIX = "ev"
COMMANDS_PREFIX = "cmd"
OUTCOMES_PREFIX = "out"
PARKED_PREFIX = "parked"
ACCESS_PREFIX = "access"
OUTPUT_PREFIX = "output"  # a token of its own: ``out.>`` (outcomes) does not match it
SEALS_SUBJECT = "seal.log"  # the one subject of JY_SEALS: its writer guards on its last seq

HEARTBEATS_BUCKET = "jy-heartbeats"
LEASES_BUCKET = "jy-leases"
SNAPSHOTS_BUCKET = "jy-snapshots"
QUEUES_BUCKET = "jy-queues"  # each resource group's waiting sessions, in order (derived)
LOGS_BUCKET = "jy-logs"  # object store: a kernel's stdout/stderr, named by kernel id
SECRETS_BUCKET = "jy-secrets"  # keypair secret keys, encrypted with the secrets key
PEOPLE_BUCKET = "jy-people"  # one key per person, sealing their personal data in events
CREDENTIALS_BUCKET = "jy-credentials"  # password hashes, by user id
NONCES_BUCKET = "jy-nonces"  # signed requests seen within the date window (replays)
GRANTS_BUCKET = "jy-app-grants"  # app URLs already used once, and revoked app access
LOGINS_BUCKET = "jy-logins"  # login tokens (by digest), expiring
QUARANTINE_BUCKET = "jy-quarantine"  # events a consumer could not fold: kept until released
REGISTRY_SECRETS_BUCKET = "jy-registry-secrets"  # registry passwords, sealed by the secrets key
RATELIMITS_BUCKET = "jy-ratelimits"  # request-rate token buckets shared by gateway replicas

REGISTRY_CREDENTIALS_SUBJECT = "jy.registry.credentials"
"""Agents ask here for a registry's credentials (request/reply; answered sealed to the asker)."""
SERVING_LOAD_PREFIX = "jy.serving.load"
"""``jy.serving.load.<proxy id>``: each app proxy replica's request counts per endpoint and
replica, every second (core NATS, not kept): what the serving controller's rules read."""
RESCAN_PROGRESS_PREFIX = "jy.progress.rescan"
"""``jy.progress.rescan.<registry id>``: a rescan's progress as it goes (core NATS, not kept)."""

EVENT_NAME_HEADER = "Jy-Event"
EVENT_ID_HEADER = "Jy-Event-Id"
OUTPUT_LINE_HEADER = "Jy-Output-Line"  # line number (0-based) of a message's first line
OUTPUT_LINES_HEADER = "Jy-Output-Lines"  # how many lines the message holds
OUTPUT_MARK_HEADER = "Jy-Output-Mark"  # "<engine ns>:<n>": where its last line was, to resume


class AggregateType(StrEnum):
    """Aggregate types, each written by exactly one service (see docs/architecture.md)."""

    SESSION = "session"
    NODE = "node"
    AGENT = "agent"
    QUOTA = "quota"
    VFOLDER = "vfolder"
    DOMAIN = "domain"
    PROJECT = "project"
    USER = "user"
    KEYPAIR = "keypair"
    RESOURCE_POLICY = "resource_policy"
    RESOURCE_GROUP = "resource_group"
    IMAGE = "image"
    REGISTRY = "registry"
    """A container registry images are pulled from (its secret is never on the log)."""
    JOIN_TOKEN = "join_token"
    """A token a new machine joins the cluster with (only its secret's digest is on the log)."""
    ENDPOINT = "endpoint"
    """A model-serving endpoint: revisions, replicas, scaling and rollout decisions, tokens
    (only their secrets' digests)."""
    CORRECTION = "correction"
    """An operator's correction of a held (quarantined) aggregate: skip one event, or void it."""
    ACTIVITY = "activity"
    """One reporter's reports that sessions were in use (idle timeouts read them), under the
    reporter's id: a node's agent (its node id) or an app proxy replica (its proxy id). Each
    is written only by that reporter."""


@functools.lru_cache(maxsize=1 << 16)
def event_subject(aggregate_type: AggregateType | str, aggregate_id: str) -> str:
    """``ev.<aggregate>.<id>``: one subject per aggregate, never one per event type. Kept for
    the aggregates asked for lately: a writer names each of its aggregates many times (guards,
    writes, acks), and checking the id each time cost more than the cache."""
    kind = aggregate_type
    if type(kind) is not AggregateType:  # calling the enum on a member costs as much
        kind = AggregateType(kind)
    if TOKEN_PATTERN.match(aggregate_id) is None:
        check_token(aggregate_id, f"{kind.value} id")  # raises, saying what is wrong
    return f"{EVENTS_PREFIX}.{kind.value}.{aggregate_id}"


def events_of(aggregate_type: AggregateType | str | None = None) -> str:
    """Filter subject for every event, or for every event of one aggregate type."""
    if aggregate_type is None:
        return f"{EVENTS_PREFIX}.>"
    return f"{EVENTS_PREFIX}.{AggregateType(aggregate_type).value}.*"


def event_kind(subject: str) -> str:
    """The aggregate type an event subject (``ev.<type>.<id>``) names, as text, without checking
    it ("" if it names none): for skipping on a hot path; ``parse_event_subject`` checks."""
    parts = subject.split(".", 2)
    return parts[1] if len(parts) > 1 else ""


def parse_event_subject(subject: str) -> tuple[AggregateType, str]:
    prefix, kind, aggregate_id = subject.split(".", 2)
    if prefix != EVENTS_PREFIX:
        raise ValueError(f"not an event subject: {subject!r}")
    return AggregateType(kind), aggregate_id


def command_subject(aggregate_type: AggregateType | str, verb: str) -> str:
    """``cmd.<aggregate>.<verb>``, e.g. ``cmd.session.create``."""
    return f"{COMMANDS_PREFIX}.{AggregateType(aggregate_type).value}.{check_token(verb, 'verb')}"


def commands_of(aggregate_type: AggregateType | str) -> str:
    return f"{COMMANDS_PREFIX}.{AggregateType(aggregate_type).value}.*"


def outcome_subject(command_id: str) -> str:
    return f"{OUTCOMES_PREFIX}.{check_token(command_id, 'command id')}"


def access_subject(domain: str | None) -> str:
    """``access.<domain>``; requests by no known principal go to ``access._``."""
    return f"{ACCESS_PREFIX}.{check_token(domain, 'domain') if domain else '_'}"


def parked_subject(command_id: str) -> str:
    return f"{PARKED_PREFIX}.{check_token(command_id, 'command id')}"


def output_subject(session_id: str, kernel_id: str) -> str:
    """``output.<session id>.<kernel id>``: one kernel's output, in order."""
    session = check_token(session_id, "session id")
    return f"{OUTPUT_PREFIX}.{session}.{check_token(kernel_id, 'kernel id')}"


def outputs_of(session_id: str, kernel_id: str | None = None) -> str:
    """Filter subject for every kernel's output of a session, or for one kernel's."""
    if kernel_id is not None:
        return output_subject(session_id, kernel_id)
    return f"{OUTPUT_PREFIX}.{check_token(session_id, 'session id')}.*"
