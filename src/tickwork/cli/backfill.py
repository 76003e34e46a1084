"""``tickwork jobs backfill``: runs for a job's past fire times, previewed before they are made."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from tickwork.cli.common import ManagementClient, instant_arg, open_client
from tickwork.cli.options import Target, examples, json_flag, store_options
from tickwork.cli.output import print_json
from tickwork.document.render import backfill_json, overlap_note, overlap_warning, when
from tickwork.errors import ValidationError
from tickwork.models import Backfill, Overlap

SHOWN = 20  # fire times a preview lists in full; beyond, the first and the last ones
# the client's names for the range's ends, as the command line spells them
_FLAGS = {"from": "--from", "until": "--to", "to": "--to", "overlap": "--overlap"}


@click.command("backfill", epilog=examples(
    "tickwork jobs backfill nightly-report --from 2030-01-01T00:00:00Z "
    "--to 2030-01-08T00:00:00Z --dry-run",
    "tickwork jobs backfill nightly-report --from 2030-01-01T00:00:00Z "
    "--to 2030-01-08T00:00:00Z --overlap allow_all",
    "tickwork jobs backfill ping --from 2030-01-01T09:00:00+01:00 --to 2030-01-01T17:00:00+01:00 "
    "--overlap buffer_all --yes --json",
    "tickwork jobs backfill ping --from 2030-01-01T00:00:00Z --to 2030-01-02T00:00:00Z "
    "--api https://tickwork.example.org --yes   # with TICKWORK_API_TOKEN set"))
@click.argument("job", metavar="JOB")
@click.option("--from", "since", required=True, metavar="TIME",
              help="the start of the range, included: an RFC 3339 time with Z or an offset")
@click.option("--to", "until", required=True, metavar="TIME",
              help="the end of the range, not included; not in the future")
@click.option("--overlap", type=click.Choice([o.value for o in Overlap]), default=None,
              help="the overlap policy the new runs are claimed under (default: the job's "
              "own, which for skip runs only the first of runs due together)")
@click.option("--limit", type=click.IntRange(1, 1000), default=1000, show_default=True,
              metavar="N", help="refuse a range with more than N fire times")
@click.option("--dry-run", is_flag=True, help="only show what would be created")
@click.option("--yes", "-y", is_flag=True,
              help="create without asking (needed when standard input is not a terminal)")
@json_flag("print the backfill (or with --dry-run its preview) as JSON")
@store_options(redis="redis://host:port/db: put the runs into Redis' due set at once "
               "(the postgres + redis deployment)", api=True)
async def backfill(*, target: Target, job: str, since: str, until: str, overlap: str | None,
                   limit: int, dry_run: bool, yes: bool, as_json: bool) -> int:
    """Create a run (trigger backfill, due now) for each fire time of JOB in [--from, --to).

    A fire time that has a run already keeps it, as it is. Without --yes, the command shows
    what it would create and asks first. The runs are all due at once: under the job's
    overlap policy skip, only the first of them would run, so --overlap chooses the policy
    they are claimed under (allow_all runs them all at once, buffer_all one after another).
    """
    start, end = instant_arg(since, "--from"), instant_arg(until, "--to")
    if start >= end:
        raise ValidationError("--to", f"must be after --from (got {when(end)}, which is not "
                              f"after {when(start)})")
    if not (dry_run or yes or sys.stdin.isatty()):
        raise ValidationError("--yes", "standard input is not a terminal to confirm on: pass "
                              "--yes to create the runs, or --dry-run to preview them")
    client = await open_client(target)
    try:
        preview = await _backfill(client, job, start=start, end=end, limit=limit,
                                  overlap=overlap, dry_run=True)
        name = (await client.get_job(job)).spec.name
        if dry_run:
            return _show(preview, name, as_json=as_json)
        if not yes:
            sys.stderr.write(_describe(preview, name))
            if not preview.new:
                sys.stderr.write("nothing to create\n")
                return _show(preview, name, as_json=as_json)
            if not click.confirm(f"create {len(preview.new)} runs?", err=True):
                sys.stderr.write("nothing created\n")
                return 1
        done = await _backfill(client, job, start=start, end=end, limit=limit,
                               overlap=overlap, dry_run=False)
    finally:
        await client.close()
    return _show(done, name, as_json=as_json)


async def _backfill(client: ManagementClient, job: str, *, start: datetime, end: datetime,
                    limit: int, overlap: str | None, dry_run: bool) -> Backfill:
    try:
        return await client.backfill(job, start, end, limit=limit, overlap=overlap,
                                      dry_run=dry_run)
    except ValidationError as exc:  # name the flag, not the API's field
        raise ValidationError(_FLAGS.get(exc.field, exc.field), exc.reason) from None


def _show(b: Backfill, name: str, *, as_json: bool) -> int:
    if as_json:
        print_json(backfill_json(b, name))
    elif b.dry_run:
        sys.stdout.write(_describe(b, name))
    else:
        kept = f", {len(b.existing)} had a run already and keep it" if b.existing else ""
        print(f"backfilled {name}: created {b.created} runs{kept}; overlap "
              f"{overlap_note(b)}")
    return 0


def _describe(b: Backfill, name: str) -> str:
    """The preview in words: the range, the counts, the overlap, then the fire times."""
    lines = [f"backfill {name} from {when(b.since)} to {when(b.until)}: "
             f"{len(b.fire_times)} fire times, {len(b.new)} new, "
             f"{len(b.existing)} with a run already (left as they are)",
             f"overlap: {overlap_note(b)}"]
    warning = overlap_warning(b)
    if warning:
        lines.append(f"warning: {warning}")
    have = set(b.existing)
    shown = b.fire_times if len(b.fire_times) <= SHOWN else [
        *b.fire_times[:SHOWN - 5], None, *b.fire_times[-5:]]
    for t in shown:
        if t is None:
            lines.append(f"  ... {len(b.fire_times) - SHOWN} more ...")
        else:
            lines.append(f"  {when(t)}  {'exists' if t in have else 'new'}")
    return "\n".join(lines) + "\n"
