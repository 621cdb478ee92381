"""Seals: signed statements over the chain (``events.audit.chain``). Pure: no I/O but the
key files ``load_signing_key`` and ``load_public_key`` read.

A seal says "positions ``first``..``last`` of the log hold ``count`` messages, the chain's
value after them is ``head``, each message's mark is in ``marks``, and I follow the seal whose
digest is ``previous``". It is signed with an Ed25519 key that only the sealer holds (kept
apart from NATS's credentials: whoever can write to the NATS server cannot make a seal), and
verified with the public half, which an auditor holds on their own. A seal's *digest* (SHA-256
over its signed body) is what an operator writes down outside the cluster to anchor it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from events.audit.chain import MARK_BYTES

SEAL_VERSION = 1
NO_PREVIOUS = "0" * 64
HEX64 = r"^[0-9a-f]{64}$"


class SealError(ValueError):
    """A seal or key that cannot be read or trusted, with the reason."""


class Seal(BaseModel):
    """One seal, as stored on ``seal.log`` (JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(default=SEAL_VERSION, ge=1, le=SEAL_VERSION)
    number: int = Field(ge=1)
    first: int = Field(ge=1)
    """The first position this seal covers (the previous seal's ``last`` + 1)."""
    last: int = Field(ge=1)
    count: int = Field(ge=1)
    """Messages stored between ``first`` and ``last`` (fewer than the positions if the log
    has gaps)."""
    head: str = Field(pattern=HEX64)
    marks: str = Field(max_length=200_000)
    """Base64 of ``count`` marks (``MARK_BYTES`` each), in log order."""
    previous: str = Field(pattern=HEX64)
    sealed_at: AwareDatetime
    key_id: str = Field(pattern=r"^[0-9a-f]{16}$")
    signature: str = Field(default="", max_length=200)

    def body(self) -> bytes:
        """What is signed: every field but the signature, in one canonical form."""
        fields = self.model_dump(mode="json", exclude={"signature"})
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    def digest(self) -> str:
        return hashlib.sha256(self.body()).hexdigest()

    def mark_list(self) -> list[bytes]:
        """The marks, one per message; a seal whose marks do not match its count is refused."""
        try:
            raw = base64.b64decode(self.marks, validate=True)
        except ValueError as exc:
            raise SealError(f"seal {self.number}: its marks are not base64") from exc
        if len(raw) != self.count * MARK_BYTES:
            raise SealError(
                f"seal {self.number}: {len(raw) // MARK_BYTES} marks for {self.count} messages"
            )
        return [raw[i : i + MARK_BYTES] for i in range(0, len(raw), MARK_BYTES)]

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Seal:
        try:
            return cls.model_validate_json(data)
        except ValueError as exc:
            raise SealError(f"not a seal: {str(exc).splitlines()[0]}") from exc


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign(
    key: Ed25519PrivateKey,
    *,
    number: int,
    first: int,
    last: int,
    count: int,
    head: bytes,
    marks: bytes,
    previous: str,
    sealed_at: datetime,
) -> Seal:
    unsigned = Seal(
        number=number, first=first, last=last, count=count, head=head.hex(),
        marks=base64.b64encode(marks).decode(), previous=previous, sealed_at=sealed_at,
        key_id=key_id(key.public_key()),
    )  # fmt: skip
    signature = base64.b64encode(key.sign(unsigned.body())).decode()
    return unsigned.model_copy(update={"signature": signature})


def signed_by(seal: Seal, keys: dict[str, Ed25519PublicKey]) -> bool:
    """Whether one of the trusted ``keys`` (by key id) signed exactly this seal."""
    public = keys.get(seal.key_id)
    if public is None:
        return False
    try:
        public.verify(base64.b64decode(seal.signature, validate=True), seal.body())
    except (InvalidSignature, ValueError):
        return False
    return True


# ---- keys -----------------------------------------------------------------------------------


def new_key_files(private_path: Path) -> Ed25519PublicKey:
    """Make a signing key: the private half at ``private_path`` (mode 0600), the public half
    beside it (``.pub``). Refuses to replace an existing key."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    private_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    public = key.public_key()
    public_path(private_path).write_bytes(
        public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    )
    return public


def public_path(private_path: Path) -> Path:
    return private_path.with_name(private_path.name + ".pub")


def load_signing_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SealError(f"cannot read the sealing key {path}: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SealError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SealError(f"cannot read the public key {path}: {exc}") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise SealError(f"{path} is not an Ed25519 public key")
    return key


def trusted(keys: list[Ed25519PublicKey]) -> dict[str, Ed25519PublicKey]:
    return {key_id(key): key for key in keys}
