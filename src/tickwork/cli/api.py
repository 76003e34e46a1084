"""``tickwork api`` (the API and dashboard alone) and ``tickwork tokens create|list|revoke``."""

from __future__ import annotations

import click

from tickwork.cli.common import settings_from
from tickwork.cli.options import (
    REDIS_HELP,
    Group,
    Target,
    examples,
    json_flag,
    logging_options,
    store_options,
)
from tickwork.cli.output import print_json, print_table
from tickwork.cli.service import serve_options
from tickwork.document.render import when


@click.command("api", epilog=examples(
    "tickwork api --database postgresql://tickwork@db.internal/tickwork --host 0.0.0.0",
    "tickwork api --open   # no token needed, loopback only",
    "tickwork api --database postgresql://tickwork@db.internal/tickwork "
    "--read-database postgresql://tickwork@replica.internal/tickwork"))
@serve_options
@logging_options
@store_options(redis=REDIS_HELP + ": what it triggers or backfills goes into Redis' due set "
               "at once")
async def api(target: Target, host: str | None, port: str | None,
              open_access: bool | None, read_database: str | None) -> int:
    """Serve the REST API, the dashboard and /metrics alone.

    Every request needs an API token (tickwork tokens create) unless --open.
    """
    from tickwork.runtime.api import ApiProcess  # noqa: PLC0415  (FastAPI loads only to serve)

    settings = settings_from(target, host=host, port=port, open_access=open_access,
                             read_database=read_database)
    await ApiProcess(settings).run_until_signalled()
    return 0


@click.group(cls=Group, epilog=examples(
    "tickwork tokens create --name deploy-bot --scope write",
    "tickwork tokens list",
    "tickwork tokens revoke deploy-bot"))
def tokens() -> None:
    """API tokens: create, list, revoke. Only a token's hash is stored."""


@tokens.command("create", epilog=examples(
    "tickwork tokens create --name deploy-bot --scope write",
    "tickwork tokens create --name grafana --scope read",
    "tickwork tokens create --name acme-ci --scope write --namespace acme"))
@click.option("--name", required=True, help="what the token is for")
@click.option("--scope", required=True, type=click.Choice(["read", "write", "admin"]),
              help="read < write (jobs) < admin (queues, tokens)")
@click.option("--namespace", metavar="NAME",
              help="the only namespace the token sees and changes (default: every one)")
@store_options()
async def create_token_cmd(target: Target, name: str, scope: str,
                           namespace: str | None) -> int:
    """Create an API token and print it once; only its hash is stored."""
    from tickwork.api.auth import create_token  # noqa: PLC0415
    from tickwork.runtime.client import client_for  # noqa: PLC0415  (the store loads to use it)

    client = await client_for(settings_from(target), create=True, namespace=None)
    try:
        secret, info = await create_token(client, name, scope, namespace)
    finally:
        await client.close()
    where = f", namespace {info.namespace}" if info.namespace else ""
    print(f"created token {info.name!r} ({info.id}, scope {info.scope.value}{where}); "
          "it is shown only this once:")
    print(secret)
    return 0


@tokens.command("list", epilog=examples("tickwork tokens list", "tickwork tokens list --json"))
@json_flag()
@store_options()
async def list_tokens(target: Target, as_json: bool) -> int:
    """List tokens: name, scope, when created, last used and revoked (never their secrets)."""
    from tickwork.runtime.client import client_for  # noqa: PLC0415  (the store loads to use it)

    client = await client_for(settings_from(target), create=False)
    try:
        found = await client.admin.token_list()
    finally:
        await client.close()
    if as_json:
        print_json([{"id": t.id, "name": t.name, "scope": t.scope.value,
                     "created_at": when(t.created_at), "last_used_at": when(t.last_used_at),
                     "revoked_at": when(t.revoked_at), "namespace": t.namespace}
                    for t in found])
    else:
        print_table(["ID", "NAME", "SCOPE", "NAMESPACE", "CREATED", "LAST USED", "REVOKED"],
                    [[t.id, t.name, t.scope.value, t.namespace or "*", when(t.created_at),
                      when(t.last_used_at), when(t.revoked_at)] for t in found])
    return 0


@tokens.command("revoke", epilog=examples("tickwork tokens revoke deploy-bot"))
@click.argument("token", metavar="ID_OR_NAME")
@store_options()
async def revoke_token(target: Target, token: str) -> int:
    """Revoke a token by its id or name; requests with it are refused from now on."""
    from tickwork.drivers.admin import TokenRevokeParams  # noqa: PLC0415
    from tickwork.runtime.client import client_for  # noqa: PLC0415  (the store loads to use it)

    client = await client_for(settings_from(target), create=False)
    try:
        info = await client.admin.token_revoke(
            TokenRevokeParams(ref=token, now=client.clock.now()))
    finally:
        await client.close()
    print(f"revoked token {info.name!r} ({info.id})")
    return 0
