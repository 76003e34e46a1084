"""``tickwork runs list|show``: the history of occurrences and their attempts."""

from __future__ import annotations

import argparse

from tickwork.cli.common import add_store_options, check_limit, instant_arg, open_client
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import attempt_json, run_json, when
from tickwork.models import OccurrenceState


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = commands.add_parser("runs", help="the history of runs (occurrences and attempts)")
    sub = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")

    listing = sub.add_parser("list", help="list runs, newest first")
    listing.add_argument("--job", help="only this job (id or name)")
    listing.add_argument("--state", action="append", default=[],
                         choices=[s.value for s in OccurrenceState], help="repeatable")
    listing.add_argument("--since", metavar="TIME", help="scheduled at or after (RFC 3339)")
    listing.add_argument("--until", metavar="TIME", help="scheduled before (RFC 3339)")
    listing.add_argument("--oldest-first", action="store_true")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=list_runs)

    show = sub.add_parser("show", help="one run with every attempt, its output and error")
    show.add_argument("job", help="job id or name")
    show.add_argument("scheduled_at", metavar="SCHEDULED_AT", help="RFC 3339, as listed")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=show_run)

    for parser in sub.choices.values():
        add_store_options(parser)


async def list_runs(args: argparse.Namespace) -> int:
    check_limit(args.limit)
    client = await open_client(args)
    try:
        found = await client.list_runs(
            job=args.job, states=args.state,
            since=instant_arg(args.since, "--since") if args.since else None,
            until=instant_arg(args.until, "--until") if args.until else None,
            limit=args.limit, newest_first=not args.oldest_first)
        names = {}
        for job_id in {o.job_id for o in found}:
            try:
                names[job_id] = (await client.get_job(job_id)).spec.name
            except LookupError:
                names[job_id] = "(deleted)"
    finally:
        await client.close()
    if args.json:
        print_json([run_json(o, names[o.job_id]) for o in found])
        return 0
    print_table(["JOB", "SCHEDULED AT", "STATE", "ATTEMPT", "TRIGGER", "FINISHED AT", "ERROR"], [
        (names[o.job_id], when(o.scheduled_at), o.state.value, f"{o.attempt}/{o.max_attempts}",
         o.trigger.value, when(o.finished_at) or "-", (o.last_error or "")[:60])
        for o in found])
    return 0


async def show_run(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        job = await client.get_job(args.job)
        occ, attempts = await client.get_run(job.id, instant_arg(args.scheduled_at,
                                                                 "SCHEDULED_AT"))
    finally:
        await client.close()
    if args.json:
        print_json({**run_json(occ, job.spec.name), "attempts": [attempt_json(a)
                                                                 for a in attempts]})
        return 0
    print(f"{job.spec.name} @ {when(occ.scheduled_at)}: {occ.state.value}, "
          f"attempt {occ.attempt} of {occ.max_attempts} (key {occ.idempotency_key})")
    for a in attempts:
        took = f"{a.duration_seconds:.3f}s" if a.duration_seconds is not None else "-"
        print(f"\nattempt {a.number} on {a.worker}: {a.outcome.value if a.outcome else 'running'}"
              f" ({took}), claimed {when(a.claimed_at)}, finished {when(a.finished_at) or '-'}")
        if a.error:
            print(f"  error: {a.error}")
        if a.output:
            print("  output: " + a.output.replace("\n", "\n          "))
    return 0
