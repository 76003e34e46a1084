"""Limits as the faces read and write them (docs/limits.md): one shape everywhere.

A queue's limits: ``{"max_running": 5, "rate": "50/s", "burst": 10}``, each optional (null or
absent: not limited). A named key's: ``{"rate": "100/min", "burst": 20}``, rate required.
Either may carry ``"namespace"``: the namespace that owns it from now on, or null to share it
(absent: the owner stays; client/owners.py).
Problems are ``ValidationError``s naming the field, as for job documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.document.fields import QUEUE_NAME, QUEUE_NAME_RULE
from tickwork.document.text import got
from tickwork.document.values import integer, mapping, unknown
from tickwork.drivers.admin import QueueInfo
from tickwork.drivers.limits import (
    BURST_RANGE,
    KEEP,
    MAX_RUNNING_RANGE,
    KeyLimitInfo,
    Owner,
    Rate,
    check_owner,
    parse_rate,
)
from tickwork.errors import ValidationError

QUEUE_LIMIT_FIELDS = ("max_running", "rate", "burst", "namespace")
KEY_LIMIT_FIELDS = ("rate", "burst", "namespace")


@dataclass(frozen=True, slots=True)
class Limits:
    max_running: int | None = None
    rate: Rate | None = None
    burst: int | None = None


def limit_name(value: str, field: str) -> str:
    """A queue name or a limit key: the queue name rule."""
    if not QUEUE_NAME.fullmatch(value):
        raise ValidationError(field, f"{QUEUE_NAME_RULE} ({got(value)})")
    return value


def rate(value: object, field: str = "rate") -> Rate:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string such as '50/s' ({got(value)})")
    try:
        return parse_rate(value)
    except ValueError as exc:
        raise ValidationError(field, str(exc)) from None


def parse_limits(doc: object, *, key: bool = False) -> Limits:
    """A queue's limits (``key``: a named key's, whose rate is required)."""
    body = mapping(doc, "")
    known = KEY_LIMIT_FIELDS if key else QUEUE_LIMIT_FIELDS
    for name in body:
        if name not in known:
            raise unknown(name, known, "")
    values: dict[str, Any] = {}
    for name, raw in body.items():
        if raw is None or name == "namespace":  # the owner: parse_owner
            continue
        if name == "rate":
            values[name] = rate(raw, name)
        else:
            values[name] = integer(raw, name, *(MAX_RUNNING_RANGE if name == "max_running"
                                               else BURST_RANGE))
    if key and "rate" not in values:
        raise ValidationError("rate", "is required")
    if "burst" in values and "rate" not in values:
        raise ValidationError("burst", "needs a rate: the burst is how many of the rate's "
                              "starts may happen at once")
    return Limits(**values)


def parse_owner(doc: object) -> Owner:
    """The body's ``namespace``: a namespace, None (shared), or KEEP when absent."""
    body = mapping(doc, "")
    return check_owner(body["namespace"]) if "namespace" in body else KEEP


def queue_json(q: QueueInfo) -> dict[str, Any]:
    """A queue with its usage, limits and owner, for the API and the CLI's --json."""
    return {"name": q.name, "paused": q.paused, "waiting": q.waiting, "due": q.due,
            "running": q.running, "max_running": q.max_running,
            "rate": None if q.rate is None else str(q.rate), "burst": q.burst,
            "tokens": None if q.tokens is None else round(q.tokens, 3),
            "namespace": q.namespace}


def key_limit_json(k: KeyLimitInfo) -> dict[str, Any]:
    return {"key": k.key, "rate": str(k.rate), "burst": k.burst, "tokens": round(k.tokens, 3),
            "namespace": k.namespace}


def queue_from_json(doc: Mapping[str, Any]) -> QueueInfo:
    r = doc.get("rate")
    return QueueInfo(name=doc["name"], paused=doc["paused"], waiting=doc["waiting"],
                     due=doc["due"], running=doc["running"], max_running=doc.get("max_running"),
                     rate=None if r is None else parse_rate(r), burst=doc.get("burst"),
                     tokens=doc.get("tokens"), namespace=doc.get("namespace"))


def key_limit_from_json(doc: Mapping[str, Any]) -> KeyLimitInfo:
    return KeyLimitInfo(key=doc["key"], rate=parse_rate(doc["rate"]), burst=doc["burst"],
                        tokens=doc["tokens"], namespace=doc.get("namespace"))


def limits_body(limits: Limits, namespace: Owner = KEEP) -> dict[str, Any]:
    """The request body that sets ``limits`` (and, unless KEEP, the owner)."""
    body = {"max_running": limits.max_running,
            "rate": None if limits.rate is None else str(limits.rate), "burst": limits.burst}
    return body if namespace is KEEP else body | {"namespace": namespace}
