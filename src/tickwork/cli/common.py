"""What every CLI command shares: the database option, settings, reading JSON input."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from tickwork.client import AsyncClient
from tickwork.config import Settings, load_settings
from tickwork.document import parse_instant
from tickwork.document.fields import check_text
from tickwork.drivers import open_driver, safe_url
from tickwork.drivers.base import Store
from tickwork.errors import ConfigError, NotMigrated, ValidationError
from tickwork.executors.admission import JobPolicy


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", metavar="URL", help="sqlite:///path (default "
                        "sqlite:///tickwork.db) or postgresql://...; env TICKWORK_DATABASE_URL")
    parser.add_argument("--config", metavar="FILE", help="a TOML settings file "
                        "(default: $TICKWORK_CONFIG, else ./tickwork.toml if present)")


def settings_from(args: argparse.Namespace, **flags: object) -> Settings:
    flags = {"database": getattr(args, "database", None),
             "redis": getattr(args, "redis", None), **flags}
    settings = load_settings(flags=flags, toml_path=getattr(args, "config", None))
    settings.validate()
    return settings


def add_redis_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", metavar="URL", help="redis://host:port/db when the "
                        "deployment dispatches through Redis; env TICKWORK_REDIS_URL")


async def open_client(args: argparse.Namespace, *, create: bool = False) -> AsyncClient:
    """A client on the configured database. Only a command that adds something
    (``create``) creates or upgrades the database; the others refuse one that is missing."""
    return await client_for(settings_from(args), create=create)


async def client_for(settings: Settings, *, create: bool = True) -> AsyncClient:
    """A client on the configured store; with Redis configured, what it triggers or
    backfills goes straight into Redis' due set."""
    policy = JobPolicy(settings.executors, runs_jobs=False)
    if create:
        client = await AsyncClient.open(settings.database, policy=policy)
    else:
        store = open_driver(settings.database).store
        try:
            await require_schema(store, settings.database)
        except BaseException:
            await store.close()
            raise
        client = AsyncClient(store, policy=policy)
    if settings.redis:
        try:
            load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")
        except BaseException:
            await client.close()
            raise
        # redis is an extra: imported only when configured
        from tickwork.drivers.feeder import DueFeeder  # noqa: PLC0415
        from tickwork.drivers.redis.dispatch import RedisDispatch  # noqa: PLC0415

        dispatch = RedisDispatch.from_url(settings.redis)
        client.after_insert = DueFeeder(dispatch, client.clock).add_waiting
        client.on_close(dispatch.close)
    return client


EXTRA_PACKAGES = {"redis": "redis", "hiredis": "redis", "psycopg": "postgres",
                  "psycopg_pool": "postgres", "psycopg_binary": "postgres"}


def load_extra(module: str, field: str, what: str) -> None:
    """Import ``module`` now, so a missing optional dependency is one line naming the extra
    to install (``field: WHAT needs the redis extra: pip install 'tickwork[redis]'``)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = EXTRA_PACKAGES.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        raise ConfigError(field, f"{what} needs the {extra} extra: "
                          f"pip install 'tickwork[{extra}]'") from None


async def require_schema(store: Store, database: str) -> None:
    """Raise NotMigrated unless ``database`` exists with this tickwork's schema; creates
    and changes nothing (a SQLite file that does not exist stays so)."""
    if await store.migrations_pending():
        raise NotMigrated(f"database {safe_url(database)} does not exist or is not migrated "
                          "to this version of tickwork; run `tickwork migrate` first")


def read_documents(source: str) -> list[Any]:
    """One JSON document, a JSON array of them, or one per line (NDJSON), from a file or '-'."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError("--json", f"cannot read {source}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError("--json", f"{'standard input' if source == '-' else source} "
                              f"is not UTF-8 text (byte {exc.start + 1})") from None
    docs = _parse_documents(text)
    for index, doc in enumerate(docs):  # "\ud800" escapes, or stdin's surrogateescape
        check_text(doc, f"[{index}]" if len(docs) > 1 else "")
    return docs


def _parse_documents(text: str) -> list[Any]:
    if not text.strip():
        raise ValidationError("--json", "the input is empty; expected a JSON job document")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise ValidationError("--json", f"not valid JSON: line {whole.lineno} column "
                                  f"{whole.colno}: {whole.msg}") from None
        docs = []
        for number, line in lines:  # NDJSON: one document per line
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError("--json", f"not valid JSON on line {number} column "
                                      f"{exc.colno}: {exc.msg}") from None
        return docs
    return value if isinstance(value, list) else [value]


def instant_arg(value: str, name: str) -> datetime:
    return parse_instant(value, name)


def check_limit(limit: int) -> None:
    """--limit of a listing: any number of rows from 1 (the listing reads them in pages)."""
    if limit < 1:
        raise ValidationError("--limit", f"must be at least 1 (got {limit})")
