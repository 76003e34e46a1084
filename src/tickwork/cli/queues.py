"""``tickwork queues list|pause|resume``: the lanes jobs run in, and their pause switch."""

from __future__ import annotations

import click

from tickwork.cli.common import open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.drivers.admin import QueueInfo


@click.group(cls=Group, epilog=examples(
    "tickwork queues list",
    "tickwork queues pause mail",
    "tickwork queues resume mail --api https://tickwork.example.org"))
def queues() -> None:
    """See, pause and resume queues.

    Shows how many runs wait, are due and run in each queue.

    Works on a database (--database) or, with --api and an admin token for pause and
    resume, through the REST API.
    """


def queue_json(q: QueueInfo) -> dict[str, object]:
    return {"name": q.name, "paused": q.paused, "waiting": q.waiting, "due": q.due,
            "running": q.running}


@queues.command("list", epilog=examples("tickwork queues list", "tickwork queues list --json"))
@json_flag()
@store_options(api=True)
async def list_queues(target: Target, as_json: bool) -> int:
    """List queues: paused or not, runs waiting, due now and running."""
    client = await open_client(target)
    try:
        found = await client.list_queues()
    finally:
        await client.close()
    if as_json:
        print_json([queue_json(q) for q in found])
    else:
        print_table(["QUEUE", "PAUSED", "WAITING", "DUE", "RUNNING"],
                    [(q.name, "yes" if q.paused else "", q.waiting, q.due, q.running)
                     for q in found])
    return 0


@queues.command("pause", epilog=examples("tickwork queues pause mail"))
@click.argument("name", metavar="QUEUE")
@json_flag("print the queue as JSON")
@store_options(api=True)
async def pause_queue(target: Target, name: str, as_json: bool) -> int:
    """Pause QUEUE: no run of it starts until it is resumed; running attempts finish."""
    return await _switch(target, name, paused=True, as_json=as_json)


@queues.command("resume", epilog=examples("tickwork queues resume mail"))
@click.argument("name", metavar="QUEUE")
@json_flag("print the queue as JSON")
@store_options(api=True)
async def resume_queue(target: Target, name: str, as_json: bool) -> int:
    """Resume QUEUE: its due runs start again."""
    return await _switch(target, name, paused=False, as_json=as_json)


async def _switch(target: Target, name: str, *, paused: bool, as_json: bool) -> int:
    client = await open_client(target)
    try:
        queue = await (client.pause_queue(name) if paused else client.resume_queue(name))
    finally:
        await client.close()
    if as_json:
        print_json(queue_json(queue))
    else:
        print(f"{'paused' if paused else 'resumed'} queue {queue.name}")
    return 0
