"""``tickwork secrets set|list|delete|rotate``: write-only; no command ever prints a value.

Values are read from standard input or ``--value-file`` (never from an argument, which would
land in shell history and process listings), encrypted with ``TICKWORK_SECRET_KEY`` and stored
in the database. Jobs refer to them as ``{"$secret": "NAME"}``.

A secret belongs to a namespace (``--namespace``, or ``TICKWORK_NAMESPACE``; ``default`` when
neither is given): a job's references are resolved in the job's namespace only. ``rotate``
re-encrypts the secrets of every namespace.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from tickwork.cli.common import settings_from
from tickwork.cli.options import NAMESPACE_ENV, Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.document.render import when
from tickwork.drivers import open_driver
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE, NAMESPACE_NAME, NAMESPACE_RULE
from tickwork.drivers.secrets import SecretStore
from tickwork.errors import ValidationError
from tickwork.runtime.client import require_schema
from tickwork.secrets import MAX_SECRET_BYTES, SecretKeyring, check_name


@click.group(cls=Group, epilog=examples(
    "tickwork secrets set SLACK_TOKEN < token.txt",
    "tickwork secrets set SLACK_TOKEN --namespace acme < acme-token.txt",
    "tickwork secrets list",
    "tickwork secrets rotate   # after putting a new key first in TICKWORK_SECRET_KEY"))
def secrets() -> None:
    """Store secrets jobs refer to (write-only).

    Jobs refer to a secret as {"$secret": "NAME"}, resolved in the job's own namespace; no
    command prints a value. Values are encrypted with TICKWORK_SECRET_KEY and stored in the
    database.
    """


NAME = click.argument("name", metavar="NAME")


def _checked_namespace(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if value is None or value == "":
        return DEFAULT_NAMESPACE
    if NAMESPACE_NAME.fullmatch(value) is None:
        raise ValidationError("--namespace", NAMESPACE_RULE)
    return value


NAMESPACE = click.option(
    "--namespace", metavar="NAME", envvar=NAMESPACE_ENV, show_envvar=True,
    callback=_checked_namespace, help="the namespace the secret belongs to (default: "
    "'default'); jobs of that namespace only can use it")


@secrets.command("set", epilog=examples(
    "tickwork secrets set SLACK_TOKEN < token.txt",
    "tickwork secrets set SMTP_PASSWORD --value-file /run/secrets/smtp"))
@NAME
@click.option("--value-file", metavar="FILE",
              help="read the value from FILE instead of standard input")
@NAMESPACE
@store_options()
async def set_secret(target: Target, name: str, value_file: str | None, namespace: str) -> int:
    """Create or replace secret NAME (A-Z a-z 0-9 _ . -).

    The value comes from standard input or --value-file, never from an argument, which
    would land in shell history and process listings.
    """
    checked = check_name(name, "NAME")
    keyring = SecretKeyring.from_env()  # before reading: no key, nothing typed in vain
    ciphertext = keyring.encrypt(read_value(value_file))
    store = await _open(target, create=True)
    try:
        await store.secret_set(checked, ciphertext, datetime.now(UTC), namespace=namespace)
    finally:
        await store.close()
    print(f"secret {checked} set{_in(namespace)}")
    return 0


@secrets.command("list", epilog=examples("tickwork secrets list", "tickwork secrets list --json"))
@json_flag()
@NAMESPACE
@store_options()
async def list_secrets(target: Target, as_json: bool, namespace: str) -> int:
    """List a namespace's secrets by name, with when each was last set (never their values)."""
    store = await _open(target)
    try:
        found = await store.secret_list(namespace=namespace)
    finally:
        await store.close()
    if as_json:
        print_json([{"name": name, "updated_at": when(updated)} for name, updated in found])
    else:
        print_table(["NAME", "UPDATED AT"], [(name, when(updated)) for name, updated in found])
    return 0


@secrets.command("delete", epilog=examples("tickwork secrets delete SLACK_TOKEN"))
@NAME
@NAMESPACE
@store_options()
async def delete_secret(target: Target, name: str, namespace: str) -> int:
    """Delete secret NAME; jobs that refer to it fail until it is set again."""
    checked = check_name(name, "NAME")
    store = await _open(target)
    try:
        await store.secret_delete(checked, namespace=namespace)
    finally:
        await store.close()
    print(f"secret {checked} deleted{_in(namespace)}")
    return 0


@secrets.command("rotate", epilog=examples(
    "TICKWORK_SECRET_KEY=NEW_KEY,OLD_KEY tickwork secrets rotate"))
@store_options()
async def rotate_secrets(target: Target) -> int:
    """Re-encrypt every secret, of every namespace, with the first key of TICKWORK_SECRET_KEY.

    Put the new key first and keep the old ones after it until this has run.
    """
    keyring = SecretKeyring.from_env()
    store = await _open(target)
    done = 0
    try:
        for namespace in await store.secret_namespaces():
            for name, _ in await store.secret_list(namespace=namespace):
                token = await store.secret_get(name, namespace=namespace)
                # A clear error naming the secret a key cannot read.
                keyring.decrypt(f"{name}{_in(namespace)}", token)
                await store.secret_set(name, keyring.rotate(token), datetime.now(UTC),
                                       namespace=namespace)
                done += 1
    finally:
        await store.close()
    print(f"re-encrypted {done} secret(s) with the first key")
    return 0


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


def _in(namespace: str) -> str:
    return "" if namespace == DEFAULT_NAMESPACE else f" in namespace {namespace}"


async def _open(target: Target, *, create: bool = False) -> SecretStore:
    """The secret store; only ``secrets set`` creates or upgrades the database."""
    database = settings_from(target).database
    driver = open_driver(database)
    try:
        if create:
            await driver.migrate()
        else:
            await require_schema(driver.store, database)
    finally:
        await driver.close()
    return driver.secret_store()


