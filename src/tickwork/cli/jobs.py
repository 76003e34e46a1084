"""``tickwork jobs create|list|show|update|pause|resume|trigger|delete``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tickwork.cli.common import (
    add_redis_option,
    add_store_options,
    check_limit,
    open_client,
    read_documents,
)
from tickwork.cli.output import print_json, print_table
from tickwork.document import parse_job_document
from tickwork.document.render import fire_json, job_json, run_json, when
from tickwork.errors import ValidationError
from tickwork.models import JobSpec
from tickwork.schedules import compile_schedule


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    jobs = commands.add_parser("jobs", help="create and manage jobs")
    sub = jobs.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")

    create = sub.add_parser("create", help="create jobs from JSON (a document, an array, NDJSON)")
    create.add_argument("--json", required=True, metavar="FILE", dest="source",
                        help="a file, or - for standard input")
    create.add_argument("--quiet", action="store_true", help="print nothing on success")
    create.set_defaults(handler=create_jobs)

    listing = sub.add_parser("list", help="list jobs")
    listing.add_argument("--queue")
    listing.add_argument("--tag")
    listing.add_argument("--kind")
    listing.add_argument("--search", metavar="TEXT", help="name contains TEXT")
    state = listing.add_mutually_exclusive_group()
    state.add_argument("--paused", action="store_true", default=None)
    state.add_argument("--active", action="store_false", dest="paused")
    listing.add_argument("--after", metavar="NAME", help="start after this name (paging)")
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=list_jobs)

    show = sub.add_parser("show", help="show one job and its next fire times")
    show.add_argument("job", help="job id or name")
    show.add_argument("--next", type=int, default=5, metavar="N", help="fire times to preview")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=show_job)

    update = sub.add_parser("update", help="change fields of a job (others keep their values)")
    update.add_argument("job", help="job id or name")
    update.add_argument("--json", required=True, metavar="FILE", dest="source")
    update.set_defaults(handler=update_job)

    for name, handler, text in (
        ("pause", pause_job, "stop a job's future runs"),
        ("resume", resume_job, "resume a paused job from now on"),
        ("trigger", trigger_job, "run a job once, now"),
        ("delete", delete_job, "delete a job (its history stays)"),
    ):
        action = sub.add_parser(name, help=text)
        action.add_argument("job", help="job id or name")
        action.add_argument("--json", action="store_true", help="print JSON")
        action.set_defaults(handler=handler)

    for parser in sub.choices.values():
        add_store_options(parser)
    add_redis_option(sub.choices["trigger"])  # a trigger goes straight into Redis' due set


async def create_jobs(args: argparse.Namespace) -> int:
    docs = read_documents(args.source)
    specs: list[JobSpec] = []
    warnings: list[str] = []
    for index, doc in enumerate(docs):
        try:
            parsed = parse_job_document(doc)
        except ValidationError as exc:
            where = f"[{index}]." if len(docs) > 1 else ""
            raise ValidationError(f"{where}{exc.field}", exc.reason) from None
        warnings.extend(f"{parsed.spec.name}: {w}" for w in parsed.warnings)
        specs.append(parsed.spec)
    client = await open_client(args, create=True)
    try:
        created = await client.create_jobs(specs)
    finally:
        await client.close()
    for warning in warnings:
        sys.stderr.write(f"tickwork: warning: {warning}\n")
    if not args.quiet:
        if len(created) == 1:
            job = created[0]
            print(f"created job {job.spec.name} ({job.id}), next run {when(job.next_run_at)}")
        else:
            print(f"created {len(created)} jobs")
    return 0


async def list_jobs(args: argparse.Namespace) -> int:
    check_limit(args.limit)
    client = await open_client(args)
    try:
        found = await client.list_jobs(queue=args.queue, tag=args.tag, kind=args.kind,
                                       name_contains=args.search, paused=args.paused,
                                       after_name=args.after, limit=args.limit)
    finally:
        await client.close()
    if args.json:
        print_json([job_json(j) for j in found])
        return 0
    print_table(["NAME", "KIND", "SCHEDULE", "QUEUE", "PAUSED", "NEXT RUN", "ID"], [
        (j.spec.name, j.spec.kind, _schedule_text(j.spec.schedule), j.spec.queue,
         "yes" if j.spec.paused else "", when(j.next_run_at) or "-", j.id) for j in found])
    return 0


async def show_job(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        job = await client.get_job(args.job)
        fires = await client.preview_fires(job.id, max(0, min(args.next, 1000)))
    finally:
        await client.close()
    upcoming = [f.at for f in fires if f.excluded_by is None]
    if args.json:
        print_json({**job_json(job), "next_fire_times": [when(t) for t in upcoming],
                    "excluded_fire_times": [fire_json(f) for f in fires if f.excluded_by],
                    "description": compile_schedule(job.spec.schedule).describe()})
        return 0
    print_table(["FIELD", "VALUE"], [
        ("name", job.spec.name), ("id", job.id), ("kind", job.spec.kind),
        ("schedule", compile_schedule(job.spec.schedule).describe()),
        ("queue", job.spec.queue), ("priority", job.spec.priority),
        ("paused", job.spec.paused), ("next run", when(job.next_run_at) or "-"),
        ("tags", ", ".join(job.spec.tags)),
    ])
    if fires:
        print("\nnext fire times:")
        for f in fires:  # the ones calendars drop too, each with why
            print(f"  {when(f.at)}" if f.excluded_by is None else
                  f"  {when(f.at)}  skipped: {f.reason}")
    return 0


async def update_job(args: argparse.Namespace) -> int:
    docs = read_documents(args.source)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ValidationError("--json", "update takes one JSON object with the fields to change")
    client = await open_client(args)
    try:
        job = await client.update_job(args.job, docs[0])
    finally:
        await client.close()
    print(f"updated job {job.spec.name}, next run {when(job.next_run_at) or '-'}")
    return 0


async def pause_job(args: argparse.Namespace) -> int:
    return await _act(args, "pause")


async def resume_job(args: argparse.Namespace) -> int:
    return await _act(args, "resume")


async def delete_job(args: argparse.Namespace) -> int:
    return await _act(args, "delete")


async def trigger_job(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        occ = await client.trigger_job(args.job)
    finally:
        await client.close()
    if args.json:
        print_json(run_json(occ))
    else:
        print(f"triggered: run {occ.idempotency_key} is due now")
    return 0


async def _act(args: argparse.Namespace, action: str) -> int:
    client = await open_client(args)
    try:
        job = await client.get_job(args.job)
        result: Any = None
        if action == "pause":
            result = await client.pause_job(job.id)
        elif action == "resume":
            result = await client.resume_job(job.id)
        else:
            await client.delete_job(job.id)
    finally:
        await client.close()
    if args.json and result is not None:
        print_json(job_json(result))
    else:
        print(f"{action}d job {job.spec.name}")
    return 0


def _schedule_text(schedule: Any) -> str:
    if schedule.type == "cron":
        zone = "" if schedule.timezone == "UTC" else f" {schedule.timezone}"
        return f"cron {schedule.cron}{zone}"
    if schedule.type == "every":
        return f"every {schedule.every_seconds:g}s"
    if schedule.type in ("weekly", "monthly"):
        return f"{schedule.type} {schedule.rule}"
    return f"at {when(schedule.at)}"
