"""``tickwork api`` (the API and dashboard alone) and ``tickwork tokens create|list|revoke``."""

from __future__ import annotations

import argparse
import logging

from tickwork.cli.common import (
    add_redis_option,
    add_store_options,
    open_client,
    settings_from,
)
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import when
from tickwork.drivers.admin import TokenRevokeParams

log = logging.getLogger("tickwork.cli")


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """--host, --port and --open: shared by ``tickwork run`` and ``tickwork api``."""
    parser.add_argument("--host", metavar="ADDRESS",
                        help="listen on this address (default 127.0.0.1)")
    parser.add_argument("--port", metavar="PORT", help="listen on this port (default 8000)")
    parser.add_argument("--open", dest="open_access", action="store_true", default=None,
                        help="no token needed (admin rights for anyone who can connect); "
                        "only with a loopback --host")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    api = commands.add_parser("api", help="serve the REST API, dashboard and /metrics alone")
    add_store_options(api)
    add_redis_option(api)
    add_serve_options(api)
    api.add_argument("--log-level", default=None, help="debug, info (default), warning, error")
    api.set_defaults(handler=run_api)

    tokens = commands.add_parser("tokens", help="API tokens: create, list, revoke")
    sub = tokens.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    create = sub.add_parser("create", help="create a token (its secret is shown once)")
    create.add_argument("--name", required=True, help="what the token is for")
    create.add_argument("--scope", required=True, choices=["read", "write", "admin"],
                        help="read < write (jobs) < admin (queues, tokens)")
    add_store_options(create)
    create.set_defaults(handler=create_token_cmd)
    listing = sub.add_parser("list", help="list tokens (never their secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_store_options(listing)
    listing.set_defaults(handler=list_tokens)
    revoke = sub.add_parser("revoke", help="revoke a token by id or name")
    revoke.add_argument("token", help="the token's id or name")
    add_store_options(revoke)
    revoke.set_defaults(handler=revoke_token)


async def run_api(args: argparse.Namespace) -> int:
    from tickwork.runtime.api import ApiProcess  # noqa: PLC0415  (FastAPI loads only to serve)

    if args.log_level is None:
        logging.getLogger().setLevel(logging.INFO)
    settings = settings_from(args, host=args.host, port=args.port,
                             open_access=args.open_access)
    await ApiProcess(settings).run_until_signalled()
    return 0


async def create_token_cmd(args: argparse.Namespace) -> int:
    from tickwork.api.auth import create_token  # noqa: PLC0415

    client = await open_client(args, create=True)
    try:
        secret, info = await create_token(client, args.name, args.scope)
    finally:
        await client.close()
    print(f"created token {info.name!r} ({info.id}, scope {info.scope.value}); "
          "it is shown only this once:")
    print(secret)
    return 0


async def list_tokens(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        tokens = await client.admin.token_list()
    finally:
        await client.close()
    if args.json:
        print_json([{"id": t.id, "name": t.name, "scope": t.scope.value,
                     "created_at": when(t.created_at), "last_used_at": when(t.last_used_at),
                     "revoked_at": when(t.revoked_at)} for t in tokens])
    else:
        print_table(["ID", "NAME", "SCOPE", "CREATED", "LAST USED", "REVOKED"],
                    [[t.id, t.name, t.scope.value, when(t.created_at), when(t.last_used_at),
                      when(t.revoked_at)] for t in tokens])
    return 0


async def revoke_token(args: argparse.Namespace) -> int:
    client = await open_client(args)
    try:
        info = await client.admin.token_revoke(
            TokenRevokeParams(ref=args.token, now=client.clock.now()))
    finally:
        await client.close()
    print(f"revoked token {info.name!r} ({info.id})")
    return 0
