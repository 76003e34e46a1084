"""``tickwork alerts list``: the alerts that fired, firing or resolved, with their deliveries."""

from __future__ import annotations

import click

from tickwork.cli.common import open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import alert_json, when
from tickwork.drivers.alerts import MAX_ALERTS, StoredAlert
from tickwork.errors import ValidationError

STATES = ("firing", "resolved")


@click.group(cls=Group, epilog=examples(
    "tickwork alerts list --state firing",
    "tickwork alerts list --job nightly-report --json"))
def alerts() -> None:
    """Alerts: what fired for which job, whether it resolved, and how each delivery went.

    A job's alerts field (or the alert_defaults setting) says when they fire and where they
    go. Works on a database (--database) or, with --api and a token, through the REST API.
    """


@alerts.command("list", epilog=examples(
    "tickwork alerts list",
    "tickwork alerts list --state firing",
    "tickwork alerts list --job nightly-report --limit 10 --json"))
@click.option("--job", metavar="JOB", help="only alerts of this job (id or name)")
@click.option("--state", type=click.Choice(STATES),
              help="only firing alerts, or only resolved ones")
@click.option("--limit", type=int, default=50, show_default=True, metavar="N",
              help=f"how many alerts to list, newest first (1 to {MAX_ALERTS})")
@json_flag()
@store_options(api=True)
async def list_alerts(*, target: Target, job: str | None, state: str | None, limit: int,
                      as_json: bool) -> int:
    """List alerts, newest first: job, condition, state, when it fired and resolved, and its
    deliveries (channel kind, state, tries; never their payloads, which hold credentials)."""
    if not 1 <= limit <= MAX_ALERTS:
        raise ValidationError("--limit", f"must be from 1 to {MAX_ALERTS} (got {limit})")
    client = await open_client(target)
    try:
        found = await client.list_alerts(job=job, state=state, limit=limit)
    finally:
        await client.close()
    if as_json:
        print_json([alert_json(a) for a in found])
        return 0
    print_table(["JOB", "CONDITION", "STATE", "FIRED AT", "RESOLVED AT", "DELIVERIES",
                 "DETAIL"], [
        (a.job_name, a.condition, a.state, when(a.fired_at), when(a.resolved_at) or "-",
         deliveries_text(a), a.detail[:80]) for a in found])
    return 0


def deliveries_text(alert: StoredAlert) -> str:
    """``event kind#channel state (tries)`` per delivery, or why nothing was sent."""
    if not alert.notified:
        return "not sent (cooldown)"
    return ", ".join(f"{d.event} {d.kind}#{d.channel} {d.state}"
                     + (f" ({d.attempts} tries)" if d.attempts != 1 else "")
                     for d in alert.deliveries) or "-"
