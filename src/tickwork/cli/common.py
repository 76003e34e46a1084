"""What every CLI command shares: the database option, settings, reading JSON input."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tickwork.client import AsyncClient
from tickwork.config import Settings, load_settings
from tickwork.document import parse_instant
from tickwork.document.text import check_text
from tickwork.errors import ValidationError
from tickwork.runtime.client import client_for


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


def working_directory_on_path() -> str:
    """Put the working directory first on ``sys.path``, as uvicorn and celery do: a python
    job's module in the project folder imports as it does under ``python -m`` (the
    ``tickwork`` script's own folder is what Python puts there)."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    return here


def import_modules(modules: Sequence[str]) -> None:
    """Import the --import modules, finding them in the working directory first as uvicorn and
    celery do (the ``tickwork`` script's own folder is what Python puts on ``sys.path``).
    A module that cannot be imported is one line naming it, not a traceback."""
    here = working_directory_on_path()
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ValidationError("--import", f"cannot import {name}: {exc} (looked in "
                                  f"{here} and the installed packages)") from None
        except Exception as exc:  # the user's module may raise anything
            raise ValidationError("--import", f"importing {name} failed: "
                                  f"{type(exc).__name__}: {exc}") from None
