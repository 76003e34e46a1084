"""``tickwork jobs sync``: the jobs declared in code (``@tickwork.job``) brought into a store,
as ``tickwork run --import`` does at start-up: for the postgres deployment's deploy step."""

from __future__ import annotations

import click

from tickwork.cli.common import import_modules, open_client
from tickwork.cli.options import Target, examples, json_flag, store_options
from tickwork.cli.output import print_json
from tickwork.client.declared import sync_declared
from tickwork.errors import ValidationError
from tickwork.registry import registered


@click.command("sync", epilog=examples(
    "tickwork jobs sync --import myapp.jobs --dry-run",
    "tickwork jobs sync --import myapp.jobs --import myapp.reports "
    "--database postgresql://tickwork@db.internal/tickwork",
    "tickwork jobs sync --import myapp.jobs --api https://tickwork.example.org --json"))
@click.option("--import", "imports", multiple=True, required=True, metavar="MODULE",
              help="a module whose @tickwork.job functions to sync (repeatable); found in the "
              "working directory first")
@click.option("--dry-run", is_flag=True, help="only say what would be created or updated")
@json_flag("print what was created, updated and left alone as JSON")
@store_options(api=True)
async def sync_jobs(*, target: Target, imports: tuple[str, ...], dry_run: bool,
                    as_json: bool) -> int:
    """Create the declared jobs that do not exist and update those whose declaration changed.

    The jobs are those declared in the modules and the modules below them. Jobs are matched
    by name; one no longer declared is left as it is (delete it with
    `tickwork jobs delete`). Workers need the modules in python_allowed_modules to run them.
    """
    import_modules(imports)
    docs = registered(imports)
    if not docs:
        raise ValidationError("--import", f"no @tickwork.job functions in {', '.join(imports)}")
    client = await open_client(target, create=True)
    try:
        synced = await sync_declared(client, docs, dry_run=dry_run)
    finally:
        await client.close()
    if as_json:
        print_json({"dry_run": dry_run, "created": synced.created, "updated": synced.updated,
                    "unchanged": synced.unchanged})
        return 0
    would = "would be " if dry_run else ""
    for word, names in (("created", synced.created), ("updated", synced.updated)):
        for name in names:
            print(f"{would}{word}: {name}")
    print(f"{len(synced.created)} {would}created, {len(synced.updated)} {would}updated, "
          f"{len(synced.unchanged)} unchanged")
    return 0
