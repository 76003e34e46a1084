"""``tickwork calendars list|show|create|update|delete|import``: named calendars that job
schedules exclude (``"exclude": ["holidays"]``) or are restricted to (``"only": [...]``).

A definition comes from ``--json FILE`` (a calendar document; ``-`` for standard input) and
the flags ``--date``, ``--range``, ``--yearly`` and ``--weekly``, which add to it. ``update``
replaces the whole definition and re-plans the jobs that name the calendar.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tickwork.cli.common import add_store_options, open_client, read_documents
from tickwork.cli.output import print_json, print_table
from tickwork.client.calendars import CalendarChange
from tickwork.document.render import calendar_json
from tickwork.errors import ValidationError
from tickwork.schedules.calendars import NAME


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    calendars = commands.add_parser("calendars", help="named calendars schedules exclude or "
                                    "are restricted to")
    sub = calendars.add_subparsers(dest="calendars_command", required=True, metavar="ACTION")

    listing = sub.add_parser("list", help="list calendars")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=list_calendars)

    show = sub.add_parser("show", help="show a calendar and the jobs that name it")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=show_calendar)

    for action, handler, text in (
        ("create", create_calendar, "create a calendar"),
        ("update", update_calendar, "replace a calendar's definition (its jobs are re-planned)"),
    ):
        parser = sub.add_parser(action, help=text)
        parser.add_argument("name")
        parser.add_argument("--json", metavar="FILE", dest="source",
                            help="a calendar document (a file, or - for standard input)")
        parser.add_argument("--description")
        parser.add_argument("--date", action="append", default=[], metavar="YYYY-MM-DD")
        parser.add_argument("--range", action="append", default=[], metavar="FROM..TO",
                            help="dates from FROM to TO, both included")
        parser.add_argument("--yearly", action="append", default=[], metavar="MM-DD",
                            help="this day every year")
        parser.add_argument("--weekly", action="append", default=[], metavar="WINDOW",
                            help="'Sat-Sun', 'Sun' or 'Fri 18:00 - Mon 06:00'")
        parser.set_defaults(handler=handler)

    imp = sub.add_parser("import", help="create a calendar from an iCalendar (.ics) file")
    imp.add_argument("file", metavar="FILE.ics")
    imp.add_argument("--name", help="the calendar's name (default: the file's name)")
    imp.add_argument("--description")
    imp.add_argument("--replace", action="store_true",
                     help="replace the calendar of that name if there is one")
    imp.set_defaults(handler=import_calendar)

    delete = sub.add_parser("delete", help="delete a calendar no job names")
    delete.add_argument("name")
    delete.set_defaults(handler=delete_calendar)

    for parser in sub.choices.values():
        add_store_options(parser)


def _document(args: argparse.Namespace) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if args.source:
        docs = read_documents(args.source)
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise ValidationError("--json", "expected one calendar document (a JSON object)")
        doc = dict(docs[0])
    doc.setdefault("name", args.name)
    if args.description is not None:
        doc["description"] = args.description
    dates = list(doc.get("dates", [])) if isinstance(doc.get("dates", []), list) else []
    dates += args.date
    for text in args.range:
        first, sep, last = text.partition("..")
        if not sep:
            raise ValidationError("--range", f"expected FROM..TO, such as "
                                  f"2030-08-01..2030-08-15 (got {text!r})")
        dates.append({"from": first, "to": last})
    for key, extra in (("dates", dates), ("yearly", args.yearly), ("weekly", args.weekly)):
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


async def list_calendars(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        found = await client.list_calendars()
    finally:
        await client.close()
    if args.json:
        print_json([calendar_json(c) for c in found])
        return 0
    print_table(["NAME", "DATES", "YEARLY", "WEEKLY", "VERSION", "DESCRIPTION"], [
        (c.name, len(c.document.get("dates", [])), len(c.document.get("yearly", [])),
         ", ".join(c.document.get("weekly", [])), c.version, c.document.get("description", ""))
        for c in found])
    return 0


async def show_calendar(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        calendar = await client.get_calendar(args.name)
        jobs = sorted(j.spec.name for j in await client.calendar_jobs(args.name))
    finally:
        await client.close()
    body = {**calendar_json(calendar), "jobs": jobs}
    if args.json:
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


async def create_calendar(args: argparse.Namespace) -> int:
    doc = _document(args)
    client = await open_client(args, create=True)
    try:
        calendar = await client.create_calendar(doc)
    finally:
        await client.close()
    print(_describe(CalendarChange(calendar=calendar), "created"))
    return 0


async def update_calendar(args: argparse.Namespace) -> int:
    doc = _document(args)
    client = await open_client(args)
    try:
        change = await client.update_calendar(args.name, doc)
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


async def import_calendar(args: argparse.Namespace) -> int:
    path = Path(args.file)
    name = args.name or path.stem
    if args.name is None and not NAME.fullmatch(name):
        raise ValidationError("--name", f"the file's name {name!r} is not a calendar name; "
                              "give one with --name")
    text = _read_ics(path)  # a small file, read before the client opens
    client = await open_client(args, create=True)
    try:
        change = await client.import_calendar(name, text, description=args.description,
                                              replace=args.replace, source=args.file)
    finally:
        await client.close()
    for warning in change.warnings:
        sys.stderr.write(f"tickwork: warning: {warning}\n")
    doc = change.calendar.document
    verb = "updated" if change.calendar.version > 1 else "created"
    print(f"{_describe(change, verb)} from {args.file}: {len(doc.get('dates', []))} date(s), "
          f"{len(doc.get('yearly', []))} yearly date(s)")
    return 0


async def delete_calendar(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        await client.delete_calendar(args.name)
    finally:
        await client.close()
    print(f"deleted calendar {args.name}")
    return 0
