"""The job document (DESIGN §8): one JSON shape, validated once, in one place.

The REST API, the CLI, the Python client and the dashboard all pass what they receive to
``parse_job_document``; ``job_document`` writes a spec back out in canonical form. Every problem
is a ``ValidationError(field, reason)`` naming the field (a dotted path such as ``retry.jitter`` or
``tags[2]``); the first problem found, in document order, is the one raised.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal

from tickwork.errors import ValidationError
from tickwork.executors import validate_payload
from tickwork.models import KINDS, Delivery, JobSpec, Overlap, RetryPolicy, ScheduleSpec, rfc3339
from tickwork.retry import worst_case_retry_span
from tickwork.schedules import compile_schedule, load_zone, parse_duration

NAME_MAX_CHARS = 200
NAME_FORBIDDEN = frozenset("<>\"'&/\\`")
PAYLOAD_MAX_BYTES = 64 * 1024
TAGS_MAX = 20
PRIORITY_RANGE = (-1000, 1000)
MAX_ATTEMPTS_RANGE = (1, 100)
TIMEOUT_MAX_SECONDS = 86400.0
JITTER_MAX_SECONDS = 3600.0
EVERY_MIN_SECONDS = 1.0
MAX_DEPTH = 64

QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
QUEUE_NAME_RULE = "must be 1 to 64 letters, digits, '_', '.' or '-'"
TAG = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
TAG_RULE = "must be 1 to 64 letters, digits, '_', '.', ':' or '-'"
INSTANT_EXAMPLE = "2030-01-01T09:00:00Z"
DURATION_RULE = "must be a number of seconds or a duration such as '30s', '15m', '1h' or '1d'"

REQUIRED = ("name", "schedule", "kind", "payload")
ScheduleType = Literal["at", "cron", "every"]
SCHEDULE_TYPES: tuple[ScheduleType, ...] = ("at", "cron", "every")
SCHEDULE_FIELDS = (*SCHEDULE_TYPES, "timezone", "offset", "start_at", "end_at", "jitter_seconds")
SCHEDULE_ONLY_FOR = {"timezone": "cron", "offset": "every"}
_SPEC_NAMES = {"every": "every_seconds", "offset": "offset_seconds"}  # document -> ScheduleSpec
JITTER_MODES = ("full", "equal", "none")
OVERLAPS = tuple(overlap.value for overlap in Overlap)
DELIVERIES = tuple(delivery.value for delivery in Delivery)

# Fixed instant from which a cron schedule's interval is estimated, so warnings are reproducible.
_INTERVAL_REFERENCE = datetime(2030, 1, 1, tzinfo=UTC)
_INTERVAL_SAMPLES = 8

_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")

_Parser = Callable[[object, str], Any]


@dataclass(frozen=True, slots=True)
class ParsedJob:
    """A valid job spec and the warnings about it (advice, not errors)."""

    spec: JobSpec
    warnings: tuple[str, ...]


def parse_job_document(doc: object, *, defaults: JobSpec | None = None) -> ParsedJob:
    """Validate a job document and build its spec.

    With ``defaults`` (a partial update), fields absent from ``doc`` keep their value there; a
    field that is present replaces the old value whole (``retry``, ``schedule`` and ``payload``
    are not merged key by key).
    """
    if not isinstance(doc, Mapping):
        raise ValidationError("", f"the job document must be a JSON object ({_got(doc)})")
    values: dict[str, Any] = {}
    if defaults is not None:
        values = {name: getattr(defaults, name) for name in FIELDS}
    # The payload is checked against its kind once both are known, at the later of the two.
    unseen = {"kind", "payload"} & set(doc)
    payload_checked = False
    for key, raw in doc.items():
        parser = _FIELD_PARSERS.get(key) if isinstance(key, str) else None
        if parser is None:
            raise _unknown(key, FIELDS, "")
        _check_strings(raw, key, 0)
        values[key] = parser(raw, key)
        if key in unseen:
            unseen.discard(key)
            if not unseen and "kind" in values and "payload" in values:
                values["payload"] = validate_payload(values["kind"], values["payload"])
                payload_checked = True
    for name in REQUIRED:
        if name not in values:
            raise ValidationError(name, "is required")
    if not payload_checked:
        values["payload"] = validate_payload(values["kind"], values["payload"])
    spec = JobSpec(**values)
    return ParsedJob(spec=spec, warnings=_retry_warnings(spec))


def job_document(spec: JobSpec) -> dict[str, Any]:
    """The canonical, JSON-able document for ``spec``; ``parse_job_document`` reads it back."""
    retry = spec.retry
    return {
        "name": spec.name,
        "queue": spec.queue,
        "priority": spec.priority,
        "schedule": _schedule_document(spec.schedule),
        "kind": spec.kind,
        "payload": json.loads(json.dumps(spec.payload)),
        "retry": {
            "max_attempts": retry.max_attempts,
            "backoff_base_seconds": _number_out(retry.backoff_base_seconds),
            "backoff_max_seconds": _number_out(retry.backoff_max_seconds),
            "jitter": retry.jitter,
        },
        "timeout_seconds": _number_out(spec.timeout_seconds),
        "overlap": Overlap(spec.overlap).value,
        "catchup_window_seconds": _number_out(spec.catchup_window_seconds),
        "paused": spec.paused,
        "tags": list(spec.tags),
        "delivery": Delivery(spec.delivery).value,
    }


def parse_instant(value: object, field: str) -> datetime:
    """An RFC 3339 timestamp with ``Z`` or an offset (or an aware datetime), as aware UTC."""
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValidationError(field, f"must include a UTC offset, e.g. {INSTANT_EXAMPLE}")
        return value.astimezone(UTC)
    bad = f"must be an RFC 3339 timestamp such as {INSTANT_EXAMPLE} ({_got(value)})"
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValidationError(field, bad)
    date, time, fraction, offset = match.groups()
    if offset is None:
        raise ValidationError(field, f"must include a UTC offset, e.g. {INSTANT_EXAMPLE}")
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        # fromisoformat takes at most 6 fraction digits; RFC 3339 allows more, so cut them.
        parsed = datetime.fromisoformat(f"{date}T{time}{(fraction or '')[:7]}{offset}")
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValidationError(field, f"is not a valid date and time ({_got(value)})") from None


# --- top-level fields -----------------------------------------------------------------------


def _name(value: object, field: str) -> str:
    name = _string(value, field)
    if not name:
        raise ValidationError(field, "must not be empty")
    if len(name) > NAME_MAX_CHARS:
        reason = f"must be at most {NAME_MAX_CHARS} characters (got {len(name)})"
        raise ValidationError(field, reason)
    if any(unicodedata.category(char) == "Cc" for char in name):
        raise ValidationError(field, "must not contain control characters")
    if name != name.strip():
        raise ValidationError(field, "must not start or end with whitespace")
    forbidden = sorted({char for char in name if char in NAME_FORBIDDEN})
    if forbidden:
        # Markup and path characters: a name is shown in pages and used in API paths.
        raise ValidationError(field, f"must not contain {' '.join(forbidden)} "
                              f"(not allowed: {' '.join(sorted(NAME_FORBIDDEN))})")
    return name


def _queue(value: object, field: str) -> str:
    queue = _string(value, field)
    if not QUEUE_NAME.fullmatch(queue):
        raise ValidationError(field, f"{QUEUE_NAME_RULE} ({_got(queue)})")
    return queue


def _payload(value: object, field: str) -> dict[str, Any]:
    payload = _object(value, field)
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, f"must contain only JSON values ({exc})") from None
    if size > PAYLOAD_MAX_BYTES:
        raise ValidationError(field, f"is {size} bytes as JSON; the limit is {PAYLOAD_MAX_BYTES}")
    loaded: dict[str, Any] = json.loads(text)  # a plain copy, detached from the caller's objects
    return loaded


def _retry(value: object, field: str) -> RetryPolicy:
    given = _fields(_object(value, field), field, _RETRY_PARSERS)
    policy = RetryPolicy(**given)
    if policy.backoff_max_seconds < policy.backoff_base_seconds:
        base, most = policy.backoff_base_seconds, policy.backoff_max_seconds
        if "backoff_max_seconds" in given:
            raise ValidationError(
                f"{field}.backoff_max_seconds",
                f"must be at least backoff_base_seconds ({_fmt(base)}) (got {_fmt(most)})",
            )
        raise ValidationError(
            f"{field}.backoff_base_seconds",
            f"must be at most backoff_max_seconds ({_fmt(most)}) (got {_fmt(base)})",
        )
    return policy


def _paused(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be true or false ({_got(value)})")
    return value


def _tags(value: object, field: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise ValidationError(field, f"must be an array of strings ({_got(value)})")
    if len(value) > TAGS_MAX:
        raise ValidationError(field, f"must have at most {TAGS_MAX} tags (got {len(value)})")
    tags: list[str] = []
    for index, item in enumerate(value):
        path = f"{field}[{index}]"
        tag = _string(item, path)
        if not TAG.fullmatch(tag):
            raise ValidationError(path, f"{TAG_RULE} ({_got(tag)})")
        if tag in tags:
            raise ValidationError(path, f"duplicate tag {tag!r}")
        tags.append(tag)
    return tuple(tags)


# --- schedule -------------------------------------------------------------------------------


def _schedule(value: object, field: str) -> ScheduleSpec:
    obj = _object(value, field)
    for key in obj:
        if key not in SCHEDULE_FIELDS:
            raise _unknown(key, SCHEDULE_FIELDS, field)
    types = [key for key in SCHEDULE_TYPES if key in obj]
    if not types:
        raise ValidationError(field, "must have one of 'at', 'cron' or 'every'")
    if len(types) > 1:
        raise ValidationError(field, f"has both {types[0]!r} and {types[1]!r}; use exactly one")
    kind = types[0]
    for key, only in SCHEDULE_ONLY_FOR.items():
        if key in obj and kind != only:
            raise ValidationError(f"{field}.{key}", f"only applies to {only!r} schedules")
    given = _fields(obj, field, _SCHEDULE_PARSERS)
    start, end = given.get("start_at"), given.get("end_at")
    if start is not None and end is not None and end <= start:
        raise ValidationError(f"{field}.end_at", f"must be after start_at ({rfc3339(start)})")
    spec = ScheduleSpec(type=kind, **{_SPEC_NAMES.get(key, key): v for key, v in given.items()})
    compile_schedule(spec)  # the cron syntax and whatever else the schedule module checks
    return spec


def _cron(value: object, field: str) -> str:
    expression = _string(value, field)
    if not expression.strip():
        raise ValidationError(field, "must not be empty")
    return expression


def _timezone(value: object, field: str) -> str:
    name = _string(value, field)
    load_zone(name, field)  # an IANA name; the schedule module owns that rule
    return name


def _every(value: object, field: str) -> float:
    seconds = _seconds(value, field)
    if seconds < EVERY_MIN_SECONDS:
        raise ValidationError(field, "must be at least 1s")
    return seconds


def _schedule_document(schedule: ScheduleSpec) -> dict[str, Any]:
    doc: dict[str, Any]
    if schedule.type == "at":
        assert schedule.at is not None  # a ScheduleSpec of type "at" always has one
        doc = {"at": rfc3339(schedule.at)}
    elif schedule.type == "cron":
        doc = {"cron": schedule.cron, "timezone": schedule.timezone}
    else:
        assert schedule.every_seconds is not None  # likewise for "every"
        doc = {
            "every": _number_out(schedule.every_seconds),
            "offset": _number_out(schedule.offset_seconds),
        }
    if schedule.start_at is not None:
        doc["start_at"] = rfc3339(schedule.start_at)
    if schedule.end_at is not None:
        doc["end_at"] = rfc3339(schedule.end_at)
    if schedule.jitter_seconds:
        doc["jitter_seconds"] = _number_out(schedule.jitter_seconds)
    return doc


# --- the retry-span warning -----------------------------------------------------------------

_OVERLAP_EFFECT = {
    Overlap.SKIP: "later runs may be skipped by overlap 'skip'",
    Overlap.BUFFER_ONE: "later runs may be delayed or skipped by overlap 'buffer_one'",
    Overlap.BUFFER_ALL: "later runs may pile up behind it with overlap 'buffer_all'",
    Overlap.CANCEL_PREVIOUS: "a retrying run may be cancelled by overlap 'cancel_previous'",
    Overlap.ALLOW_ALL: "runs may overlap with overlap 'allow_all'",
}


def _retry_warnings(spec: JobSpec) -> tuple[str, ...]:
    interval = _interval_seconds(spec.schedule)
    if interval is None:
        return ()
    retry = spec.retry
    if spec.delivery == Delivery.AT_MOST_ONCE:
        retry = replace(retry, max_attempts=1)  # at_most_once never retries
    span = worst_case_retry_span(retry, spec.timeout_seconds)
    if span <= interval:
        return ()
    timeout = _fmt(spec.timeout_seconds)
    if retry.max_attempts == 1:
        how = f"1 attempt of {timeout}s timeout"
    else:
        how = (
            f"{retry.max_attempts} attempts of {timeout}s timeout"
            f" with backoff up to {_fmt(retry.backoff_max_seconds)}s"
        )
    return (
        f"retries can take up to {_fmt(span)}s ({how}), longer than the {_fmt(interval)}s"
        f" between runs; {_OVERLAP_EFFECT[Overlap(spec.overlap)]}",
    )


def _interval_seconds(schedule: ScheduleSpec) -> float | None:
    """Seconds between runs: ``every`` itself, or the smallest gap between a few cron fires."""
    if schedule.type == "every":
        return schedule.every_seconds
    if schedule.type != "cron":
        return None
    bare = replace(schedule, start_at=None, end_at=None, jitter_seconds=0.0)
    compiled = compile_schedule(bare)
    fires: list[datetime] = []
    moment: datetime | None = _INTERVAL_REFERENCE
    while moment is not None and len(fires) < _INTERVAL_SAMPLES:
        moment = compiled.next_after(moment)
        if moment is not None:
            fires.append(moment)
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(fires)]
    return min(gaps) if gaps else None


# --- shared checks --------------------------------------------------------------------------


def _fields(obj: Mapping[str, Any], field: str, parsers: Mapping[str, _Parser]) -> dict[str, Any]:
    """Parse each key of a nested object in document order; unknown keys are errors."""
    out: dict[str, Any] = {}
    for key, raw in obj.items():
        parser = parsers.get(key)
        if parser is None:
            raise _unknown(key, parsers, field)
        out[key] = parser(raw, f"{field}.{key}")
    return out


def _unknown(key: object, known: Iterable[str], parent: str) -> ValidationError:
    name = str(key)
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValidationError(parent, f"unknown field {name!r}{hint}")


def _check_strings(value: object, field: str, depth: int) -> None:
    """No NUL in any string or key, keys are strings, nesting is bounded."""
    if depth > MAX_DEPTH:
        raise ValidationError(field, f"is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(field, "must not contain NUL characters")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(field, f"object keys must be strings ({_got(key)})")
            if "\x00" in key:
                raise ValidationError(field, "object keys must not contain NUL characters")
            _check_strings(item, f"{field}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_strings(item, f"{field}[{index}]", depth + 1)


def _object(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be an object ({_got(value)})")
    return value


def _string(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string ({_got(value)})")
    return value


def _integer(value: object, field: str, low: int, high: int) -> int:
    """An int (or a float with no fraction, as JSON allows); never a bool or a string."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None or not low <= number <= high:
        raise ValidationError(field, f"must be an integer from {low} to {high} ({_got(value)})")
    return number


def _seconds(value: object, field: str) -> float:
    """A number of seconds, or a duration string in the forms parse_duration reads."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(field, f"{DURATION_RULE} ({_got(value)})")
    if isinstance(value, str):
        seconds = parse_duration(value, field)
    else:
        seconds = float(value) if abs(value) < 1e300 else math.inf  # a huge int would overflow
    if not math.isfinite(seconds):
        raise ValidationError(field, f"must be a finite number ({_got(value)})")
    return seconds


def _bounded_seconds(*, zero_ok: bool, most: float | None = None) -> _Parser:
    """A parser of seconds that must be > 0 (or >= 0 with ``zero_ok``) and at most ``most``."""

    def parse(value: object, field: str) -> float:
        seconds = _seconds(value, field)
        if seconds < 0 or (seconds == 0 and not zero_ok):
            bound = "at least 0" if zero_ok else "greater than 0"
            raise ValidationError(field, f"must be {bound} (got {_fmt(seconds)})")
        if most is not None and seconds > most:
            reason = f"must be at most {_fmt(most)} seconds (got {_fmt(seconds)})"
            raise ValidationError(field, reason)
        return seconds

    return parse


def _choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    hint = ""
    if isinstance(value, str):
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValidationError(field, f"must be one of {', '.join(choices)} ({_got(value)}{hint})")


def _got(value: object) -> str:
    """``got 'text'``, ``got 3.5``, ``got true``, ``got null``, ``got an array``."""
    if isinstance(value, str):
        return f"got {value if len(value) <= 40 else value[:37] + '...'!r}"
    if isinstance(value, bool | int | float) or value is None:
        shown = json.dumps(value)  # true, null, 1.5; a huge integer is cut short
        return f"got {shown if len(shown) <= 40 else shown[:37] + '...'}"
    if isinstance(value, Mapping):
        return "got an object"
    if isinstance(value, list | tuple):
        return "got an array"
    return f"got a {type(value).__name__}"


def _fmt(seconds: float) -> str:
    """634.0 -> '634', 1.25 -> '1.25'."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def _number_out(seconds: float) -> int | float:
    return int(seconds) if float(seconds).is_integer() else float(seconds)


_FIELD_PARSERS: dict[str, _Parser] = {
    "name": _name,
    "queue": _queue,
    "priority": lambda value, field: _integer(value, field, *PRIORITY_RANGE),
    "schedule": _schedule,
    "kind": lambda value, field: _choice(value, field, KINDS),
    "payload": _payload,
    "retry": _retry,
    "timeout_seconds": _bounded_seconds(zero_ok=False, most=TIMEOUT_MAX_SECONDS),
    "overlap": lambda value, field: Overlap(_choice(value, field, OVERLAPS)),
    "catchup_window_seconds": _bounded_seconds(zero_ok=True),
    "paused": _paused,
    "tags": _tags,
    "delivery": lambda value, field: Delivery(_choice(value, field, DELIVERIES)),
}

_RETRY_PARSERS: dict[str, _Parser] = {
    "max_attempts": lambda value, field: _integer(value, field, *MAX_ATTEMPTS_RANGE),
    "backoff_base_seconds": _bounded_seconds(zero_ok=False),
    "backoff_max_seconds": _bounded_seconds(zero_ok=False),
    "jitter": lambda value, field: _choice(value, field, JITTER_MODES),
}

_SCHEDULE_PARSERS: dict[str, _Parser] = {
    "at": parse_instant,
    "cron": _cron,
    "timezone": _timezone,
    "every": _every,
    "offset": _bounded_seconds(zero_ok=True),
    "start_at": lambda value, field: None if value is None else parse_instant(value, field),
    "end_at": lambda value, field: None if value is None else parse_instant(value, field),
    "jitter_seconds": _bounded_seconds(zero_ok=True, most=JITTER_MAX_SECONDS),
}
FIELDS = tuple(_FIELD_PARSERS)  # the top-level fields, in the order job_document writes them
