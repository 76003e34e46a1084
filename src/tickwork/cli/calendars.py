"""``tickwork calendars list|show|create|update|delete|import``: named calendars that job
schedules exclude (``"exclude": ["holidays"]``) or are restricted to (``"only": [...]``).

A definition comes from ``--json FILE`` (a calendar document; ``-`` for standard input) and
the flags ``--date``, ``--range``, ``--yearly`` and ``--weekly``, which add to it. ``update``
replaces the whole definition and re-plans the jobs that name the calendar.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from tickwork.cli.common import open_client, read_documents
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.client.calendars import CalendarChange
from tickwork.document.render import calendar_json
from tickwork.errors import ValidationError
from tickwork.schedules.calendars import NAME

F = TypeVar("F", bound=Callable[..., Any])


@click.group(cls=Group, epilog=examples(
    "tickwork calendars import holidays.ics --name holidays",
    "tickwork calendars create weekend --weekly Sat-Sun",
    "tickwork calendars show holidays"))
def calendars() -> None:
    """Named calendars that schedules exclude or are restricted to.

    A schedule names them with "exclude": ["holidays"] or "only": [...]; see
    docs/schedules.md. Every command works on a database (--database) or, with --api and a
    token, through the REST API.
    """


NAME_ARG = click.argument("name", metavar="NAME")


def definition_options(command: F) -> F:
    """The options of ``create`` and ``update``: a document and the flags that add to it."""
    for option in reversed((
        click.option("--json", "source", metavar="FILE",
                     help="a calendar document (a file, or - for standard input)"),
        click.option("--description", metavar="TEXT", help="what the calendar is for"),
        click.option("--date", "dates", multiple=True, metavar="YYYY-MM-DD",
                     help="this date (repeatable)"),
        click.option("--range", "ranges", multiple=True, metavar="FROM..TO",
                     help="dates from FROM to TO, both included (repeatable)"),
        click.option("--yearly", multiple=True, metavar="MM-DD",
                     help="this day every year (repeatable)"),
        click.option("--weekly", multiple=True, metavar="WINDOW",
                     help="'Sat-Sun', 'Sun' or 'Fri 18:00 - Mon 06:00' (repeatable)"),
    )):
        command = option(command)
    return command


def _document(name: str, *, source: str | None, description: str | None, dates: Sequence[str],
              ranges: Sequence[str], yearly: Sequence[str],
              weekly: Sequence[str]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if source:
        docs = read_documents(source)
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise ValidationError("--json", "expected one calendar document (a JSON object)")
        doc = dict(docs[0])
    doc.setdefault("name", name)
    if description is not None:
        doc["description"] = description
    days: list[Any] = list(doc.get("dates", [])) if isinstance(doc.get("dates", []),
                                                                list) else []
    days += dates
    for text in ranges:
        first, sep, last = text.partition("..")
        if not sep:
            raise ValidationError("--range", f"expected FROM..TO, such as "
                                  f"2030-08-01..2030-08-15 (got {text!r})")
        days.append({"from": first, "to": last})
    for key, extra in (("dates", days), ("yearly", list(yearly)), ("weekly", list(weekly))):
        if key == "dates" or extra:
            current = doc.get(key, [])
            doc[key] = extra if key == "dates" else [
                *(current if isinstance(current, list) else []), *extra]
    return doc


def _describe(change: CalendarChange, verb: str) -> str:
    c = change.calendar
    text = f"{verb} calendar {c.name} (version {c.version})"
    if verb == "updated" or change.jobs:
        text += f": re-planned {change.jobs} job(s), removed {change.removed} waiting run(s)"
    return text


@calendars.command("list", epilog=examples("tickwork calendars list",
                                           "tickwork calendars list --json"))
@json_flag()
@store_options(api=True)
async def list_calendars(target: Target, as_json: bool) -> int:
    """List calendars: how many dates and yearly dates, weekly windows, version."""
    client = await open_client(target)
    try:
        found = await client.list_calendars()
    finally:
        await client.close()
    if as_json:
        print_json([calendar_json(c) for c in found])
        return 0
    print_table(["NAME", "DATES", "YEARLY", "WEEKLY", "VERSION", "DESCRIPTION"], [
        (c.name, len(c.document.get("dates", [])), len(c.document.get("yearly", [])),
         ", ".join(c.document.get("weekly", [])), c.version, c.document.get("description", ""))
        for c in found])
    return 0


@calendars.command("show", epilog=examples("tickwork calendars show holidays",
                                           "tickwork calendars show holidays --json"))
@NAME_ARG
@json_flag()
@store_options(api=True)
async def show_calendar(target: Target, name: str, as_json: bool) -> int:
    """Show a calendar's days and windows and the jobs that name it."""
    client = await open_client(target)
    try:
        calendar = await client.get_calendar(name)
        jobs = sorted(j.spec.name for j in await client.calendar_jobs(name))
    finally:
        await client.close()
    body = {**calendar_json(calendar), "jobs": jobs}
    if as_json:
        print_json(body)
        return 0
    rows: list[tuple[str, object]] = [("name", calendar.name),
                                      ("description", body.get("description", "")),
                                      ("version", calendar.version),
                                      ("updated", body["updated_at"])]
    for item in body.get("dates", []):
        rows.append(("date", item if isinstance(item, str) else
                     f"{item['from']} to {item['to']}"))
    for item in body.get("yearly", []):
        rows.append(("yearly", item if isinstance(item, str) else " ".join(
            f"{k} {v}" for k, v in item.items())))
    rows.extend(("weekly", window) for window in body.get("weekly", []))
    rows.append(("jobs", ", ".join(jobs) or "-"))
    print_table(["FIELD", "VALUE"], rows)
    return 0


@calendars.command("create", epilog=examples(
    "tickwork calendars create weekend --weekly Sat-Sun",
    "tickwork calendars create shutdown --range 2030-12-24..2031-01-01 --yearly 05-01",
    "tickwork calendars create holidays --json holidays.json"))
@NAME_ARG
@definition_options
@store_options(api=True)
async def create_calendar(target: Target, name: str, **definition: Any) -> int:
    """Create calendar NAME from a calendar document and the flags, which add to it."""
    doc = _document(name, **definition)
    client = await open_client(target, create=True)
    try:
        calendar = await client.create_calendar(doc)
    finally:
        await client.close()
    print(_describe(CalendarChange(calendar=calendar), "created"))
    return 0


@calendars.command("update", epilog=examples(
    "tickwork calendars update weekend --weekly Sat-Sun --date 2030-12-24",
    "tickwork calendars update holidays --json holidays.json"))
@NAME_ARG
@definition_options
@store_options(api=True)
async def update_calendar(target: Target, name: str, **definition: Any) -> int:
    """Replace calendar NAME's definition; the jobs that name it are re-planned.

    Their waiting runs now excluded are removed, the newly allowed ones planned.
    """
    doc = _document(name, **definition)
    client = await open_client(target)
    try:
        change = await client.update_calendar(name, doc)
    finally:
        await client.close()
    print(_describe(change, "updated"))
    return 0


def _read_ics(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ValidationError("FILE", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ValidationError("FILE", f"{path} is not UTF-8 text") from None


@calendars.command("import", epilog=examples(
    "tickwork calendars import holidays.ics",
    "tickwork calendars import de-holidays-2031.ics --name holidays --replace"))
@click.argument("file", metavar="FILE.ics")
@click.option("--name", "given", metavar="NAME",
              help="the calendar's name (default: the file's name)")
@click.option("--description", metavar="TEXT", help="what the calendar is for")
@click.option("--replace", is_flag=True,
              help="replace the calendar of that name if there is one")
@store_options(api=True)
async def import_calendar(target: Target, file: str, given: str | None,
                          description: str | None, replace: bool) -> int:
    """Create a calendar from an iCalendar (.ics) file.

    All-day events and yearly recurrences are read; events it cannot read are named in
    warnings on standard error.
    """
    path = Path(file)
    name = given or path.stem
    if given is None and not NAME.fullmatch(name):
        raise ValidationError("--name", f"the file's name {name!r} is not a calendar name; "
                              "give one with --name")
    text = _read_ics(path)  # a small file, read before the client opens
    client = await open_client(target, create=True)
    try:
        change = await client.import_calendar(name, text, description=description,
                                              replace=replace, source=file)
    finally:
        await client.close()
    for warning in change.warnings:
        sys.stderr.write(f"tickwork: warning: {warning}\n")
    doc = change.calendar.document
    verb = "updated" if change.calendar.version > 1 else "created"
    print(f"{_describe(change, verb)} from {file}: {len(doc.get('dates', []))} date(s), "
          f"{len(doc.get('yearly', []))} yearly date(s)")
    return 0


@calendars.command("delete", epilog=examples("tickwork calendars delete weekend"))
@NAME_ARG
@store_options(api=True)
async def delete_calendar(target: Target, name: str) -> int:
    """Delete a calendar; refused while a job names it (the jobs are named)."""
    client = await open_client(target)
    try:
        await client.delete_calendar(name)
    finally:
        await client.close()
    print(f"deleted calendar {name}")
    return 0
