"""The job document's ``alerts`` field: when a job going wrong is told, and to whom.

``{"channels": [...], "on": ["dead", "crashed", "missed"], "consecutive_failures": 3,
"late_after": "5m", "running_longer_than": "1h", "no_success_within": "1d", "cooldown": "1h",
"resolved": true}``. A channel is ``{"kind": "slack", "webhook_url": ...}``, ``{"kind":
"email", "to": [...]}``, ``{"kind": "webhook", "url": ..., "headers": {...}}`` or ``{"kind":
"publish", "broker": ..., "stream": ...}``: the payload of that kind of job without its message,
which each alert writes (a publish channel's broker is checked against the settings where they
are known: ``executors/admission.py``). ``{"$secret": name}`` is
allowed wherever the job kind allows it. The field is kept in the spec as canonical JSON text
(``JobSpec.alerts``); ``alert_policy`` reads it back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tickwork.document.values import bounded_seconds, check_plain, fields, integer, mapping
from tickwork.errors import ValidationError
from tickwork.executors import validate_payload

__all__ = ["CHANNEL_KINDS", "FAILED_STATES", "AlertPolicy", "alert_policy", "alerts"]

FAILED_STATES = ("dead", "crashed", "missed")
CHANNEL_KINDS = ("slack", "email", "webhook", "publish")
CHANNELS_MAX = 10
CONSECUTIVE_RANGE = (1, 1000)
DEFAULT_COOLDOWN_SECONDS = 3600.0
MESSAGE = "tickwork alert"
# Per kind: the job kind that delivers it, the channel fields a user gives, and the message
# fields the alert fills in (a sample here, so the kind's own validator checks the rest).
_CHANNELS: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {
    "slack": ("slack", ("webhook_url", "username", "icon_emoji"), {"text": MESSAGE}),
    "email": ("email", ("to", "cc", "bcc"), {"subject": MESSAGE, "text": MESSAGE}),
    "webhook": ("http", ("url", "headers", "signing_secret"), {"method": "POST", "body": {}}),
    "publish": ("publish", ("broker", "exchange", "routing_key", "subject", "topic", "stream",
                            "maxlen"), {"body": {}}),
}


@dataclass(frozen=True, slots=True)
class AlertPolicy:
    """What to watch on one job, and where to say it (durations in seconds; None: off)."""

    channels: tuple[Mapping[str, Any], ...]
    on: frozenset[str] = frozenset(FAILED_STATES)
    consecutive_failures: int | None = None
    late_after: float | None = None
    running_longer_than: float | None = None
    no_success_within: float | None = None
    cooldown: float = DEFAULT_COOLDOWN_SECONDS
    resolved: bool = True


def _channel(value: object, field: str) -> dict[str, Any]:
    obj = dict(mapping(value, field))
    kind = obj.pop("kind", None)
    if kind not in _CHANNELS:
        raise ValidationError(f"{field}.kind", f"must be one of {', '.join(CHANNEL_KINDS)}")
    job_kind, allowed, sample = _CHANNELS[kind]
    for key in obj:
        if key not in allowed:
            raise ValidationError(field, f"unknown field {key!r} for a {kind} channel "
                                  f"(expected kind, {', '.join(allowed)})")
    try:
        validate_payload(job_kind, {**obj, **sample})
    except ValidationError as exc:
        where = exc.field.replace("payload", field, 1) if exc.field.startswith(
            "payload") else field
        raise ValidationError(where, exc.reason) from None
    return {"kind": kind, **obj}


def _channels(value: object, field: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not 1 <= len(value) <= CHANNELS_MAX:
        raise ValidationError(field, f"must be an array of 1 to {CHANNELS_MAX} channels")
    return [_channel(item, f"{field}[{i}]") for i, item in enumerate(value)]


def _on(value: object, field: str) -> list[str]:
    if not isinstance(value, list) or not all(v in FAILED_STATES for v in value):
        raise ValidationError(field, f"must be an array of run states among "
                              f"{', '.join(FAILED_STATES)}")
    return [s for s in FAILED_STATES if s in value]


def _flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, "must be true or false")
    return value


_positive = bounded_seconds(zero_ok=False)
_PARSERS = {
    "channels": _channels,
    "on": _on,
    "consecutive_failures": lambda v, f: integer(v, f, *CONSECUTIVE_RANGE),
    "late_after": _positive,
    "running_longer_than": _positive,
    "no_success_within": _positive,
    "cooldown": bounded_seconds(zero_ok=True),
    "resolved": _flag,
}
ALERT_FIELDS = tuple(_PARSERS)


def alerts(value: object, field: str) -> str | None:
    """The ``alerts`` field as canonical JSON text (None for ``null``)."""
    if value is None:
        return None
    check_plain(value, field)
    given = fields(mapping(value, field), field, _PARSERS)
    if "channels" not in given:
        raise ValidationError(f"{field}.channels", "is required")
    doc: dict[str, Any] = {"channels": given["channels"],
                           "on": given.get("on", list(FAILED_STATES))}
    for name in ("consecutive_failures", "late_after", "running_longer_than",
                 "no_success_within"):
        if given.get(name) is not None:
            doc[name] = _number(given[name])
    doc["cooldown"] = _number(given.get("cooldown", DEFAULT_COOLDOWN_SECONDS))
    doc["resolved"] = given.get("resolved", True)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _number(amount: float) -> int | float:
    return int(amount) if float(amount).is_integer() else float(amount)


@lru_cache(maxsize=1024)
def alert_policy(text: str) -> AlertPolicy:
    """The policy that canonical ``alerts`` text (from ``alerts()``) describes."""
    d = json.loads(text)
    return AlertPolicy(
        channels=tuple(d["channels"]), on=frozenset(d.get("on", FAILED_STATES)),
        consecutive_failures=d.get("consecutive_failures"), late_after=d.get("late_after"),
        running_longer_than=d.get("running_longer_than"),
        no_success_within=d.get("no_success_within"),
        cooldown=float(d.get("cooldown", DEFAULT_COOLDOWN_SECONDS)),
        resolved=bool(d.get("resolved", True)))


def channel_payload(channel: Mapping[str, Any], subject: str, text: str,
                    event: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The job kind and payload that deliver one alert message through ``channel``."""
    fields_ = {k: v for k, v in channel.items() if k != "kind"}
    kind = channel["kind"]
    if kind == "slack":
        return "slack", {**fields_, "text": text}
    if kind == "email":
        return "email", {**fields_, "subject": subject, "text": text}
    if kind == "publish":
        return "publish", {**fields_, "body": dict(event)}
    return "http", {**fields_, "method": "POST", "body": dict(event)}


@dataclass(frozen=True, slots=True)
class AlertDefaults:
    """The setting ``alert_defaults``: the policy (canonical ``alerts`` text) of jobs without
    one of their own, per queue, then for every job."""

    every_job: str | None = None
    queues: Mapping[str, str] | None = None

    @property
    def any(self) -> bool:
        return self.every_job is not None or bool(self.queues)

    def text_for(self, own: str | None, queue: str) -> str | None:
        if own is not None:
            return own
        if self.queues and queue in self.queues:
            return self.queues[queue]
        return self.every_job


NO_DEFAULTS = AlertDefaults()


def parse_alert_defaults(text: str | None, field: str = "alert_defaults") -> AlertDefaults:
    """``{"all": <alerts>, "queues": {"mail": <alerts>}}`` (JSON), each ``<alerts>`` as the job
    document's field; ValidationError naming the part that is wrong."""
    if text is None or not text.strip():
        return NO_DEFAULTS
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValidationError(field, f"must be a JSON object ({exc})") from None
    obj = mapping(doc, field)
    for key in obj:
        if key not in ("all", "queues"):
            raise ValidationError(field, f"unknown field {key!r} (expected all, queues)")
    every = alerts(obj.get("all"), f"{field}.all")
    queues = {str(name): alerts(value, f"{field}.queues.{name}")
              for name, value in mapping(obj.get("queues", {}), f"{field}.queues").items()}
    return AlertDefaults(every_job=every, queues={k: v for k, v in queues.items()
                                                  if v is not None})
