"""``tickwork limits list|set|delete``: named rate limits that jobs share through their
``limit_key``, whatever their queue (docs/limits.md)."""

from __future__ import annotations

import click

from tickwork.cli.common import open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.cli.owners import owned_by, owner_of, owner_options
from tickwork.document.limits import key_limit_json, parse_limits


@click.group(cls=Group, epilog=examples(
    "tickwork limits set github-api --rate 5000/h --burst 100",
    "tickwork limits list",
    "tickwork limits delete github-api",
    "tickwork limits set acme-crm --rate 10/s --namespace acme"))
def limits() -> None:
    """See and set named rate limits.

    A job names one in its document ("limit_key": "github-api"); every job that names it
    shares its rate, on all workers and whatever their queue. A key may be owned by one
    namespace: only its jobs name it, and only its tokens change it.
    """


@limits.command("list", epilog=examples("tickwork limits list --json"))
@json_flag()
@store_options(api=True)
async def list_limits(target: Target, as_json: bool) -> int:
    """List named limits: rate, burst, and the starts available now."""
    client = await open_client(target)
    try:
        found = await client.list_limits()
    finally:
        await client.close()
    if as_json:
        print_json([key_limit_json(k) for k in found])
    else:
        print_table(["KEY", "RATE", "BURST", "TOKENS", "NAMESPACE"],
                    [(k.key, str(k.rate), k.burst, f"{k.tokens:.1f}", k.namespace or "")
                     for k in found])
    return 0


@limits.command("set", epilog=examples("tickwork limits set github-api --rate 100/min",
                                       "tickwork limits set acme-crm --rate 10/s --namespace acme",
                                       "tickwork limits set acme-crm --rate 10/s --shared"))
@click.argument("key", metavar="KEY")
@click.option("--rate", required=True, metavar="N/s|N/min|N/h",
              help="At most this many starts per second, minute or hour, on all workers.")
@click.option("--burst", type=int, default=None,
              help="How many of the rate's starts may happen at once (default: the count).")
@owner_options("limit key")
@json_flag("print the limit as JSON")
@store_options(api=True, namespace=False)
async def set_limit(target: Target, key: str, *, rate: str, burst: int | None,
                    namespace: str | None, shared: bool, as_json: bool) -> int:
    """Set the rate of the limit KEY (created if new).

    --namespace gives KEY to that namespace, --shared shares it again; without either its
    owner stays (a new key is shared). Only a token without a namespace changes the owner.
    """
    parsed = parse_limits({"rate": rate, "burst": burst}, key=True)
    owner = owner_of(namespace, shared=shared)
    client = await open_client(target)
    try:
        info = await client.set_limit(key, parsed, namespace=owner)
    finally:
        await client.close()
    if as_json:
        print_json(key_limit_json(info))
    else:
        print(f"limit {info.key}: {info.rate} burst {info.burst}{owned_by(info.namespace)}")
    return 0


@limits.command("delete", epilog=examples("tickwork limits delete github-api"))
@click.argument("key", metavar="KEY")
@store_options(api=True)
async def delete_limit(target: Target, key: str) -> int:
    """Delete the limit KEY: jobs that name it are no longer held by it."""
    client = await open_client(target)
    try:
        await client.delete_limit(key)
    finally:
        await client.close()
    print(f"deleted limit {key}")
    return 0
