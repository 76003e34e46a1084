"""The client's enqueue: one-off jobs without a name, with an optional dedupe key. A mixin
of ``AsyncClient``; the request is parsed in ``document/enqueue.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tickwork.client.owners import owner_check
from tickwork.client.quotas import CreateGuard, namespace_info
from tickwork.client.references import check_many
from tickwork.clock import Clock
from tickwork.document import BulkParser
from tickwork.document.enqueue import EnqueueRequest, enqueued_run, parse_enqueue
from tickwork.drivers.admin import AdminStore
from tickwork.drivers.base import JobCreateParams, Store
from tickwork.drivers.enqueue import Enqueued, EnqueueItem, JobEnqueueParams
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.errors import ValidationError
from tickwork.models import JobSpec

ENQUEUE_MAX = 1000  # requests one bulk enqueue takes (DESIGN rule 8)


def enqueue_document(kind: str, payload: Mapping[str, Any], *, at: datetime | None = None,
                     queue: str | None = None, retry: Mapping[str, Any] | None = None,
                     dedupe_key: str | None = None,
                     dedupe_window: float | str | timedelta | None = None,
                     **fields: Any) -> dict[str, Any]:
    """The enqueue request these arguments describe (``fields``: any other job field)."""
    doc: dict[str, Any] = {"kind": kind, "payload": payload, **fields}
    if at is not None:
        doc["at"] = at
    if queue is not None:
        doc["queue"] = queue
    if retry is not None:
        doc["retry"] = retry
    if dedupe_key is not None:
        doc["dedupe_key"] = dedupe_key
    if dedupe_window is not None:
        doc["dedupe_window_seconds"] = (dedupe_window.total_seconds()
                                        if isinstance(dedupe_window, timedelta)
                                        else dedupe_window)
    return doc


def _at(index: int | None, exc: ValidationError) -> ValidationError:
    """``exc`` named with the request's index, as ``[3].at`` (as it is for None)."""
    if index is None:
        return exc
    return ValidationError(f"[{index}].{exc.field}" if exc.field else f"[{index}]", exc.reason)


def parse_requests(docs: Iterable[object], now: datetime,
                   check: Callable[[JobSpec], None] | None = None, *,
                   indexed: bool = True) -> list[EnqueueRequest]:
    """Each request parsed and checked (its first run too); a problem is named with its
    index, as ``[3].at``, if ``indexed``."""
    parser = BulkParser()
    found: list[EnqueueRequest] = []
    for index, doc in enumerate(docs):
        if index >= ENQUEUE_MAX:
            raise ValidationError("", f"at most {ENQUEUE_MAX} requests at once")
        try:
            request = parse_enqueue(doc, now=now, parser=parser)
            if check is not None:
                check(request.spec)
            enqueued_run(request.spec, now)
        except ValidationError as exc:
            raise _at(index if indexed else None, exc) from exc
        found.append(request)
    return found


def enqueue_params(requests: Iterable[EnqueueRequest], now: datetime,
                   actor: str | None = None,
                   namespace: str = DEFAULT_NAMESPACE) -> JobEnqueueParams:
    """What the store enqueues for ``requests`` (parsed and checked by parse_requests), into
    ``namespace``. Dedupe keys are kept per namespace: stored as ``namespace:key`` (a
    namespace name has no ':'), so one namespace never finds another's job by its key."""
    items: list[EnqueueItem] = []
    for request in requests:
        next_run = enqueued_run(request.spec, now)
        create = JobCreateParams(spec=request.spec, next_run_at=next_run, now=now, actor=actor,
                                 namespace=namespace)
        until = None if request.dedupe_key is None else now + request.dedupe_window
        key = None if request.dedupe_key is None else f"{namespace}:{request.dedupe_key}"
        items.append(EnqueueItem(create=create, dedupe_key=key, dedupe_until=until))
    return JobEnqueueParams(items=items, now=now)


class EnqueueMethods:
    store: Store
    clock: Clock
    _changed: Callable[[], None]
    _check: Callable[[JobSpec], None]
    _who: Callable[[str | None], str | None]
    namespace: str | None

    if TYPE_CHECKING:  # AsyncClient's property
        @property
        def admin(self) -> AdminStore: ...

    async def enqueue(self, kind: str, payload: Mapping[str, Any], *,
                      at: datetime | None = None, queue: str | None = None,
                      retry: Mapping[str, Any] | None = None, dedupe_key: str | None = None,
                      dedupe_window: float | str | timedelta | None = None,
                      actor: str | None = None, **fields: Any) -> Enqueued:
        """A one-off job of ``kind`` running ``payload`` at ``at`` (default: now), named
        ``<kind>-<uuid7>`` unless ``name`` is given. With ``dedupe_key``, an enqueue within
        ``dedupe_window`` (default 1 hour) of the one that created a job with that key returns
        that job (``created`` False) instead of creating another."""
        doc = enqueue_document(kind, payload, at=at, queue=queue, retry=retry,
                               dedupe_key=dedupe_key, dedupe_window=dedupe_window, **fields)
        return (await self._enqueue([doc], actor, indexed=False))[0]

    async def enqueue_many(self, requests: Iterable[Mapping[str, Any]], *,
                           actor: str | None = None) -> list[Enqueued]:
        """Many enqueue requests (documents as ``POST /api/v1/enqueue`` takes) in one store
        transaction: all or none; errors name the index, as ``[3].at``."""
        return await self._enqueue(requests, actor, indexed=True)

    async def enqueue_request(self, request: Mapping[str, Any], *,
                              actor: str | None = None) -> Enqueued:
        """One enqueue request document; errors name the field."""
        return (await self._enqueue([request], actor, indexed=False))[0]

    async def _enqueue(self, docs: Iterable[object], actor: str | None, *,
                       indexed: bool) -> list[Enqueued]:
        now = self.clock.now()
        space = self.namespace or DEFAULT_NAMESPACE
        guard = CreateGuard(await namespace_info(self.admin, space, now))
        owned = await owner_check(space, self.admin.limit_owners)

        def check(spec: JobSpec) -> None:
            self._check(spec)
            guard.check(spec)  # a key that finds its job counts too: the check comes first
            owned(spec)

        parsed = parse_requests(docs, now, check, indexed=indexed)
        if not parsed:
            return []
        await check_many([r.spec for r in parsed], space, self.admin.secret_names,
                         indexed=indexed)
        done = await self.store.job_enqueue(enqueue_params(parsed, now, self._who(actor),
                                                           space))
        self._changed()
        return done
