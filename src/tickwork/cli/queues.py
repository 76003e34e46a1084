"""``tickwork queues list|pause|resume|set``: the lanes jobs run in, their pause switch and
their limits across every worker (docs/limits.md)."""

from __future__ import annotations

import click

from tickwork.cli.common import open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.cli.owners import owned_by, owner_of, owner_options
from tickwork.document.limits import parse_limits, queue_json
from tickwork.drivers.admin import QueueInfo


@click.group(cls=Group, epilog=examples(
    "tickwork queues list",
    "tickwork queues pause mail",
    "tickwork queues resume mail --api https://tickwork.example.org",
    "tickwork queues set payments --max-running 5 --rate 50/s --burst 10",
    "tickwork queues set acme-sync --max-running 2 --namespace acme"))
def queues() -> None:
    """See, pause, resume and limit queues.

    Shows how many runs wait, are due and run in each queue, its limits across every
    worker, and the namespace that owns it (none: shared by every namespace).

    Works on a database (--database) or, with --api and an admin token for pause and
    resume, through the REST API. A token of one namespace pauses and limits only the
    queues its namespace owns.
    """


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
        print_table(["QUEUE", "PAUSED", "WAITING", "DUE", "RUNNING", "MAX RUNNING", "RATE",
                     "TOKENS", "NAMESPACE"],
                    [(q.name, "yes" if q.paused else "", q.waiting, q.due, q.running,
                      "" if q.max_running is None else q.max_running, _rate(q), _tokens(q),
                      q.namespace or "") for q in found])
    return 0


def _rate(q: QueueInfo) -> str:
    return "" if q.rate is None else f"{q.rate} burst {q.burst}"


def _tokens(q: QueueInfo) -> str:
    return "" if q.tokens is None else f"{q.tokens:.1f}"


@queues.command("set", epilog=examples(
    "tickwork queues set payments --max-running 5",
    "tickwork queues set payments --max-running 5 --rate 50/s --burst 10",
    "tickwork queues set payments  # no options: remove every limit",
    "tickwork queues set acme-sync --max-running 2 --namespace acme",
    "tickwork queues set acme-sync --max-running 2 --shared"))
@click.argument("name", metavar="QUEUE")
@click.option("--max-running", type=int, default=None,
              help="At most this many attempts of the queue run at once, on all workers.")
@click.option("--rate", default=None, metavar="N/s|N/min|N/h",
              help="At most this many starts per second, minute or hour, on all workers.")
@click.option("--burst", type=int, default=None,
              help="How many of the rate's starts may happen at once (default: the count).")
@owner_options("queue")
@json_flag("print the queue as JSON")
@store_options(api=True, namespace=False)
async def set_queue(target: Target, name: str, *, max_running: int | None,
                    rate: str | None, burst: int | None, namespace: str | None, shared: bool,
                    as_json: bool) -> int:
    """Set QUEUE's limits across every worker; an option left out is no limit.

    --namespace gives QUEUE to that namespace (its tokens pause and limit it, other
    namespaces' jobs cannot use it), --shared shares it again; without either its owner
    stays. Only a token without a namespace changes the owner.
    """
    limits = parse_limits({"max_running": max_running, "rate": rate, "burst": burst})
    owner = owner_of(namespace, shared=shared)
    client = await open_client(target)
    try:
        queue = await client.set_queue_limits(name, limits, namespace=owner)
    finally:
        await client.close()
    if as_json:
        print_json(queue_json(queue))
    else:
        parts = [f"max running {queue.max_running}" if queue.max_running else "",
                 f"rate {_rate(queue)}" if queue.rate else ""]
        print(f"queue {queue.name}: {', '.join(p for p in parts if p) or 'no limits'}"
              f"{owned_by(queue.namespace)}")
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
