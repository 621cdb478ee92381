"""Who may use an endpoint: anyone when it is open to the public; otherwise a request whose
``Authorization: Bearer jyep_<token id>_<secret>`` names one of the endpoint's tokens, with
the secret's SHA-256 equal to the digest on the log (compared in constant time), not revoked,
not expired. Pure (``now`` is passed in); no subjects.

Every refusal is a 401 with a sentence saying why; a token unknown to the endpoint and a
wrong secret get the same one, so that the answer tells nothing about which token ids exist.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime

from schemas.serving import TOKEN_PREFIX, parse_token
from services.appproxy.access import Refused
from services.appproxy.endpoints.table import Endpoint

CHALLENGE = (b"www-authenticate", b'Bearer realm="jetyard endpoint"')
"""The header every 401 here carries (RFC 6750)."""
_NO_DIGEST = hashlib.sha256(secrets.token_bytes(32)).hexdigest()
"""Compared against when the token id is unknown, so that both cases take the same time."""


def check(endpoint: Endpoint, authorization: bytes | None, *, now: float) -> str | None:
    """The id of the token that lets the request in (None: the endpoint is open to the
    public); ``Refused`` (401) otherwise."""
    if endpoint.open_to_public:
        return None
    if authorization is None:
        raise Refused(401, f"endpoint {endpoint.name} needs a token: send "
                      f"Authorization: Bearer {TOKEN_PREFIX}_…")  # fmt: skip
    scheme, _, text = authorization.decode("latin-1").strip().partition(" ")
    parsed = parse_token(text) if scheme.lower() == "bearer" else None
    if parsed is None:
        raise Refused(401, f"the Authorization header holds no endpoint token (want Bearer "
                      f"{TOKEN_PREFIX}_<token id>_<secret>)")  # fmt: skip
    token_id, secret = parsed
    token = endpoint.tokens.get(token_id)
    digest = hashlib.sha256(secret.encode()).hexdigest()
    matches = hmac.compare_digest(digest, token.secret_sha256 if token else _NO_DIGEST)
    if token is None or not matches:
        raise Refused(401, f"this token is not one of endpoint {endpoint.name}'s")
    if token.revoked:
        raise Refused(401, f"token {token_id} was revoked")
    if token.expires_at <= now:
        when = datetime.fromtimestamp(token.expires_at, UTC).isoformat(timespec="seconds")
        raise Refused(401, f"token {token_id} expired at {when}")
    return token_id
