"""``--api URL``: the commands' client over the REST API (docs/api.md), for an operator who
has a token but no database credentials.

``RemoteClient`` has the methods of ``AsyncClient`` the commands use and returns the same
model objects, so a command reads the same whichever way it reaches tickwork. The API's
problem details become tickwork's errors: 422 (and 413, 415) a ``ValidationError`` naming the
field, 404 a lookup error with the API's message, 409 a ``Conflict``, 401 and 403 an error
naming ``--token``; the command line turns those into status 2 and one line. An API that
cannot be reached, or answers 503 or 5xx, is status 1.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from tickwork.cli.remote_json import (
    alert_from_json,
    attempt_from_json,
    audit_from_json,
    calendar_from_json,
    change_from_json,
    instant,
    job_from_json,
    namespace_from_json,
    run_from_json,
)
from tickwork.client.calendars import CalendarChange
from tickwork.document import job_document
from tickwork.document.limits import (
    Limits,
    key_limit_from_json,
    limits_body,
    queue_from_json,
)
from tickwork.document.render import when
from tickwork.drivers.admin import QueueInfo
from tickwork.drivers.alerts import MAX_ALERTS, StoredAlert
from tickwork.drivers.base import MAX_BATCH
from tickwork.drivers.calendars import StoredCalendar
from tickwork.drivers.enqueue import Enqueued
from tickwork.drivers.limits import KEEP, KeyLimitInfo, Owner
from tickwork.drivers.namespaces import NamespaceInfo
from tickwork.errors import Conflict, StoreUnavailable, TickworkError, ValidationError
from tickwork.models import (
    Attempt,
    AuditEntry,
    Backfill,
    Job,
    JobSpec,
    Occurrence,
    Overlap,
)
from tickwork.schedules.structured import Fire

PAGE = 500  # the API's largest page of jobs or runs
PREVIEW_PAGE = 100  # the API's most fire times in one preview
TIMEOUT_SECONDS = 30.0
AUDIT_PAGE = 500  # the API's largest page of audit entries


class ApiUnreachable(TickworkError):
    """The API did not answer, or did not answer as tickwork's API does (status 1)."""


class NoSuchThing(TickworkError, LookupError):
    """The API's 404 for a job or run, with its message ("no job 'x'")."""


def api_base(url: str) -> str:
    """``https://host[:port][/prefix]`` with ``/api/v1`` after it; a URL already ending in
    ``/api/v1`` is taken as it is."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("--api", f"must be an http:// or https:// URL (got {url!r})")
    if parts.query or parts.fragment:
        raise ValidationError("--api", "must be a URL without ?query or #fragment")
    path = parts.path.rstrip("/").removesuffix("/api/v1")
    return f"{parts.scheme}://{parts.netloc}{path}/api/v1"


class RemoteClient:
    """The REST API as ``AsyncClient``'s job, run, queue and calendar methods."""

    def __init__(self, url: str, token: str | None, *,
                 transport: httpx.AsyncBaseTransport | None = None,
                 timeout: float = TIMEOUT_SECONDS, namespace: str | None = None) -> None:
        if not token:
            raise ValidationError("--token", "--api needs an API token: pass --token or set "
                                  "TICKWORK_API_TOKEN (tickwork tokens create makes one)")
        self.base = api_base(url)
        self.timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.base, transport=transport, timeout=timeout,
            # a token without a namespace sees the one named; a namespace's token its own
            params={"namespace": namespace} if namespace else None,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                     "User-Agent": "tickwork-cli"})

    async def close(self) -> None:
        await self._http.aclose()

    # --- jobs ---------------------------------------------------------------------------

    async def create_jobs(self, jobs: Iterable[JobSpec]) -> list[Job]:
        docs = [job_document(spec) for spec in jobs]
        if len(docs) > MAX_BATCH:  # the API creates at most this many in one transaction
            raise ValidationError("--json", f"the API creates at most {MAX_BATCH} jobs at "
                                  f"once, all or none (got {len(docs)}); split the input")
        body = await self._call("POST", "/jobs", json=docs)
        return [job_from_json(item) for item in body["items"]]

    async def enqueue_many(self, requests: Sequence[Mapping[str, Any]]) -> list[Enqueued]:
        body = await self._call("POST", "/enqueue/bulk", json=list(requests))
        return [Enqueued(job=job_from_json(i["job"]), created=i["created"])
                for i in body["items"]]

    async def get_job(self, ref: str) -> Job:
        return job_from_json(await self._call("GET", f"/jobs/{_segment(ref)}"))

    async def list_jobs(self, *, queue: str | None = None, tag: str | None = None,
                        kind: str | None = None, name_contains: str | None = None,
                        paused: bool | None = None, after_name: str | None = None,
                        limit: int = 100) -> list[Job]:
        params: dict[str, Any] = {"queue": queue, "tag": tag, "kind": kind,
                                  "name": name_contains,
                                  "paused": None if paused is None else str(paused).lower()}
        # the API's cursor of a job listing is the last name shown (tickwork.api.deps)
        cursor = _cursor([after_name]) if after_name is not None else None
        found: list[Job] = []
        while len(found) < limit:
            page = await self._call("GET", "/jobs", params=_present(
                {**params, "limit": min(PAGE, limit - len(found)), "cursor": cursor}))
            found += [job_from_json(item) for item in page["items"]]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return found

    async def update_job(self, ref: str, changes: Mapping[str, Any]) -> Job:
        return job_from_json(await self._call("PATCH", f"/jobs/{_segment(ref)}",
                                              json=dict(changes)))

    async def pause_job(self, ref: str) -> Job:
        return job_from_json(await self._call("POST", f"/jobs/{_segment(ref)}/pause"))

    async def resume_job(self, ref: str) -> Job:
        return job_from_json(await self._call("POST", f"/jobs/{_segment(ref)}/resume"))

    async def trigger_job(self, ref: str) -> Occurrence:
        return run_from_json(await self._call("POST", f"/jobs/{_segment(ref)}/trigger"))

    async def delete_job(self, ref: str) -> None:
        await self._call("DELETE", f"/jobs/{_segment(ref)}")

    async def preview_fires(self, job: str, n: int = 5,
                            after: datetime | None = None) -> list[Fire]:
        """The next ``n`` fire times and, among them, up to ``n`` that the calendars drop, as
        ``AsyncClient.preview_fires`` gives them; in pages of the API's largest preview."""
        fires: list[Fire] = []
        kept = dropped = 0
        while kept < n:
            count = min(PREVIEW_PAGE, n - kept)
            params = _present({"count": count, "after": when(fires[-1].at if fires else after)})
            body = await self._call("GET", f"/jobs/{_segment(job)}/preview", params=params)
            page = [Fire(at=instant(f["at"]), excluded_by=f.get("excluded_by"),
                         reason=f.get("reason")) for f in body["fires"]]
            for fire in page:
                if fire.excluded_by is None:
                    kept += 1
                    fires.append(fire)
                elif dropped < n:
                    dropped += 1
                    fires.append(fire)
            if sum(f.excluded_by is None for f in page) < count:
                break  # the schedule ends, or nothing more within the preview's horizon
        return fires

    async def backfill(self, ref: str, since: datetime, until: datetime, *,
                       limit: int = MAX_BATCH, overlap: Overlap | str | None = None,
                       dry_run: bool = False) -> Backfill:
        """``AsyncClient.backfill`` through ``POST /jobs/{ref}/backfill``."""
        body = await self._call("POST", f"/jobs/{_segment(ref)}/backfill", json=_present({
            "from": when(since), "to": when(until), "limit": limit,
            "overlap": None if overlap is None else str(overlap), "dry_run": dry_run}))
        return Backfill(
            job_id=body["job_id"], since=instant(body["from"]), until=instant(body["to"]),
            fire_times=[instant(t) for t in body["fire_times"]],
            existing=[instant(t) for t in body["existing"]],
            overlap=Overlap(body["overlap"]), overlap_chosen=body["overlap_source"] != "job",
            dry_run=body["dry_run"], occurrences=[run_from_json(r) for r in body["items"]])

    # --- runs ---------------------------------------------------------------------------

    async def list_runs(self, *, job: str | None = None, states: Sequence[str] = (),
                        since: datetime | None = None, until: datetime | None = None,
                        limit: int = 50, newest_first: bool = True) -> list[Occurrence]:
        params = _present({"job": job, "state": list(states) or None, "since": when(since),
                           "until": when(until), "order": "newest" if newest_first
                           else "oldest"})
        found: list[Occurrence] = []
        cursor = None
        while len(found) < limit:
            page = await self._call("GET", "/runs", params=_present(
                {**params, "limit": min(PAGE, limit - len(found)), "cursor": cursor}))
            found += [run_from_json(item) for item in page["items"]]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return found

    async def get_run(self, job: str,
                      scheduled_at: datetime) -> tuple[Occurrence, list[Attempt]]:
        body = await self._call(
            "GET", f"/jobs/{_segment(job)}/runs/{_segment(str(when(scheduled_at)))}")
        run = run_from_json(body["run"])
        return run, [attempt_from_json(a, run) for a in body["attempts"]]

    async def cancel_run(self, job: str, scheduled_at: datetime) -> Occurrence:
        """The API records the token's name as who cancelled it."""
        return run_from_json(await self._call("POST", f"{_run_path(job, scheduled_at)}/cancel"))

    async def retry_run(self, job: str, scheduled_at: datetime) -> Occurrence:
        """The API records the token's name as who retried it."""
        return run_from_json(await self._call("POST", f"{_run_path(job, scheduled_at)}/retry"))

    # --- the audit trail and alerts -----------------------------------------------------

    async def audit(self, *, job: str | None = None, since: datetime | None = None,
                    after_id: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """Recorded changes, oldest first, in pages; a job's audit has no ``since`` in the
        API, so it is applied here."""
        path = f"/jobs/{_segment(job)}/audit" if job else "/audit"
        cursor = _cursor([str(after_id)]) if after_id is not None else None
        found: list[AuditEntry] = []
        while len(found) < limit:
            page = await self._call("GET", path, params=_present({
                "since": None if job else when(since), "cursor": cursor,
                "limit": min(AUDIT_PAGE, limit - len(found))}))
            found += [e for e in map(audit_from_json, page["items"])
                      if since is None or e.at >= since]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return found[:limit]

    async def list_alerts(self, *, job: str | None = None, state: str | None = None,
                          limit: int = 50) -> list[StoredAlert]:
        body = await self._call("GET", "/alerts", params=_present(
            {"job": job, "state": state, "limit": min(limit, MAX_ALERTS)}))
        return [alert_from_json(a) for a in body["items"]]

    # --- queues -------------------------------------------------------------------------

    async def list_queues(self) -> list[QueueInfo]:
        return [queue_from_json(q) for q in (await self._call("GET", "/queues"))["items"]]

    async def pause_queue(self, name: str) -> QueueInfo:
        return queue_from_json(await self._call("POST", f"/queues/{_segment(name)}/pause"))

    async def resume_queue(self, name: str) -> QueueInfo:
        return queue_from_json(await self._call("POST", f"/queues/{_segment(name)}/resume"))

    async def set_queue_limits(self, name: str, limits: Limits, *,
                               namespace: Owner = KEEP) -> QueueInfo:
        return queue_from_json(await self._call(
            "PUT", f"/queues/{_segment(name)}/limits", json=limits_body(limits, namespace)))

    async def list_limits(self) -> list[KeyLimitInfo]:
        return [key_limit_from_json(k) for k in (await self._call("GET", "/limits"))["items"]]

    async def set_limit(self, key: str, limits: Limits, *,
                        namespace: Owner = KEEP) -> KeyLimitInfo:
        body = {k: v for k, v in limits_body(limits, namespace).items() if k != "max_running"}
        return key_limit_from_json(await self._call("PUT", f"/limits/{_segment(key)}",
                                                    json=body))

    async def delete_limit(self, key: str) -> None:
        await self._call("DELETE", f"/limits/{_segment(key)}")

    # --- calendars ----------------------------------------------------------------------

    async def list_calendars(self) -> list[StoredCalendar]:
        return [calendar_from_json(c)
                for c in (await self._call("GET", "/calendars"))["items"]]

    async def get_calendar(self, name: str) -> StoredCalendar:
        return calendar_from_json(await self._call("GET", f"/calendars/{_segment(name)}"))

    async def calendar_jobs(self, name: str, limit: int = MAX_BATCH) -> list[Job]:
        """The jobs that name the calendar (the API lists up to 100 names)."""
        body = await self._call("GET", f"/calendars/{_segment(name)}")
        return [await self.get_job(job) for job in body.get("jobs", [])[:limit]]

    async def create_calendar(self, doc: Mapping[str, Any]) -> StoredCalendar:
        return calendar_from_json(await self._call("POST", "/calendars", json=dict(doc)))

    async def update_calendar(self, name: str, doc: Mapping[str, Any]) -> CalendarChange:
        return change_from_json(await self._call("PUT", f"/calendars/{_segment(name)}",
                                                 json=dict(doc)))

    async def delete_calendar(self, name: str) -> None:
        await self._call("DELETE", f"/calendars/{_segment(name)}")

    async def import_calendar(self, name: str, ics: str, *, description: str | None = None,
                              replace: bool = False, source: str = "ics") -> CalendarChange:
        """The .ics text is sent whole; the server reads it (its warnings name no file)."""
        return change_from_json(await self._call("POST", "/calendars/import", json=_present(
            {"name": name, "ics": ics, "description": description, "replace": replace})))

    # --- the HTTP edge ------------------------------------------------------------------

    # --- namespaces -----------------------------------------------------------------------

    async def list_namespaces(self) -> list[NamespaceInfo]:
        body = await self._call("GET", "/namespaces")
        return [namespace_from_json(item) for item in body["items"]]

    async def set_quotas(self, name: str, changes: Mapping[str, object]) -> NamespaceInfo:
        return namespace_from_json(await self._call("PATCH", f"/namespaces/{_segment(name)}",
                                                    json=dict(changes)))

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise ApiUnreachable(f"the API at {self.base} did not answer within "
                                 f"{self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise ApiUnreachable(f"cannot reach the API at {self.base}: {reason}") from None
        if response.status_code == 204:
            return None
        body = _json(response)
        if response.is_success and body is not None:
            return body
        raise self._error(response, body)

    def _error(self, response: httpx.Response,  # noqa: PLR0911  (a branch per status)
               body: Any) -> TickworkError:
        status = response.status_code
        problem = body if isinstance(body, dict) and "status" in body else None
        kind = str(problem.get("type", "")) if problem is not None else ""
        if problem is None or (status == 404 and not kind.endswith(":not-found")):
            moved = response.headers.get("location") if response.is_redirect else None
            return ApiUnreachable(  # not a route of the API: another server, another path
                f"{self.base} did not answer as tickwork's API does ({method_path(response)}: "
                f"{status} {response.reason_phrase or ''}".rstrip()
                + (f"; it points to {moved}" if moved else "") + ")")
        detail = str(problem.get("detail", ""))
        errors = problem.get("errors") or []
        if status in (413, 415, 422):
            if errors and isinstance(errors[0], dict):
                return ValidationError(str(errors[0].get("field", "")),
                                       str(errors[0].get("message", detail)))
            return ValidationError("", detail)
        if status == 401:
            return ValidationError("--token", f"the API at {self.base} refused the token: "
                                   f"{detail}")
        if status == 403:
            return ValidationError("--token", detail)
        if status == 404:
            return NoSuchThing(detail)
        if status == 409:
            return Conflict(detail)
        if status == 429:
            wait = response.headers.get("retry-after")
            return TickworkError(detail + (f" (retry after {wait} s)" if wait else ""))
        if status == 503:
            return StoreUnavailable(f"the API at {self.base} cannot reach its store: {detail}")
        return ApiUnreachable(f"the API at {self.base} answered {method_path(response)} with "
                              f"{status}: {detail}")


def method_path(response: httpx.Response) -> str:
    return f"{response.request.method} {response.request.url.path}"


def _json(response: httpx.Response) -> Any:
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _run_path(job: str, scheduled_at: datetime) -> str:
    return f"/jobs/{_segment(job)}/runs/{_segment(str(when(scheduled_at)))}"


def _segment(text: str) -> str:
    return quote(text, safe="")


def _present(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _cursor(value: list[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


