"""``tickwork jobs create|list|show|update|pause|resume|trigger|delete|audit`` (and
``backfill``, from cli/backfill.py; ``sync``, from cli/sync.py)."""

from __future__ import annotations

import sys
from typing import Any

import click

from tickwork.cli.audit import AFTER_HELP, LIMIT_HELP, print_audit
from tickwork.cli.backfill import backfill
from tickwork.cli.common import check_limit, open_client, read_documents
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.cli.sync import sync_jobs
from tickwork.document import parse_job_document
from tickwork.document.render import fire_json, job_json, run_json, when
from tickwork.errors import ValidationError
from tickwork.models import Job, JobSpec
from tickwork.schedules import compile_schedule, for_job
from tickwork.schedules.structured import Fire


@click.group(cls=Group, epilog=examples(
    "tickwork jobs create --json jobs.ndjson",
    "tickwork jobs list --tag reports --json",
    "tickwork jobs trigger nightly-report",
    "tickwork jobs list --api https://tickwork.example.org   # with TICKWORK_API_TOKEN set"))
def jobs() -> None:
    """Create and manage jobs: what runs, when, and how.

    JOB is a job's id or its name. Every command works on a database (--database) or,
    with --api and a token, through the REST API of a running tickwork.
    """


JOB = click.argument("job", metavar="JOB")
jobs.add_command(backfill)
jobs.add_command(sync_jobs)


@jobs.command("create", epilog=examples(
    "tickwork jobs create --json job.json",
    "tickwork jobs create --json jobs.ndjson --quiet",
    "echo '{\"name\": \"ping\", \"schedule\": {\"every\": \"1m\"}, \"kind\": \"http\", "
    "\"payload\": {\"url\": \"https://example.org/health\"}}' | tickwork jobs create --json -"))
@click.option("--json", "source", required=True, metavar="FILE",
              help="a JSON job document, a JSON array of them, or one per line (NDJSON); "
              "- reads standard input")
@click.option("--quiet", is_flag=True, help="print nothing on success")
@store_options(api=True)
async def create_jobs(target: Target, source: str, quiet: bool) -> int:
    """Create jobs from JSON, all in one transaction or none.

    Warnings (for example, retries that can outlast the interval) go to standard error.
    """
    docs = read_documents(source)
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
    client = await open_client(target, create=True)
    try:
        created = await client.create_jobs(specs)
    finally:
        await client.close()
    for warning in warnings:
        sys.stderr.write(f"tickwork: warning: {warning}\n")
    if not quiet:
        if len(created) == 1:
            job = created[0]
            print(f"created job {job.spec.name} ({job.id}), next run {when(job.next_run_at)}")
        else:
            print(f"created {len(created)} jobs")
    return 0


@jobs.command("list", epilog=examples(
    "tickwork jobs list",
    "tickwork jobs list --queue mail --paused --json",
    "tickwork jobs list --limit 100 --after nightly-report   # the next page"))
@click.option("--queue", metavar="QUEUE", help="only jobs of this queue")
@click.option("--tag", metavar="TAG", help="only jobs with this tag")
@click.option("--kind", metavar="KIND", help="only jobs of this kind (http, slack, email, "
              "shell, python)")
@click.option("--search", metavar="TEXT", help="only jobs whose name contains TEXT (any case)")
@click.option("--paused/--active", default=None, help="only paused jobs / only active ones")
@click.option("--after", metavar="NAME", help="start after this name (the next page)")
@click.option("--limit", type=int, default=100, show_default=True, metavar="N",
              help="how many jobs to list (any number from 1)")
@json_flag()
@store_options(api=True)
async def list_jobs(*, target: Target, queue: str | None, tag: str | None, kind: str | None,
                    search: str | None, paused: bool | None, after: str | None, limit: int,
                    as_json: bool) -> int:
    """List jobs by name: their kind, schedule, queue and next run."""
    check_limit(limit)
    client = await open_client(target)
    try:
        found = await client.list_jobs(queue=queue, tag=tag, kind=kind, name_contains=search,
                                       paused=paused, after_name=after, limit=limit)
    finally:
        await client.close()
    if as_json:
        print_json([job_json(j) for j in found])
        return 0
    print_table(["NAME", "KIND", "SCHEDULE", "QUEUE", "PAUSED", "NEXT RUN", "ID"], [
        (j.spec.name, j.spec.kind, _schedule_text(j.spec.schedule), j.spec.queue,
         "yes" if j.spec.paused else "", when(j.next_run_at) or "-", j.id) for j in found])
    return 0


@jobs.command("show", epilog=examples(
    "tickwork jobs show nightly-report",
    "tickwork jobs show nightly-report --next 20 --json"))
@JOB
@click.option("--next", "upcoming", type=int, default=5, show_default=True, metavar="N",
              help="how many next fire times to show (up to 1000), with those its calendars "
              "drop among them")
@json_flag()
@store_options(api=True)
async def show_job(target: Target, job: str, upcoming: int, as_json: bool) -> int:
    """Show one job, its schedule in words, and its next fire times."""
    client = await open_client(target)
    try:
        found = await client.get_job(job)
        fires = await client.preview_fires(found.id, max(0, min(upcoming, 1000)))
    finally:
        await client.close()
    return _show(found, fires, as_json=as_json)


def _show(job: Job, fires: list[Fire], *, as_json: bool) -> int:
    upcoming = [f.at for f in fires if f.excluded_by is None]
    if as_json:
        print_json({**job_json(job), "next_fire_times": [when(t) for t in upcoming],
                    "excluded_fire_times": [fire_json(f) for f in fires if f.excluded_by],
                    "description": for_job(compile_schedule(job.spec.schedule), job.id).describe()})
        return 0
    print_table(["FIELD", "VALUE"], [
        ("name", job.spec.name), ("id", job.id), ("kind", job.spec.kind),
        ("schedule", for_job(compile_schedule(job.spec.schedule), job.id).describe()),
        ("queue", job.spec.queue), ("priority", job.spec.priority),
        ("paused", job.spec.paused), ("next run", when(job.next_run_at) or "-"),
        ("tags", ", ".join(job.spec.tags)),
        ("created", f"{when(job.created_at)} by {job.created_by or '-'}"),
        ("updated", f"{when(job.updated_at)} by {job.updated_by or '-'}"),
    ])
    if fires:
        print("\nnext fire times:")
        for f in fires:  # the ones calendars drop too, each with why
            print(f"  {when(f.at)}" if f.excluded_by is None else
                  f"  {when(f.at)}  skipped: {f.reason}")
    return 0


@jobs.command("update", epilog=examples(
    "echo '{\"schedule\": {\"cron\": \"0 4 * * *\"}}' | tickwork jobs update nightly-report "
    "--json -",
    "tickwork jobs update nightly-report --json changes.json"))
@JOB
@click.option("--json", "source", required=True, metavar="FILE",
              help="one JSON object with the fields to change; - reads standard input")
@store_options(api=True)
async def update_job(target: Target, job: str, source: str) -> int:
    """Change some fields of a job; the others keep their values.

    A new schedule takes effect from now.
    """
    docs = read_documents(source)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ValidationError("--json", "update takes one JSON object with the fields to change")
    client = await open_client(target)
    try:
        updated = await client.update_job(job, docs[0])
    finally:
        await client.close()
    print(f"updated job {updated.spec.name}, next run {when(updated.next_run_at) or '-'}")
    return 0


@jobs.command("pause", epilog=examples("tickwork jobs pause nightly-report"))
@JOB
@json_flag("print the job as JSON")
@store_options(api=True)
async def pause_job(target: Target, job: str, as_json: bool) -> int:
    """Pause a job: no new runs are planned or started."""
    return await _act(target, job, "pause", as_json=as_json)


@jobs.command("resume", epilog=examples("tickwork jobs resume nightly-report"))
@JOB
@json_flag("print the job as JSON")
@store_options(api=True)
async def resume_job(target: Target, job: str, as_json: bool) -> int:
    """Resume a paused job from now on.

    The fire times missed while it was paused are not made up.
    """
    return await _act(target, job, "resume", as_json=as_json)


@jobs.command("delete", epilog=examples("tickwork jobs delete nightly-report"))
@JOB
@click.option("--json", "as_json", is_flag=True, hidden=True)  # accepted, as it always was
@store_options(api=True)
async def delete_job(target: Target, job: str, as_json: bool) -> int:
    """Delete a job; its history stays.

    Its waiting and running runs are cancelled.
    """
    return await _act(target, job, "delete", as_json=as_json)


@jobs.command("trigger", epilog=examples(
    "tickwork jobs trigger nightly-report",
    "tickwork jobs trigger nightly-report --redis redis://127.0.0.1:6379/0 --json"))
@JOB
@json_flag("print the run as JSON")
@store_options(redis="redis://host:port/db: put the run into Redis' due set at once "
               "(the postgres + redis deployment)", api=True)
async def trigger_job(target: Target, job: str, as_json: bool) -> int:
    """Run a job once, now, with an idempotency key of its own."""
    client = await open_client(target)
    try:
        occ = await client.trigger_job(job)
    finally:
        await client.close()
    if as_json:
        print_json(run_json(occ))
    else:
        print(f"triggered: run {occ.idempotency_key} is due now")
    return 0


@jobs.command("audit", epilog=examples(
    "tickwork jobs audit nightly-report",
    "tickwork jobs audit nightly-report --limit 20 --json",
    "tickwork jobs audit nightly-report --after 120   # the entries after id 120"))
@JOB
@click.option("--after", "after_id", type=int, metavar="ID", help=AFTER_HELP)
@click.option("--limit", type=int, default=100, show_default=True, metavar="N",
              help=LIMIT_HELP)
@json_flag()
@store_options(api=True)
async def audit_job(*, target: Target, job: str, after_id: int | None, limit: int,
                    as_json: bool) -> int:
    """List a job's recorded changes (a deleted job's too), oldest first: when, who (the API
    token's name, or the OS user), what, and for an update each field before and after."""
    check_limit(limit)
    client = await open_client(target)
    try:
        found = await client.audit(job=job, after_id=after_id, limit=limit)
    finally:
        await client.close()
    print_audit(found, as_json=as_json)
    return 0


async def _act(target: Target, ref: str, action: str, *, as_json: bool) -> int:
    client = await open_client(target)
    try:
        job = await client.get_job(ref)
        result: Any = None
        if action == "pause":
            result = await client.pause_job(job.id)
        elif action == "resume":
            result = await client.resume_job(job.id)
        else:
            await client.delete_job(job.id)
    finally:
        await client.close()
    if as_json and result is not None:
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
