"""``tickwork api`` (the API and dashboard alone) and ``tickwork tokens create|list|revoke``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import click

from tickwork.cli.common import settings_from, through_api
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

if TYPE_CHECKING:
    from tickwork.client import AsyncClient
    from tickwork.drivers.admin import TokenInfo


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
    "tickwork tokens revoke deploy-bot",
    "tickwork tokens list --api https://tickwork.example.org   # an admin token"))
def tokens() -> None:
    """API tokens: create, list, revoke. Only a token's hash is stored.

    On a database, or with --api through the REST API and an admin token.
    """


class TokenClient(Protocol):
    """The token commands' client: the store's admin part, or ``RemoteTokens``."""

    async def close(self) -> None: ...
    async def token_list(self) -> list[TokenInfo]: ...
    async def token_create(self, name: str, scope: str,
                           namespace: str | None) -> tuple[str, TokenInfo]: ...
    async def token_revoke(self, ref: str) -> TokenInfo: ...


class DatabaseTokens:
    """Tokens on the database, as ``RemoteTokens`` has them through the API."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def close(self) -> None:
        await self._client.close()

    async def token_list(self) -> list[TokenInfo]:
        return await self._client.admin.token_list()

    async def token_create(self, name: str, scope: str,
                           namespace: str | None) -> tuple[str, TokenInfo]:
        from tickwork.api.auth import create_token  # noqa: PLC0415

        return await create_token(self._client, name, scope, namespace)

    async def token_revoke(self, ref: str) -> TokenInfo:
        from tickwork.drivers.admin import TokenRevokeParams  # noqa: PLC0415

        return await self._client.admin.token_revoke(
            TokenRevokeParams(ref=ref, now=self._client.clock.now()))


async def token_client(target: Target, *, create: bool = False) -> TokenClient:
    """The tokens on the configured database (every namespace's), or through ``--api``
    (what its token sees)."""
    if through_api(target):
        from tickwork.cli.remote_admin import RemoteTokens  # noqa: PLC0415  (httpx for --api only)

        return RemoteTokens(str(target.api), target.token)
    from tickwork.runtime.client import client_for  # noqa: PLC0415  (the store loads to use it)

    return DatabaseTokens(await client_for(settings_from(target), create=create,
                                           namespace=None))


@tokens.command("create", epilog=examples(
    "tickwork tokens create --name deploy-bot --scope write",
    "tickwork tokens create --name grafana --scope read",
    "tickwork tokens create --name acme-ci --scope write --namespace acme",
    "tickwork tokens create --name ci --scope write --api https://tickwork.example.org"))
@click.option("--name", required=True, help="what the token is for")
@click.option("--scope", required=True, type=click.Choice(["read", "write", "admin"]),
              help="read < write (jobs) < admin (queues, tokens)")
@click.option("--namespace", metavar="NAME",
              help="the only namespace the token sees and changes (default: every one; "
              "with --api and a namespace's token, that namespace)")
@store_options(api=True, namespace=False)
async def create_token_cmd(target: Target, name: str, scope: str,
                           namespace: str | None) -> int:
    """Create an API token and print it once; only its hash is stored."""
    client = await token_client(target, create=True)
    try:
        secret, info = await client.token_create(name, scope, namespace)
    finally:
        await client.close()
    where = f", namespace {info.namespace}" if info.namespace else ""
    print(f"created token {info.name!r} ({info.id}, scope {info.scope.value}{where}); "
          "it is shown only this once:")
    print(secret)
    return 0


@tokens.command("list", epilog=examples("tickwork tokens list", "tickwork tokens list --json"))
@json_flag()
@store_options(api=True, namespace=False)
async def list_tokens(target: Target, as_json: bool) -> int:
    """List tokens: name, scope, when created, last used and revoked (never their secrets)."""
    client = await token_client(target)
    try:
        found = await client.token_list()
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
@click.argument("ref", metavar="ID_OR_NAME")
@store_options(api=True, namespace=False)
async def revoke_token(target: Target, ref: str) -> int:
    """Revoke a token by its id or name; requests with it are refused from now on."""
    client = await token_client(target)
    try:
        info = await client.token_revoke(ref)
    finally:
        await client.close()
    print(f"revoked token {info.name!r} ({info.id})")
    return 0
