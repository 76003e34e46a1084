"""Job commands read from a message stream: parsed in one place, applied through the client.

A command is one JSON object::

    {"op": "upsert", "job": {...job document...}, "version": 7, "reply_to": "..."}
    {"op": "delete", "name": "nightly-report", "version": 8}
    {"op": "pause" | "resume" | "trigger", "name": "nightly-report"}

Any command may carry ``"namespace": "acme"`` (default ``default``): the job is looked up,
created and versioned in that namespace, since job names are unique per namespace only.

``upsert`` creates the job the document names or replaces the one of that name (fields the
document leaves out take their defaults). ``version`` (upsert and delete) orders changes to
one name of one namespace: a change whose version is not newer than the last one applied
there is not written (``StaleVersion``), so an older command never overwrites a newer one and
a command applied twice (redelivered after a crash before its ack) changes nothing the second
time.

``parse_command`` raises ValidationError naming the field; ``apply`` raises what the client
raises (ValidationError, JobNotFound, StaleVersion, StoreError ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tickwork.client import AsyncClient
from tickwork.document import parse_job_spec
from tickwork.document.render import job_json, run_json
from tickwork.document.text import not_unicode
from tickwork.drivers.base import MAX_BATCH, AuditListParams
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE, NAMESPACE_NAME, NAMESPACE_RULE
from tickwork.errors import Conflict, JobNotFound, StaleVersion, ValidationError
from tickwork.models import AuditAction, Job, JobSpec, Occurrence

OPS = ("upsert", "delete", "pause", "resume", "trigger")
MAX_COMMAND_BYTES = 1024 * 1024
MAX_REPLY_TO = 255
MAX_VERSION = 2**63 - 1  # a PostgreSQL bigint
# A trigger delivered again is recognised by its message within this long (and these many
# audit entries of its job): a crash between commit and ack is answered well before.
TRIGGER_MEMORY = timedelta(days=7)
TRIGGER_PAGES = 10
_FIELDS = {"upsert": {"op", "job", "version", "reply_to", "namespace"},
           "delete": {"op", "name", "version", "reply_to", "namespace"}}
_NAMED = {"op", "name", "reply_to", "namespace"}


@dataclass(frozen=True, slots=True)
class Command:
    op: str
    name: str  # the job's name (an upsert's, from its document)
    spec: JobSpec | None = None  # upsert only
    version: int | None = None
    reply_to: str | None = None
    namespace: str = DEFAULT_NAMESPACE


def reply_to_of(body: bytes) -> str | None:
    """The ``reply_to`` of a command that did not parse, when it can be read at all, so
    even a refused command gets its answer."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    value = doc.get("reply_to") if isinstance(doc, dict) else None
    return value if _reply_to_ok(value) else None


def _reply_to_ok(value: object) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= MAX_REPLY_TO
            and not any(c.isspace() for c in value) and not_unicode(value) is None)


def parse_command(body: bytes) -> Command:
    if len(body) > MAX_COMMAND_BYTES:
        raise ValidationError("", f"a command is at most {MAX_COMMAND_BYTES} bytes "
                              f"(got {len(body)})")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError("", "a command is UTF-8 JSON; this is not UTF-8") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError("", f"a command is a JSON object; this is not JSON ({exc})"
                              ) from None
    if not isinstance(doc, dict):
        raise ValidationError("", f"a command is a JSON object (got {type(doc).__name__})")
    op = doc.get("op")
    if op not in OPS:
        raise ValidationError("op", f"must be one of {', '.join(OPS)} (got {op!r})")
    allowed = _FIELDS.get(op, _NAMED)
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise ValidationError(unknown[0], f"is not a field of a {op} command (its fields: "
                              f"{', '.join(sorted(allowed))})")
    reply_to = doc.get("reply_to")
    if reply_to is not None and not _reply_to_ok(reply_to):
        raise ValidationError("reply_to", f"must be a stream, queue or subject name of 1 to "
                              f"{MAX_REPLY_TO} characters, without spaces")
    version = _version(doc)
    namespace = doc.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not NAMESPACE_NAME.fullmatch(namespace):
        raise ValidationError("namespace", NAMESPACE_RULE)
    if op == "upsert":
        if not isinstance(doc.get("job"), dict):
            raise ValidationError("job", "is required: the job document (an object)")
        try:
            spec = parse_job_spec(doc["job"])
        except ValidationError as exc:
            raise ValidationError(f"job.{exc.field}" if exc.field else "job",
                                  exc.reason) from None
        return Command(op, spec.name, spec, version, reply_to, namespace)
    name = doc.get("name")
    if not isinstance(name, str) or not name or not_unicode(name) is not None:
        raise ValidationError("name", "is required: the name of the job (text)")
    return Command(op, name, None, version, reply_to, namespace)


def _version(doc: Mapping[str, Any]) -> int | None:
    version = doc.get("version")
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) \
            or not 0 <= version <= MAX_VERSION:
        raise ValidationError("version", f"must be a whole number from 0 to {MAX_VERSION} "
                              f"(got {version!r})")
    return version


async def _named(client: AsyncClient, name: str) -> Job | None:
    """The job named ``name`` (not one whose id it is), or None."""
    try:
        job = await client.get_job(name)
    except JobNotFound:
        return None
    return job if job.spec.name == name else None


async def _existing(client: AsyncClient, name: str) -> Job:
    job = await _named(client, name)
    if job is None:
        raise JobNotFound(name)
    return job


async def apply(client: AsyncClient, command: Command, actor: str,
                message_id: str | None = None) -> dict[str, Any]:
    """Apply ``command``; what the reply says besides ``"ok": true``. ``message_id``: the
    broker's identity of the message, which makes a trigger delivered twice run once. The
    command works in its namespace: a client of another one refuses it."""
    if client.namespace is not None and client.namespace != command.namespace:
        raise ValidationError("namespace", f"this consumer works in namespace "
                              f"{client.namespace!r} only (got {command.namespace!r})")
    client = client.scoped(command.namespace)
    name = command.name
    if command.op == "upsert":
        assert command.spec is not None
        for _ in range(2):  # a create that lost a race to another consumer becomes an update
            current = await _named(client, name)
            if current is None:
                try:
                    job = await client.create_job(command.spec, actor=actor,
                                                  version=command.version)
                except StaleVersion:
                    raise
                except Conflict:
                    if await _named(client, name) is None:
                        raise
                    continue
                return {"op": "upsert", "created": True, "job": job_json(job)}
            job = await client.replace_job(current, command.spec, actor=actor,
                                           version=command.version)
            return {"op": "upsert", "created": False, "job": job_json(job)}
        raise Conflict(f"job {name!r} was created and deleted while this command applied")
    if command.op == "delete":
        return await _delete(client, command, actor)
    job = await _existing(client, name)
    if command.op == "pause":
        return {"op": "pause", "job": job_json(await client.pause_job(job.id, actor=actor))}
    if command.op == "resume":
        return {"op": "resume", "job": job_json(await client.resume_job(job.id, actor=actor))}
    return await _trigger(client, job, actor, message_id)


async def _delete(client: AsyncClient, command: Command, actor: str) -> dict[str, Any]:
    """Deleting what is gone is done already (a redelivery, say): answered, not refused."""
    job = await _named(client, command.name)
    if job is None:
        return {"op": "delete", "applied": False, "reason": f"no job named {command.name!r}"}
    await client.delete_job(job.id, actor=actor, version=command.version)
    return {"op": "delete", "job": job_json(job)}


def check_reply_to(reply_to: str | None, source: str, dead: str) -> None:
    """A reply goes neither to the commands nor to their dead letters, nor into tickwork's
    own Redis keyspace (``{tickwork:...}`` streams, ``tickwork:...`` keys)."""
    if reply_to is None:
        return
    if reply_to in (source, dead):
        raise ValidationError("reply_to", f"must not be {reply_to!r}: commands are read there")
    if reply_to.startswith(("{", "tickwork:")):
        raise ValidationError("reply_to", "must not name a key of tickwork's own Redis "
                              "keyspace ({...} or tickwork:...)")


async def _trigger(client: AsyncClient, job: Job, actor: str,
                   message_id: str | None) -> dict[str, Any]:
    """A run now; with ``message_id``, recorded on the trigger's audit entry (one
    transaction with the run), so the same message delivered again finds its run instead."""
    name = job.spec.name
    if message_id is not None:
        earlier = await _triggered_by(client, job, message_id)
        if earlier is not None:
            return {"op": "trigger", "applied": False, "job": job_json(job),
                    "reason": "this message triggered the job already",
                    "run": run_json(earlier, name)}
    run = await client.trigger_job(job.id, actor=actor, details=None if message_id is None
                                   else {"message": message_id})
    return {"op": "trigger", "job": job_json(job), "run": run_json(run, name)}


async def _triggered_by(client: AsyncClient, job: Job, message_id: str) -> Occurrence | None:
    after: int | None = None
    since = client.clock.now() - TRIGGER_MEMORY
    for _ in range(TRIGGER_PAGES):
        page = await client.store.audit_list(AuditListParams(
            job_id=job.id, since=since, after_id=after, limit=MAX_BATCH))
        for entry in page:
            if entry.action is AuditAction.TRIGGER and entry.scheduled_at is not None \
                    and (entry.details or {}).get("message") == message_id:
                return await client.store.occurrence_get(job.id, entry.scheduled_at)
        if len(page) < MAX_BATCH:
            return None
        after = page[-1].id
    return None
