"""``tickwork runs list|show|cancel|retry``: the history of occurrences and their attempts,
and run control."""

from __future__ import annotations

import click

from tickwork.cli.common import check_limit, instant_arg, open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import attempt_json, run_json, when
from tickwork.models import Occurrence, OccurrenceState, Upstream


@click.group(cls=Group, epilog=examples(
    "tickwork runs list --job nightly-report",
    "tickwork runs list --state dead --state crashed --since 2030-01-01T00:00:00Z --json",
    "tickwork runs show nightly-report 2030-01-01T03:00:00Z",
    "tickwork runs cancel nightly-report 2030-01-01T03:00:00Z",
    "tickwork runs retry nightly-report 2030-01-01T03:00:00Z"))
def runs() -> None:
    """The history of runs and their attempts; cancel a run, or run a failed one again.

    Works on a database (--database) or, with --api and a token, through the REST API.
    """


@runs.command("list", epilog=examples(
    "tickwork runs list",
    "tickwork runs list --job nightly-report --limit 10",
    "tickwork runs list --state dead --state crashed --since 2030-01-01T00:00:00Z --json"))
@click.option("--job", metavar="JOB", help="only runs of this job (id or name)")
@click.option("--state", "states", multiple=True,
              type=click.Choice([s.value for s in OccurrenceState]),
              help="only runs in this state; repeat for several")
@click.option("--since", metavar="TIME", help="scheduled at or after TIME (RFC 3339)")
@click.option("--until", metavar="TIME", help="scheduled before TIME (RFC 3339)")
@click.option("--oldest-first", is_flag=True, help="oldest first (default: newest first)")
@click.option("--limit", type=int, default=50, show_default=True, metavar="N",
              help="how many runs to list (any number from 1)")
@json_flag()
@store_options(api=True)
async def list_runs(*, target: Target, job: str | None, states: tuple[str, ...],
                    since: str | None, until: str | None, oldest_first: bool, limit: int,
                    as_json: bool) -> int:
    """List runs, newest first: state, attempts, trigger, times and the last error."""
    check_limit(limit)
    client = await open_client(target)
    try:
        found = await client.list_runs(
            job=job, states=list(states),
            since=instant_arg(since, "--since") if since else None,
            until=instant_arg(until, "--until") if until else None,
            limit=limit, newest_first=not oldest_first)
        names = {}
        for job_id in {o.job_id for o in found}:
            try:
                names[job_id] = (await client.get_job(job_id)).spec.name
            except LookupError:
                names[job_id] = "(deleted)"
    finally:
        await client.close()
    if as_json:
        print_json([run_json(o, names[o.job_id]) for o in found])
        return 0
    print_table(["JOB", "SCHEDULED AT", "STATE", "ATTEMPT", "TRIGGER", "FINISHED AT", "ERROR"], [
        (names[o.job_id], when(o.scheduled_at), o.state.value, f"{o.attempt}/{o.max_attempts}",
         o.trigger.value, when(o.finished_at) or "-", (o.last_error or "")[:60])
        for o in found])
    return 0


@runs.command("show", epilog=examples(
    "tickwork runs show nightly-report 2030-01-01T03:00:00Z",
    "tickwork runs show nightly-report 2030-01-01T03:00:00Z --json"))
@click.argument("job", metavar="JOB")
@click.argument("scheduled_at", metavar="SCHEDULED_AT")
@json_flag()
@store_options(api=True)
async def show_run(target: Target, job: str, scheduled_at: str, as_json: bool) -> int:
    """Show one run of JOB (id or name) at SCHEDULED_AT (RFC 3339, as listed) with every
    attempt: worker, times, duration, outcome, output and error."""
    client = await open_client(target)
    try:
        found = await client.get_job(job)
        occ, attempts = await client.get_run(found.id, instant_arg(scheduled_at,
                                                                   "SCHEDULED_AT"))
    finally:
        await client.close()
    job_name = found.spec.name
    if as_json:
        print_json({**run_json(occ, job_name), "attempts": [attempt_json(a)
                                                                 for a in attempts]})
        return 0
    print(f"{job_name} @ {when(occ.scheduled_at)}: {occ.state.value}, "
          f"attempt {occ.attempt} of {occ.max_attempts} (key {occ.idempotency_key})")
    if occ.upstream is not None:
        print(f"triggered by {upstream_text(occ.upstream)}")
    if occ.last_error and not attempts:  # cancelled before it started: who cancelled it
        print(f"last error: {occ.last_error}")
    for a in attempts:
        took = f"{a.duration_seconds:.3f}s" if a.duration_seconds is not None else "-"
        print(f"\nattempt {a.number} on {a.worker}: {a.outcome.value if a.outcome else 'running'}"
              f" ({took}), claimed {when(a.claimed_at)}, finished {when(a.finished_at) or '-'}")
        if a.error:
            print(f"  error: {a.error}")
        if a.output:
            print("  output: " + a.output.replace("\n", "\n          "))
    return 0


def upstream_text(up: Upstream) -> str:
    """The run whose end triggered a chained run: its job, time, attempt and how it ended."""
    return (f"{up.job_name} @ {when(up.scheduled_at)}, attempt {up.attempt} ({up.event.value}; "
            f"key {up.idempotency_key})")


RUN_ARGS = (click.argument("job", metavar="JOB"),
            click.argument("scheduled_at", metavar="SCHEDULED_AT"))


@runs.command("cancel", epilog=examples(
    "tickwork runs cancel nightly-report 2030-01-01T03:00:00Z",
    "tickwork runs cancel nightly-report 2030-01-01T03:00:00Z --json",
    "tickwork runs cancel nightly-report 2030-01-01T03:00:00Z --api https://tickwork.example.org"))
@RUN_ARGS[0]
@RUN_ARGS[1]
@json_flag("print the run as JSON")
@store_options(api=True)
async def cancel_run(target: Target, job: str, scheduled_at: str, as_json: bool) -> int:
    """Cancel the run of JOB (id or name) at SCHEDULED_AT (RFC 3339, as listed) while it waits
    or runs.

    It ends cancelled at once, naming who cancelled it: the OS user on a database, the
    token's name through --api. A running attempt is stopped by its worker at its next
    heartbeat. A run that already ended cannot be cancelled (status 2).
    """
    return await _control(target, job, scheduled_at, "cancel", as_json=as_json)


@runs.command("retry", epilog=examples(
    "tickwork runs retry nightly-report 2030-01-01T03:00:00Z",
    "tickwork runs retry nightly-report 2030-01-01T03:00:00Z --json"))
@RUN_ARGS[0]
@RUN_ARGS[1]
@json_flag("print the run as JSON")
@store_options(api=True)
async def retry_run(target: Target, job: str, scheduled_at: str, as_json: bool) -> int:
    """Run a dead, crashed or cancelled run of JOB at SCHEDULED_AT again now, as its next
    attempt.

    Its idempotency key stays; it runs whatever the job's overlap policy or catch-up window.
    Any other state cannot be retried (status 2). Recorded as the OS user on a database, the
    token's name through --api.
    """
    return await _control(target, job, scheduled_at, "retry", as_json=as_json)


async def _control(target: Target, job: str, scheduled_at: str, action: str, *,
                   as_json: bool) -> int:
    at = instant_arg(scheduled_at, "SCHEDULED_AT")
    client = await open_client(target)
    try:
        found = await client.get_job(job)
        occ: Occurrence = await (client.cancel_run(found.id, at) if action == "cancel"
                                 else client.retry_run(found.id, at))
    finally:
        await client.close()
    name = found.spec.name
    if as_json:
        print_json(run_json(occ, name))
    elif action == "cancel":
        print(f"cancelled run {name} @ {when(occ.scheduled_at)} ({occ.last_error})")
    else:
        print(f"retrying run {name} @ {when(occ.scheduled_at)}: attempt {occ.attempt + 1} of "
              f"{occ.max_attempts} is due now")
    return 0
