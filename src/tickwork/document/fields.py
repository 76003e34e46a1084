"""The job document's fields, one parser each (``tickwork.document`` puts them together).

A parser takes the raw value and its field path (``schedule.every``, ``tags[2]``) and returns
the parsed value or raises ``ValidationError(field, reason)``. The common shapes take a short
path: a name is checked with one regex, and a schedule, retry or payload object seen before
(the same items, of the same types: ``memo_key``) is parsed once, so a bulk creation that
repeats a few schedules and payloads pays for each only once. Only what parsed without error
is remembered, so every error is still found and worded as on the long path.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache, wraps
from json.encoder import (  # type: ignore[attr-defined]  # c_make_encoder: not in the stubs
    c_make_encoder,
    encode_basestring,
)
from typing import Any, Literal, TypeVar

from tickwork.document.text import got
from tickwork.document.values import (
    Parser,
    bounded_seconds,
    check_plain,
    choice,
    fields,
    fmt,
    integer,
    mapping,
    memo_key,
    seconds,
    string,
    unknown,
)
from tickwork.errors import ValidationError
from tickwork.models import KINDS, Delivery, Overlap, RetryPolicy, ScheduleSpec, rfc3339
from tickwork.schedules import Schedule, compile_schedule, load_zone
from tickwork.schedules.calendars import check_name as calendar_name
from tickwork.schedules.structured import parse_rule

NAME_MAX_CHARS = 200
NAME_FORBIDDEN = frozenset("<>\"'&/\\`")
PAYLOAD_MAX_BYTES = 64 * 1024
TAGS_MAX = 20
PRIORITY_RANGE = (-1000, 1000)
MAX_ATTEMPTS_RANGE = (1, 100)
TIMEOUT_MAX_SECONDS = 86400.0
JITTER_MAX_SECONDS = 3600.0
EVERY_MIN_SECONDS = 1.0
MEMO_SIZE = 4096  # distinct schedules, retry policies and payloads remembered (then forgotten)
MEMO_PAYLOAD_CHARS = 4096  # larger payloads are checked each time rather than kept

QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
QUEUE_NAME_RULE = "must be 1 to 64 letters, digits, '_', '.' or '-'"
TAG = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
TAG_RULE = "must be 1 to 64 letters, digits, '_', '.', ':' or '-'"
INSTANT_EXAMPLE = "2030-01-01T09:00:00Z"

ScheduleType = Literal["at", "cron", "every", "weekly", "monthly"]
SCHEDULE_TYPES: tuple[ScheduleType, ...] = ("at", "cron", "every", "weekly", "monthly")
SCHEDULE_FIELDS = (*SCHEDULE_TYPES, "timezone", "offset", "start_at", "end_at", "jitter_seconds",
                   "exclude", "only")
# A field that applies to some schedule types only; timezone also to any that names calendars.
SCHEDULE_ONLY_FOR = {"timezone": ("cron", "weekly", "monthly"), "offset": ("every",)}
CALENDARS_MAX = 10
# document -> ScheduleSpec
_SPEC_NAMES = {"every": "every_seconds", "offset": "offset_seconds", "weekly": "rule",
               "monthly": "rule"}
JITTER_MODES = ("full", "equal", "none")
OVERLAPS = tuple(overlap.value for overlap in Overlap)
DELIVERIES = tuple(delivery.value for delivery in Delivery)

_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")
# Anything a name may not hold: control characters (Unicode category Cc is exactly these two
# ranges) and NAME_FORBIDDEN. A name without any takes no other character checks.
_NAME_SUSPECT = re.compile(r"[\x00-\x1f\x7f-\x9f<>\"'&/\\`]")
# The payload as JSON: compact, UTF-8 (its size is counted in bytes), NaN and Infinity refused.
_PAYLOAD_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# The same encoder made once, without the check for a value that contains itself (a dict of
# ids per call): the document's nesting is bounded (check_strings) before its payload is encoded.
_PAYLOAD_ENCODE = None if c_make_encoder is None else c_make_encoder(
    None, _PAYLOAD_JSON.default, encode_basestring, None, ":", ",", False, False, False)
# A lone surrogate (U+D800 to U+DFFF) is not text: JSON's "\ud800" escape makes one, and so does
# Python's surrogateescape for bytes that are not UTF-8, but no encoding can write it (not the
# store's, the wire's or a terminal's). ``isascii()`` is O(1), so ASCII text skips the search.

_Parser = Parser
V = TypeVar("V")
_ParserOf = Callable[[object, str], V]


def _encode_payload(payload: Mapping[str, Any]) -> str:
    if _PAYLOAD_ENCODE is None:
        return _PAYLOAD_JSON.encode(payload)
    try:
        return "".join(_PAYLOAD_ENCODE(payload, 0))
    except RecursionError:  # not reached after check_strings; json's own error if it were
        return _PAYLOAD_JSON.encode(payload)


def memoized(
    memo: dict[bytes, V], keep: Callable[[V], bool] | None = None,
) -> Callable[[_ParserOf[V]], _ParserOf[V]]:
    """The parser, remembering in ``memo`` what a value parsed to, by its ``memo_key``: only if
    it parsed without error (and ``keep`` accepts it); all forgotten at MEMO_SIZE entries."""
    def decorate(parse: _ParserOf[V]) -> _ParserOf[V]:
        @wraps(parse)
        def parse_once(value: object, field: str) -> V:
            key = memo_key(value)
            if key is None:
                return parse(value, field)
            known = memo.get(key)
            if known is not None:
                return known
            parsed = parse(value, field)
            if keep is None or keep(parsed):
                if len(memo) >= MEMO_SIZE:
                    memo.clear()
                memo[key] = parsed
            return parsed
        return parse_once
    return decorate


@lru_cache(maxsize=MEMO_SIZE)
def compiled_schedule(spec: ScheduleSpec) -> Schedule:
    """``compile_schedule``, once per distinct schedule: compiled schedules are immutable, and
    equal specs (equal instants, whatever their UTC offset) compile to the same fire times."""
    return compile_schedule(spec)


def parse_instant(value: object, field: str) -> datetime:
    """An RFC 3339 timestamp with ``Z`` or an offset (or an aware datetime), as aware UTC."""
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValidationError(field, f"must include a UTC offset, e.g. {INSTANT_EXAMPLE}")
        return value.astimezone(UTC)
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValidationError(
            field, f"must be an RFC 3339 timestamp such as {INSTANT_EXAMPLE} ({got(value)})")
    date, time, fraction, offset = match.groups()
    if offset is None:
        raise ValidationError(field, f"must include a UTC offset, e.g. {INSTANT_EXAMPLE}")
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        # fromisoformat takes at most 6 fraction digits; RFC 3339 allows more, so cut them.
        parsed = datetime.fromisoformat(f"{date}T{time}{(fraction or '')[:7]}{offset}")
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValidationError(field, f"is not a valid date and time ({got(value)})") from None


# --- top-level fields -----------------------------------------------------------------------


def name(value: object, field: str) -> str:
    text = string(value, field)
    if (0 < len(text) <= NAME_MAX_CHARS and _NAME_SUSPECT.search(text) is None
            and text == text.strip()):
        return text
    if not text:
        raise ValidationError(field, "must not be empty")
    if len(text) > NAME_MAX_CHARS:
        reason = f"must be at most {NAME_MAX_CHARS} characters (got {len(text)})"
        raise ValidationError(field, reason)
    if any(unicodedata.category(char) == "Cc" for char in text):
        raise ValidationError(field, "must not contain control characters")
    if text != text.strip():
        raise ValidationError(field, "must not start or end with whitespace")
    forbidden = sorted({char for char in text if char in NAME_FORBIDDEN})
    if forbidden:
        # Markup and path characters: a name is shown in pages and used in API paths.
        raise ValidationError(field, f"must not contain {' '.join(forbidden)} "
                              f"(not allowed: {' '.join(sorted(NAME_FORBIDDEN))})")
    return text


def queue(value: object, field: str) -> str:
    text = string(value, field)
    if not QUEUE_NAME.fullmatch(text):
        raise ValidationError(field, f"{QUEUE_NAME_RULE} ({got(text)})")
    return text


_PAYLOAD_TEXTS: dict[bytes, str] = {}


@memoized(_PAYLOAD_TEXTS, keep=lambda text: len(text) <= MEMO_PAYLOAD_CHARS)
def payload_json(value: object, field: str) -> str:
    """The payload as compact JSON text: what its kind's executor then checks (``document``)
    and the one encoding that proves it holds only JSON values and measures its size."""
    check_plain(value, field)
    payload = mapping(value, field)
    try:
        text = _encode_payload(payload)
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, f"must contain only JSON values ({exc})") from None
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > PAYLOAD_MAX_BYTES:
        raise ValidationError(field, f"is {size} bytes as JSON; the limit is {PAYLOAD_MAX_BYTES}")
    return text


_RETRIES: dict[bytes, RetryPolicy] = {}


@memoized(_RETRIES)
def retry(value: object, field: str) -> RetryPolicy:
    check_plain(value, field)
    obj = mapping(value, field)
    given = fields(obj, field, _RETRY_PARSERS)
    policy = RetryPolicy(**given)
    if policy.backoff_max_seconds < policy.backoff_base_seconds:
        base, most = policy.backoff_base_seconds, policy.backoff_max_seconds
        if "backoff_max_seconds" in given:
            raise ValidationError(
                f"{field}.backoff_max_seconds",
                f"must be at least backoff_base_seconds ({fmt(base)}) (got {fmt(most)})",
            )
        raise ValidationError(
            f"{field}.backoff_base_seconds",
            f"must be at most backoff_max_seconds ({fmt(most)}) (got {fmt(base)})",
        )
    return policy


def paused(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be true or false ({got(value)})")
    return value


def tags(value: object, field: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise ValidationError(field, f"must be an array of strings ({got(value)})")
    if len(value) > TAGS_MAX:
        raise ValidationError(field, f"must have at most {TAGS_MAX} tags (got {len(value)})")
    found: list[str] = []
    for index, item in enumerate(value):
        path = f"{field}[{index}]"
        tag = string(item, path)
        if not TAG.fullmatch(tag):
            raise ValidationError(path, f"{TAG_RULE} ({got(tag)})")
        if tag in found:
            raise ValidationError(path, f"duplicate tag {tag!r}")
        found.append(tag)
    return tuple(found)


CHAIN_MAX = 20  # jobs one chaining field may name


def chain(value: object, field: str) -> tuple[str, ...]:
    """``on_success``, ``on_failure``, ``on_dead``: names of other jobs. That they exist and
    form no cycle is checked when the job is saved (it needs the store)."""
    if not isinstance(value, list | tuple):
        raise ValidationError(field, f"must be an array of job names ({got(value)})")
    if len(value) > CHAIN_MAX:
        raise ValidationError(field, f"must name at most {CHAIN_MAX} jobs (got {len(value)})")
    found: list[str] = []
    for index, item in enumerate(value):
        path = f"{field}[{index}]"
        target = name(item, path)
        if target in found:
            raise ValidationError(path, f"duplicate job {target!r}")
        found.append(target)
    return tuple(found)


# --- schedule -------------------------------------------------------------------------------

_SCHEDULES: dict[bytes, ScheduleSpec] = {}


@memoized(_SCHEDULES)
def schedule(value: object, field: str) -> ScheduleSpec:
    check_plain(value, field)
    obj = mapping(value, field)
    if len(obj) == 1 and "at" in obj:  # the usual one-off: what the loops below come to
        spec = ScheduleSpec(type="at", at=parse_instant(obj["at"], f"{field}.at"))
        compiled_schedule(spec)
        return spec
    for item in obj:
        if item not in SCHEDULE_FIELDS:
            raise unknown(item, SCHEDULE_FIELDS, field)
    types = [item for item in SCHEDULE_TYPES if item in obj]
    if not types:
        raise ValidationError(field, "must have one of 'at', 'cron', 'every', 'weekly' or "
                              "'monthly'")
    if len(types) > 1:
        raise ValidationError(field, f"has both {types[0]!r} and {types[1]!r}; use exactly one")
    kind = types[0]
    for item, only in SCHEDULE_ONLY_FOR.items():
        if item == "timezone" and (obj.get("exclude") or obj.get("only")):
            continue  # calendars judge dates in the schedule's zone, whatever its type
        if item in obj and kind not in only:
            names = " or ".join(filter(None, (", ".join(map(repr, only[:-1])), repr(only[-1]))))
            raise ValidationError(f"{field}.{item}", f"only applies to {names} schedules")
    given = fields(obj, field, _SCHEDULE_PARSERS)
    start, end = given.get("start_at"), given.get("end_at")
    if start is not None and end is not None and end <= start:
        raise ValidationError(f"{field}.end_at", f"must be after start_at ({rfc3339(start)})")
    if given.get("offset") == AUTO:
        del given["offset"]
        given["offset_auto"] = True
    spec = ScheduleSpec(type=kind, **{_SPEC_NAMES.get(k, k): v for k, v in given.items()})
    compiled_schedule(spec)  # the cron syntax and whatever else the schedule module checks
    return spec


def cron(value: object, field: str) -> str:
    expression = string(value, field)
    if not expression.strip():
        raise ValidationError(field, "must not be empty")
    return expression


def timezone(value: object, field: str) -> str:
    zone = string(value, field)
    load_zone(zone, field)  # an IANA name; the schedule module owns that rule
    return zone


def calendars(value: object, field: str) -> tuple[str, ...]:
    """Names of calendars (``schedule.exclude``, ``schedule.only``); that they exist is
    checked against the store when the job is saved."""
    if not isinstance(value, list | tuple):
        raise ValidationError(field, f"must be an array of calendar names ({got(value)})")
    if len(value) > CALENDARS_MAX:
        raise ValidationError(field, f"must name at most {CALENDARS_MAX} calendars")
    names: list[str] = []
    for index, item in enumerate(value):
        name = calendar_name(item, f"{field}[{index}]")
        if name in names:
            raise ValidationError(f"{field}[{index}]", f"names calendar {name!r} twice")
        names.append(name)
    return tuple(names)


def every(value: object, field: str) -> float:
    interval = seconds(value, field)
    if interval < EVERY_MIN_SECONDS:
        raise ValidationError(field, "must be at least 1s")
    return interval


MAX_CONCURRENCY_RANGE = (1, 100_000)

AUTO = "auto"  # "offset": "auto": each job's own offset, from a hash of its id


def offset(value: object, field: str) -> float | str:
    """An ``every`` schedule's offset: seconds, a duration, or ``"auto"``."""
    if value == AUTO:
        return AUTO
    if not isinstance(value, str):
        amount: float = _OFFSET_SECONDS(value, field)
        return amount
    try:
        amount = _OFFSET_SECONDS(value, field)
    except ValidationError as exc:  # a word that is not a duration: perhaps a misspelt auto
        raise ValidationError(field, f"{exc.reason}; or 'auto' to spread jobs over the "
                              "interval by their id") from None
    return amount


_OFFSET_SECONDS = bounded_seconds(zero_ok=True)


FIELD_PARSERS: dict[str, _Parser] = {
    "name": name,
    "queue": queue,
    "priority": lambda value, field: integer(value, field, *PRIORITY_RANGE),
    "schedule": schedule,
    "kind": lambda value, field: choice(value, field, KINDS),
    "payload": payload_json,
    "retry": retry,
    "timeout_seconds": bounded_seconds(zero_ok=False, most=TIMEOUT_MAX_SECONDS),
    "overlap": lambda value, field: Overlap(choice(value, field, OVERLAPS)),
    "catchup_window_seconds": bounded_seconds(zero_ok=True),
    "paused": paused,
    "tags": tags,
    "delivery": lambda value, field: Delivery(choice(value, field, DELIVERIES)),
    "on_success": chain,
    "on_failure": chain,
    "on_dead": chain,
    "limit_key": lambda value, field: None if value is None else queue(value, field),
    "max_concurrency": lambda value, field: (
        None if value is None else integer(value, field, *MAX_CONCURRENCY_RANGE)),
}

_RETRY_PARSERS: dict[str, _Parser] = {
    "max_attempts": lambda value, field: integer(value, field, *MAX_ATTEMPTS_RANGE),
    "backoff_base_seconds": bounded_seconds(zero_ok=False),
    "backoff_max_seconds": bounded_seconds(zero_ok=False),
    "jitter": lambda value, field: choice(value, field, JITTER_MODES),
}

_SCHEDULE_PARSERS: dict[str, _Parser] = {
    "at": parse_instant,
    "cron": cron,
    "timezone": timezone,
    "every": every,
    "weekly": lambda value, field: parse_rule("weekly", value, field),
    "monthly": lambda value, field: parse_rule("monthly", value, field),
    "exclude": calendars,
    "only": calendars,
    "offset": offset,
    "start_at": lambda value, field: None if value is None else parse_instant(value, field),
    "end_at": lambda value, field: None if value is None else parse_instant(value, field),
    "jitter_seconds": bounded_seconds(zero_ok=True, most=JITTER_MAX_SECONDS),
}
FIELDS = tuple(FIELD_PARSERS)  # the top-level fields, in the order job_document writes them
# The parsers that run check_strings themselves, when what they parse is not one they remember.
SELF_CHECKED = frozenset({"schedule", "payload", "retry"})
