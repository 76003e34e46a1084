"""Signed webhooks, as the Standard Webhooks spec (https://www.standardwebhooks.com) has them.

tickwork signs an http job's request when the job (``signing_secret``) or its endpoint
(``webhook_signing_secrets``) has a secret. Three headers go with it:

- ``webhook-id``: the message id, the occurrence's idempotency key (the same on every attempt);
- ``webhook-timestamp``: Unix seconds when the attempt was sent;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, one entry
  per secret, separated by spaces (two while a secret is being rotated).

Secrets are ``whsec_<base64>``: the key is the base64-decoded part. A receiver checks a request
with ``verify``::

    from tickwork.executors.webhooks import InvalidSignature, verify

    try:
        verify(["whsec_new...", "whsec_old..."], request.headers, await request.read())
    except InvalidSignature as exc:
        return Response(status=401, text=str(exc))
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence
from datetime import datetime

__all__ = ["SECRET_PREFIX", "InvalidSignature", "decode_secret", "sign", "signature_headers",
           "verify"]

SECRET_PREFIX = "whsec_"  # noqa: S105  (a prefix, not a password)
DEFAULT_TOLERANCE_SECONDS = 300

Secret = str | bytes
Secrets = Secret | Sequence[Secret]


class InvalidSignature(ValueError):
    """The request is not signed by any of the secrets, or not recently enough."""


def decode_secret(secret: Secret) -> bytes:
    """The key in a ``whsec_<base64>`` secret (raw bytes are taken as the key itself)."""
    if isinstance(secret, bytes):
        if not secret:
            raise ValueError("a webhook secret must not be empty")
        return secret
    text = secret.strip().removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret must be whsec_ followed by base64") from None
    if not key:
        raise ValueError("a webhook secret must not be empty")
    return key


def _secrets(secrets: Secrets) -> list[bytes]:
    items: Sequence[Secret] = [secrets] if isinstance(secrets, str | bytes) else secrets
    keys: list[bytes] = []
    for item in items:
        # One string may hold several secrets separated by spaces (a rotation in progress).
        parts = item.split() if isinstance(item, str) else [item]
        keys.extend(decode_secret(part) for part in parts)
    if not keys:
        raise ValueError("at least one webhook secret is needed")
    return keys


def _body(body: bytes | str) -> bytes:
    return body.encode() if isinstance(body, str) else body


def _signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def sign(secrets: Secrets, msg_id: str, timestamp: int, body: bytes | str) -> str:
    """The ``webhook-signature`` value: ``v1,<sig>`` for each secret, space-separated."""
    data = _body(body)
    return " ".join(f"v1,{_signature(key, msg_id, timestamp, data)}"
                    for key in _secrets(secrets))


def signature_headers(secrets: Secrets, msg_id: str, timestamp: int,
                      body: bytes | str) -> dict[str, str]:
    """The three Standard Webhooks headers for one request."""
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secrets, msg_id, timestamp, body)}


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise InvalidSignature(f"missing header {name}")


def verify(
    secret_or_secrets: Secrets,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | datetime | None = None,
) -> None:
    """Return if ``body`` was signed with one of the secrets within the tolerance, else raise
    InvalidSignature saying why.

    ``headers`` is any mapping (names compared case-insensitively); ``body`` is the raw request
    body, exactly as received. ``now`` (Unix seconds or an aware datetime) is for tests.
    """
    keys = _secrets(secret_or_secrets)
    msg_id = _header(headers, "webhook-id")
    raw_timestamp = _header(headers, "webhook-timestamp").strip()
    signatures = _header(headers, "webhook-signature")
    if not raw_timestamp.isdigit():
        raise InvalidSignature("webhook-timestamp is not a Unix time in seconds")
    timestamp = int(raw_timestamp)
    current = time.time() if now is None else (
        now.timestamp() if isinstance(now, datetime) else float(now))
    if timestamp < current - tolerance_seconds:
        raise InvalidSignature(f"webhook-timestamp is more than {tolerance_seconds:g}s old")
    if timestamp > current + tolerance_seconds:
        raise InvalidSignature(
            f"webhook-timestamp is more than {tolerance_seconds:g}s in the future")
    data = _body(body)
    offered = [sig for version, _, sig in (entry.partition(",") for entry in signatures.split())
               if version == "v1" and sig]
    for key in keys:
        expected = _signature(key, msg_id, timestamp, data)
        if any(hmac.compare_digest(expected, sig) for sig in offered):
            return
    raise InvalidSignature("no v1 signature matches the secret(s)")
