"""Stored form of a JobSpec: JSON, written after validation and read back without it.

The store trusts what it wrote; validation of user input happens once, in ``document.py``.
``spec_to_json`` writes exactly what ``json.dumps(d, separators=(",", ":"))`` writes for the spec
as a dict, assembled from pieces: a bulk creation writes thousands of specs that differ in a
few values, so what they share is not encoded again for each (``specs_to_json``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from json.decoder import scanstring  # type: ignore[attr-defined]  # not in the stubs
from json.encoder import (  # type: ignore[attr-defined]  # c_make_encoder: not in the stubs
    c_make_encoder,
    encode_basestring_ascii,
)
from typing import Any

from tickwork.frozen import direct
from tickwork.models import (
    ChainEvent,
    Delivery,
    JobSpec,
    Overlap,
    RetryPolicy,
    ScheduleSpec,
    Upstream,
    rfc3339,
)

_JSON = json.JSONEncoder(separators=(",", ":"))  # what json.dumps(..., separators=...) uses
# The same encoder made once, without the check for a value that contains itself (which costs
# a dict of ids per call); such a value overflows the stack, and is then encoded by _JSON.
_ENCODE = None if c_make_encoder is None else c_make_encoder(
    None, _JSON.default, encode_basestring_ascii, None, ":", ",", False, False, True)
_MEMO_SIZE = 4096


def _instant(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _text(value: object) -> str:
    if type(value) is str:
        return encode_basestring_ascii(value)
    return "null" if value is None else _JSON.encode(value)


def _number(value: object) -> str:
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    if type(value) is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return _JSON.encode(value)  # a bool, NaN, a subclass: as json writes them


def _bool(value: object) -> str:
    return "true" if value is True else "false" if value is False else _JSON.encode(value)


def _instant_text(value: datetime | None) -> str:
    return "null" if value is None else f'"{value.isoformat()}"'


def spec_to_json(spec: JobSpec) -> str:
    return _spec_json(spec, _schedule_json(spec.schedule), _payload_json(spec.payload))


def specs_to_json(specs: Iterable[JobSpec]) -> Iterator[str]:
    """``spec_to_json`` of each spec. A schedule or payload object that several specs share
    (bulk creation parses each distinct one once) is encoded once."""
    schedules: dict[int, tuple[ScheduleSpec, str]] = {}
    payloads: dict[int, tuple[dict[str, Any], str]] = {}
    for spec in specs:
        schedule = schedules.get(id(spec.schedule))
        if schedule is None:  # the memo keeps the object alive: no other takes its id
            schedule = schedules[id(spec.schedule)] = (
                spec.schedule, _schedule_json(spec.schedule))
        payload = payloads.get(id(spec.payload))
        if payload is None:
            payload = payloads[id(spec.payload)] = (spec.payload, _payload_json(spec.payload))
        yield _spec_json(spec, schedule[1], payload[1])


def _spec_json(spec: JobSpec, schedule: str, payload: str) -> str:
    text = (f'{{"name":{_text(spec.name)},"schedule":{schedule},"kind":{_text(spec.kind)},'
            f'"payload":{payload},{_tail_json(spec)}')
    if spec.alerts is None:  # written only when set (older rows lack it, and so do most)
        return text
    return f'{text[:-1]},"alerts":{_text(spec.alerts)}}}'


def _schedule_json(s: ScheduleSpec) -> str:
    return (f'{{"type":{_text(s.type)},"at":{_instant_text(s.at)},"cron":{_text(s.cron)},'
            f'"timezone":{_text(s.timezone)},"every_seconds":{_number(s.every_seconds)},'
            f'"offset_seconds":{_number(s.offset_seconds)},'
            f'"start_at":{_instant_text(s.start_at)},"end_at":{_instant_text(s.end_at)},'
            f'"jitter_seconds":{_number(s.jitter_seconds)}{_calendared_json(s)}'
            f'{_OFFSET_AUTO if s.offset_auto else ""}}}')


_OFFSET_AUTO = ',"offset_auto":true'  # written only when set (older rows lack it)


def _calendared_json(s: ScheduleSpec) -> str:
    """A weekly or monthly rule and the calendars, written only when set (older rows lack
    them, and so do most)."""
    if s.rule is None and not s.exclude and not s.only:
        return ""
    return (f',"rule":{_text(s.rule)},"exclude":{_JSON.encode(list(s.exclude))},'
            f'"only":{_JSON.encode(list(s.only))}')


def _payload_json(payload: dict[str, Any]) -> str:
    if _ENCODE is None:
        return _JSON.encode(payload)
    try:
        return "".join(_ENCODE(payload, 0))
    except RecursionError:  # a payload that contains itself: json's own error says so
        return _JSON.encode(payload)


# The types parsing gives the fields after the payload (tags: strings). Equal keys of other
# types (1, 1.0 and true; 0.0 and -0.0) would be written differently, so only these are
# remembered by value.
_TAIL_TYPES = (str, int, int, float, float, str, float, Overlap, float, bool, tuple, Delivery)
_TAILS: dict[tuple[object, ...], str] = {}


def _tail_json(spec: JobSpec) -> str:
    text = _plain_tail_json(spec)
    if spec.on_success or spec.on_failure or spec.on_dead:
        text = (f'{text[:-1]},"on_success":{_JSON.encode(list(spec.on_success))},'
                f'"on_failure":{_JSON.encode(list(spec.on_failure))},'
                f'"on_dead":{_JSON.encode(list(spec.on_dead))}}}')
    # Limits, only when set: a spec without them reads as before.
    if spec.limit_key is not None:
        text = f'{text[:-1]},"limit_key":{_text(spec.limit_key)}}}'
    if spec.max_concurrency is not None:
        text = f'{text[:-1]},"max_concurrency":{_number(spec.max_concurrency)}}}'
    return text


def _plain_tail_json(spec: JobSpec) -> str:
    r = spec.retry
    key = (spec.queue, spec.priority, r.max_attempts, r.backoff_base_seconds,
           r.backoff_max_seconds, r.jitter, spec.timeout_seconds, spec.overlap,
           spec.catchup_window_seconds, spec.paused, spec.tags, spec.delivery)
    exact = (tuple(map(type, key)) == _TAIL_TYPES
             and all((r.backoff_base_seconds, r.backoff_max_seconds, spec.timeout_seconds,
                      spec.catchup_window_seconds))
             and (not spec.tags or all(type(tag) is str for tag in spec.tags)))
    known = _TAILS.get(key) if exact else None
    if known is not None:
        return known
    text = (f'"queue":{_text(spec.queue)},"priority":{_number(spec.priority)},'
            f'"retry":{{"max_attempts":{_number(r.max_attempts)},'
            f'"backoff_base_seconds":{_number(r.backoff_base_seconds)},'
            f'"backoff_max_seconds":{_number(r.backoff_max_seconds)},"jitter":{_text(r.jitter)}}},'
            f'"timeout_seconds":{_number(spec.timeout_seconds)},'
            f'"overlap":{_text(spec.overlap.value)},'
            f'"catchup_window_seconds":{_number(spec.catchup_window_seconds)},'
            f'"paused":{_bool(spec.paused)},'
            f'"tags":{_JSON.encode(list(spec.tags)) if spec.tags else "[]"},'
            f'"delivery":{_text(spec.delivery.value)}}}')
    if exact:
        if len(_TAILS) >= _MEMO_SIZE:
            _TAILS.clear()
        _TAILS[key] = text
    return text


def new_job_ids(count: int) -> list[str]:
    """``count`` job ids: version 7 UUIDs (RFC 9562) in hex, 32 digits, from one read of
    ``os.urandom``. The first 48 bits are the Unix time in milliseconds, then 74 random bits.

    Jobs made together get ids that sort together, so the index entries of their rows, runs
    and attempts (keyed by job id first) go to a few neighbouring pages of each index instead
    of one page each anywhere in it: with random (version 4) ids a drain of 300,000 one-off
    runs cost PostgreSQL 40 % more per run than one of 20,000 (the indexes outgrow its cache,
    and every run dirtied a page of its own in each); with these, the same."""
    ms = (time.time_ns() // 1_000_000 & (1 << 48) - 1).to_bytes(6, "big")
    raw = bytearray(os.urandom(16 * count))
    for i in range(0, 16 * count, 16):
        raw[i:i + 6] = ms
        raw[i + 6] = raw[i + 6] & 0x0F | 0x70  # version 7
        raw[i + 8] = raw[i + 8] & 0x3F | 0x80  # the RFC 9562 variant
    text = raw.hex()
    return [text[i:i + 32] for i in range(0, 32 * count, 32)]


def new_job_id() -> str:
    """One id of ``new_job_ids``."""
    return new_job_ids(1)[0]


class _ParsedSpecs:
    """Specs parsed before, by their text after the name: jobs made by one bulk creation
    differ in little but their name, and a claim parses the spec of every job it has not seen.
    Entries share their schedule, retry and payload objects, so the executors' payload memos
    hit too. Bounded in entries and in characters (it starts over), like the store's
    SpecCache."""

    def __init__(self, entries: int = 4096, max_chars: int = 4 * 1024 * 1024) -> None:
        self._entries = entries
        self._max_chars = max_chars
        self._chars = 0
        self._specs: dict[str, JobSpec] = {}

    def get(self, tail: str) -> JobSpec | None:
        return self._specs.get(tail)

    def put(self, tail: str, spec: JobSpec) -> None:
        if len(self._specs) >= self._entries or self._chars + len(tail) > self._max_chars:
            self._specs.clear()
            self._chars = 0
        self._specs[tail] = spec
        self._chars += len(tail)


_PARSED = _ParsedSpecs()
_new_spec = direct(JobSpec)  # one per job read under a name not seen before


def spec_from_json(text: str) -> JobSpec:
    """The spec ``text`` holds. Text written by ``spec_to_json`` starts with the name: a spec
    whose rest was seen before is that spec under this name, without parsing it again."""
    split = _split_name(text)
    if split is None:
        return _parse(text)
    name, tail = split
    known = _PARSED.get(tail)
    if known is None:
        known = _parse(text)
        _PARSED.put(tail, known)
        return known
    if known.name == name:
        return known
    return _new_spec(name, known.schedule, known.kind, known.payload, known.queue,
                   known.priority, known.retry, known.timeout_seconds, known.overlap,
                   known.catchup_window_seconds, known.paused, known.tags, known.delivery,
                   alerts=known.alerts, on_success=known.on_success,
                   on_failure=known.on_failure, on_dead=known.on_dead,
                   limit_key=known.limit_key, max_concurrency=known.max_concurrency)


def _split_name(text: str) -> tuple[str, str] | None:
    """The name and the text after it, or None for text of another shape. A JSON
    string holds no bare quote, so the name's string ends where ``scanstring`` says."""
    if text.startswith('{"name":"'):
        try:
            name, end = scanstring(text, 9)
        except ValueError:
            return None
        if text.startswith(',"schedule":', end):
            return name, text[end:]
    return None


def _parse(text: str) -> JobSpec:
    d: dict[str, Any] = json.loads(text)
    s = d["schedule"]
    return JobSpec(
        name=d["name"],
        schedule=ScheduleSpec(
            type=s["type"],
            at=_instant(s["at"]),
            cron=s["cron"],
            timezone=s["timezone"],
            every_seconds=s["every_seconds"],
            offset_seconds=s["offset_seconds"],
            offset_auto=s.get("offset_auto", False),
            start_at=_instant(s["start_at"]),
            end_at=_instant(s["end_at"]),
            jitter_seconds=s["jitter_seconds"],
            rule=s.get("rule"),
            exclude=tuple(s.get("exclude", ())),
            only=tuple(s.get("only", ())),
        ),
        kind=d["kind"],
        payload=d["payload"],
        queue=d["queue"],
        priority=d["priority"],
        retry=RetryPolicy(**d["retry"]),
        timeout_seconds=d["timeout_seconds"],
        overlap=Overlap(d["overlap"]),
        catchup_window_seconds=d["catchup_window_seconds"],
        paused=d["paused"],
        tags=tuple(d["tags"]),
        delivery=Delivery(d["delivery"]),
        alerts=d.get("alerts"),
        on_success=tuple(d.get("on_success", ())),
        on_failure=tuple(d.get("on_failure", ())),
        on_dead=tuple(d.get("on_dead", ())),
        limit_key=d.get("limit_key"),
        max_concurrency=d.get("max_concurrency"),
    )


def upstream_to_json(u: Upstream) -> str:
    """A chained occurrence's upstream reference, as its row keeps it."""
    return json.dumps({"job_id": u.job_id, "job_name": u.job_name,
                       "scheduled_at": rfc3339(u.scheduled_at), "attempt": u.attempt,
                       "event": u.event.value, "idempotency_key": u.idempotency_key,
                       "output": u.output}, ensure_ascii=False, separators=(",", ":"))


def upstream_from_json(text: str | None) -> Upstream | None:
    if text is None:
        return None
    d = json.loads(text)
    return Upstream(job_id=d["job_id"], job_name=d["job_name"],
                    scheduled_at=datetime.fromisoformat(d["scheduled_at"]),
                    attempt=d["attempt"], event=ChainEvent(d["event"]),
                    idempotency_key=d["idempotency_key"], output=d["output"])
