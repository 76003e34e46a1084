"""``tickwork enqueue``: one-off jobs without a name, with an optional dedupe key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tickwork.cli.common import open_client, read_documents
from tickwork.cli.options import Target, examples, json_flag, store_options
from tickwork.cli.output import print_json
from tickwork.document.render import job_json, when
from tickwork.drivers.enqueue import Enqueued
from tickwork.errors import ValidationError


@click.command("enqueue", epilog=examples(
    "tickwork enqueue http --payload '{\"method\": \"POST\", \"url\": "
    "\"https://example.org/hook\"}'",
    "tickwork enqueue email --payload @receipt.json --at 2030-01-01T09:00:00Z "
    "--dedupe-key receipt-42 --dedupe-window 1h",
    "tickwork enqueue --requests requests.ndjson   # many, in one transaction"))
@click.argument("kind", required=False, metavar="KIND")
@click.option("--payload", metavar="JSON", help="the payload as a JSON object, or @FILE")
@click.option("--at", metavar="TIME", help="when it runs, RFC 3339 (default: now)")
@click.option("--queue", metavar="QUEUE", help="the queue (default: default)")
@click.option("--retry", metavar="JSON", help='the retry policy, e.g. {"max_attempts": 5}')
@click.option("--name", metavar="NAME", help="a name of your own (default: KIND-<uuid7>)")
@click.option("--dedupe-key", metavar="KEY", help="return the job holding KEY, if any, "
              "instead of creating one")
@click.option("--dedupe-window", metavar="DURATION",
              help="how long the key is held: seconds or 30s/15m/1h/1d (default 1h)")
@click.option("--requests", "source", metavar="FILE", help="enqueue requests (a JSON object, an "
              "array or NDJSON; - reads standard input) instead of KIND and the options")
@json_flag("print the result as JSON (an array for --requests)")
@store_options(api=True)
async def enqueue(*, target: Target, kind: str | None, payload: str | None, at: str | None,
                  queue: str | None, retry: str | None, name: str | None,
                  dedupe_key: str | None, dedupe_window: str | None, source: str | None,
                  as_json: bool) -> int:
    """Enqueue a one-off job of KIND: no name needed, it runs once at --at (default: now).

    With --dedupe-key, an enqueue while the key is held (for --dedupe-window after the
    enqueue that took it) prints the job holding it and creates nothing. Exit status 0 either
    way; 2 for a bad request.
    """
    if source is not None:
        if kind is not None or payload is not None:
            raise ValidationError("--requests", "give KIND and --payload, or --requests, "
                                  "not both")
        requests = read_documents(source)
    else:
        if kind is None:
            raise ValidationError("KIND", "is required (or --requests FILE)")
        request: dict[str, Any] = {"kind": kind, "payload": _json_option(payload, "--payload")
                                   if payload is not None else {}}
        for field, value in (("at", at), ("queue", queue), ("name", name),
                             ("dedupe_key", dedupe_key),
                             ("dedupe_window_seconds", dedupe_window)):
            if value is not None:
                request[field] = value
        if retry is not None:
            request["retry"] = _json_option(retry, "--retry")
        requests = [request]
    client = await open_client(target, create=True)
    try:
        done = await client.enqueue_many(requests)
    except ValidationError as exc:
        if len(requests) == 1 and exc.field.startswith("[0]"):
            raise ValidationError(exc.field.removeprefix("[0]").removeprefix("."),
                                  exc.reason) from None
        raise
    finally:
        await client.close()
    if as_json:
        items = [{"created": d.created, "job": job_json(d.job)} for d in done]
        print_json(items if source is not None else items[0])
        return 0
    for result in done:
        _print(result)
    return 0


def _print(result: Enqueued) -> None:
    job = result.job
    if result.created:
        print(f"enqueued job {job.spec.name} ({job.id}), runs at {when(job.next_run_at)}")
    else:
        print(f"dedupe key held by job {job.spec.name} ({job.id}): nothing enqueued")


def _json_option(value: str, option: str) -> Any:
    """A JSON object given inline, or in a file as @FILE."""
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(option, f"cannot read {value[1:]}: {exc}") from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(option, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(parsed, dict):
        raise ValidationError(option, "must be a JSON object")
    return parsed
