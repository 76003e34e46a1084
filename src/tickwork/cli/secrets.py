"""``tickwork secrets set|list|delete|rotate``: write-only; no command ever prints a value.

Values are read from standard input or ``--value-file`` (never from an argument, which would
land in shell history and process listings), encrypted with ``TICKWORK_SECRET_KEY`` and stored
in the database. Jobs refer to them as ``{"$secret": "NAME"}``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from tickwork.cli.common import add_store_options, settings_from
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import when
from tickwork.drivers import open_driver
from tickwork.drivers.secrets import SecretStore
from tickwork.errors import ValidationError
from tickwork.runtime.client import require_schema
from tickwork.secrets import MAX_SECRET_BYTES, SecretKeyring, check_name


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    secrets = commands.add_parser("secrets", help="store secrets jobs refer to (write-only)")
    sub = secrets.add_subparsers(dest="secrets_command", required=True, metavar="ACTION")

    put = sub.add_parser("set", help="create or replace a secret; the value comes from "
                         "standard input or --value-file")
    put.add_argument("name", help="A-Z a-z 0-9 _ . - (jobs use {\"$secret\": \"NAME\"})")
    put.add_argument("--value-file", metavar="FILE",
                     help="read the value from FILE instead of standard input")
    put.set_defaults(handler=set_secret)

    listing = sub.add_parser("list", help="names and when each was last set (never values)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=list_secrets)

    delete = sub.add_parser("delete", help="delete a secret")
    delete.add_argument("name")
    delete.set_defaults(handler=delete_secret)

    rotate = sub.add_parser("rotate", help="re-encrypt every secret with the first key of "
                            "TICKWORK_SECRET_KEY (after adding a new key in front)")
    rotate.set_defaults(handler=rotate_secrets)

    for parser in sub.choices.values():
        add_store_options(parser)


def read_value(value_file: str | None) -> str:
    """The value from a file or stdin, without one trailing newline; never empty."""
    where = "--value-file" if value_file else "standard input"
    if value_file:
        try:
            raw = Path(value_file).read_bytes()
        except OSError as exc:
            raise ValidationError("--value-file", f"cannot read {value_file}: "
                                  f"{exc.strerror}") from None
    else:
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else \
            sys.stdin.read().encode()
    if len(raw) > MAX_SECRET_BYTES:
        raise ValidationError(where, f"the value is longer than {MAX_SECRET_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(where, "the value must be UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise ValidationError(where, "the value is empty")
    return text


async def _open(args: argparse.Namespace, *, create: bool = False) -> SecretStore:
    """The secret store; only ``secrets set`` creates or upgrades the database."""
    database = settings_from(args).database
    driver = open_driver(database)
    try:
        if create:
            await driver.migrate()
        else:
            await require_schema(driver.store, database)
    finally:
        await driver.close()
    return driver.secret_store()


async def set_secret(args: argparse.Namespace) -> int:
    name = check_name(args.name, "NAME")
    keyring = SecretKeyring.from_env()  # before reading: no key, nothing typed in vain
    ciphertext = keyring.encrypt(read_value(args.value_file))
    store = await _open(args, create=True)
    try:
        await store.secret_set(name, ciphertext, datetime.now(UTC))
    finally:
        await store.close()
    print(f"secret {name} set")
    return 0


async def list_secrets(args: argparse.Namespace) -> int:
    store = await _open(args)
    try:
        found = await store.secret_list()
    finally:
        await store.close()
    if args.json:
        print_json([{"name": name, "updated_at": when(updated)} for name, updated in found])
    else:
        print_table(["NAME", "UPDATED AT"], [(name, when(updated)) for name, updated in found])
    return 0


async def delete_secret(args: argparse.Namespace) -> int:
    name = check_name(args.name, "NAME")
    store = await _open(args)
    try:
        await store.secret_delete(name)
    finally:
        await store.close()
    print(f"secret {name} deleted")
    return 0


async def rotate_secrets(args: argparse.Namespace) -> int:
    keyring = SecretKeyring.from_env()
    store = await _open(args)
    try:
        names = [name for name, _ in await store.secret_list()]
        for name in names:
            token = await store.secret_get(name)
            keyring.decrypt(name, token)  # a clear error naming the secret a key cannot read
            await store.secret_set(name, keyring.rotate(token), datetime.now(UTC))
    finally:
        await store.close()
    print(f"re-encrypted {len(names)} secret(s) with the first key")
    return 0
