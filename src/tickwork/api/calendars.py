"""/api/v1/calendars: named calendars that schedules exclude or are restricted to. Reading
takes a read token, changing a write token (as jobs). Thin handlers over ``AsyncClient``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from tickwork.api.auth import READ, SHARED, WRITE
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep
from tickwork.api.errors import problems
from tickwork.api.schemas import CALENDAR_BODY, CALENDAR_IMPORT_BODY, CALENDAR_UPDATE_BODY
from tickwork.client.calendars import CalendarChange
from tickwork.document.render import calendar_json
from tickwork.errors import ValidationError

router = APIRouter(prefix="/api/v1/calendars", tags=["calendars"])
Body = Annotated[Any, Depends(json_body)]
JOBS_SHOWN = 100
READ_ERRORS = problems(401, 403, 404, 422)
WRITE_ERRORS = problems(401, 403, 404, 409, 413, 415, 422)


def change_json(change: CalendarChange) -> dict[str, Any]:
    return {**calendar_json(change.calendar), "replanned_jobs": change.jobs,
            "removed_runs": change.removed, "warnings": list(change.warnings)}


@router.get("", dependencies=[READ], responses=problems(401, 403),
            summary="Every calendar, by name")
async def list_calendars(client: ClientDep) -> dict[str, Any]:
    return {"items": [calendar_json(c) for c in await client.list_calendars()]}


@router.post("", status_code=201, dependencies=[WRITE, SHARED], openapi_extra=CALENDAR_BODY,
             responses=WRITE_ERRORS, summary="Create a calendar")
async def create_calendar(client: ClientDep, body: Body) -> dict[str, Any]:
    return calendar_json(await client.create_calendar(_object(body)))


@router.post("/import", status_code=201, dependencies=[WRITE, SHARED],
             openapi_extra=CALENDAR_IMPORT_BODY, responses=WRITE_ERRORS,
             summary="Create (or with replace, replace) a calendar from an .ics file's text")
async def import_calendar(client: ClientDep, body: Body) -> dict[str, Any]:
    fields = _object(body)
    for key in fields:
        if key not in ("name", "ics", "description", "replace"):
            raise ValidationError("", f"unknown field {key!r}")
    for key in ("name", "ics"):
        if not isinstance(fields.get(key), str):
            raise ValidationError(key, "is required (a string)")
    description = fields.get("description")
    if description is not None and not isinstance(description, str):
        raise ValidationError("description", "must be a string")
    replace = fields.get("replace", False)
    if not isinstance(replace, bool):
        raise ValidationError("replace", "must be true or false")
    return change_json(await client.import_calendar(
        fields["name"], fields["ics"], description=description, replace=replace))


@router.get("/{name}", dependencies=[READ], responses=READ_ERRORS,
            summary="One calendar, with the jobs that name it")
async def get_calendar(client: ClientDep, name: str) -> dict[str, Any]:
    calendar = await client.get_calendar(name)
    jobs = await client.calendar_jobs(name, JOBS_SHOWN)
    return {**calendar_json(calendar), "jobs": sorted(j.spec.name for j in jobs)}


@router.put("/{name}", dependencies=[WRITE, SHARED], openapi_extra=CALENDAR_UPDATE_BODY,
            responses=WRITE_ERRORS,
            summary="Replace a calendar; the jobs that name it are re-planned")
async def update_calendar(client: ClientDep, name: str, body: Body) -> dict[str, Any]:
    return change_json(await client.update_calendar(name, _object(body)))


@router.delete("/{name}", status_code=204, dependencies=[WRITE, SHARED], responses=WRITE_ERRORS,
               summary="Delete a calendar; refused (409) while a job names it")
async def delete_calendar(client: ClientDep, name: str) -> Response:
    await client.delete_calendar(name)
    return Response(status_code=204)


def _object(body: object) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ValidationError("", "send a JSON object")
    return body
