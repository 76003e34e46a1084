"""``tickwork audit list``: who changed which job or run, and when (``jobs audit`` is one
job's)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from tickwork.cli.common import check_limit, instant_arg, open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import audit_json, when
from tickwork.models import AuditEntry

LIMIT_HELP = "how many entries to list (any number from 1)"
AFTER_HELP = "start after the entry with this id (the next page)"


@click.group(cls=Group, epilog=examples(
    "tickwork audit list --since 2030-01-01T00:00:00Z",
    "tickwork audit list --after 120 --limit 50 --json",
    "tickwork jobs audit nightly-report            # one job's"))
def audit() -> None:
    """The audit trail: every change to a job or one of its runs, with who made it.

    Who is the API token's name, or the OS user for the CLI and the Python client. Works on a
    database (--database) or, with --api and a token, through the REST API.
    """


@audit.command("list", epilog=examples(
    "tickwork audit list",
    "tickwork audit list --since 2030-01-01T00:00:00Z --limit 500 --json",
    "tickwork audit list --after 120             # the entries after id 120"))
@click.option("--since", metavar="TIME", help="only entries at or after TIME (RFC 3339)")
@click.option("--after", "after_id", type=int, metavar="ID", help=AFTER_HELP)
@click.option("--limit", type=int, default=100, show_default=True, metavar="N",
              help=LIMIT_HELP)
@json_flag()
@store_options(api=True)
async def list_audit(*, target: Target, since: str | None, after_id: int | None, limit: int,
                     as_json: bool) -> int:
    """List recorded changes, oldest first: when, who, what, the job and the run."""
    check_limit(limit)
    start = instant_arg(since, "--since") if since else None
    client = await open_client(target)
    try:
        found = await client.audit(since=start, after_id=after_id, limit=limit)
    finally:
        await client.close()
    print_audit(found, as_json=as_json)
    return 0


def print_audit(entries: Sequence[AuditEntry], *, as_json: bool) -> None:
    if as_json:
        print_json([audit_json(e) for e in entries])
        return
    print_table(["ID", "AT", "ACTOR", "ACTION", "JOB", "RUN", "DETAILS"], [
        (e.id, when(e.at), e.actor or "-", e.action.value, e.job_name or e.job_id or "-",
         when(e.scheduled_at) or "", details_text(e.details)) for e in entries])


def details_text(details: dict[str, Any] | None) -> str:
    """An update's ``{field: {before, after}}`` as ``field: before -> after``; anything else
    as compact JSON."""
    if not details:
        return ""
    if all(isinstance(v, dict) and v.keys() == {"before", "after"} for v in details.values()):
        return "; ".join(f"{field}: {_compact(v['before'])} -> {_compact(v['after'])}"
                         for field, v in details.items())
    return _compact(details)


def _compact(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."
