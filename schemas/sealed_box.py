"""Sealed boxes: a message only the holder of one X25519 private key can open. Pure; no subjects.

An agent asks for a registry's credentials with a fresh public key of its own; the gateway
answers with the credentials sealed to that key (an ephemeral X25519 key of its own, HKDF-SHA256
over the shared secret, AES-256-GCM with both public keys as associated data). Whoever reads
the subject, or a log of it, learns nothing; the private key never leaves the asking process.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

INFO = b"jetyard sealed box v1"
KEY_BYTES = 32
NONCE_BYTES = 12


class SealedBoxError(Exception):
    """A box that is malformed or was not sealed to this key."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise SealedBoxError("not base64") from exc


def _raw(key: X25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _key(shared: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=INFO).derive(shared)


class BoxKey:
    """A private key that opens boxes sealed to ``public``; made fresh per request."""

    def __init__(self) -> None:
        self._private = X25519PrivateKey.generate()

    @property
    def public(self) -> str:
        return _b64(_raw(self._private.public_key()))

    def open(self, box: str) -> bytes:
        data = _unb64(box)
        if len(data) < KEY_BYTES + NONCE_BYTES + 16:
            raise SealedBoxError("too short")
        sender = X25519PublicKey.from_public_bytes(data[:KEY_BYTES])
        nonce = data[KEY_BYTES : KEY_BYTES + NONCE_BYTES]
        shared = self._private.exchange(sender)
        associated = data[:KEY_BYTES] + _raw(self._private.public_key())
        try:
            return AESGCM(_key(shared)).decrypt(nonce, data[KEY_BYTES + NONCE_BYTES :], associated)
        except InvalidTag as exc:
            raise SealedBoxError("not sealed to this key") from exc


def seal_to(public: str, message: bytes) -> str:
    """``message`` sealed to the holder of ``public`` (a ``BoxKey.public``)."""
    raw = _unb64(public)
    if len(raw) != KEY_BYTES:
        raise SealedBoxError("a public key is 32 bytes")
    recipient = X25519PublicKey.from_public_bytes(raw)
    ephemeral = X25519PrivateKey.generate()
    sender = _raw(ephemeral.public_key())
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(_key(ephemeral.exchange(recipient))).encrypt(nonce, message, sender + raw)
    return _b64(sender + nonce + sealed)
