"""``tickwork namespaces list|set``: namespaces (tenants) with their quotas and usage."""

from __future__ import annotations

import click

from tickwork.cli.common import open_client
from tickwork.cli.options import Group, Target, examples, json_flag, store_options
from tickwork.cli.output import print_json, print_table
from tickwork.drivers.namespaces import NamespaceInfo
from tickwork.errors import ValidationError

UNLIMITED = "none"


@click.group(cls=Group, epilog=examples(
    "tickwork namespaces list",
    "tickwork namespaces set acme --max-jobs 500 --max-runs-per-hour 10000",
    "tickwork namespaces set acme --max-payload-bytes none   # lift a quota"))
def namespaces() -> None:
    """Namespaces (tenants): jobs and tokens belong to one; each may have quotas."""


def namespace_json(n: NamespaceInfo) -> dict[str, object]:
    return {"name": n.name, "max_jobs": n.quotas.max_jobs,
            "max_runs_per_hour": n.quotas.max_runs_per_hour,
            "max_payload_bytes": n.quotas.max_payload_bytes, "jobs": n.jobs,
            "runs_this_hour": n.runs_this_hour}


def _of(used: int, limit: int | None) -> str:
    return f"{used}/{limit}" if limit is not None else f"{used}"


@namespaces.command("list", epilog=examples("tickwork namespaces list",
                                            "tickwork namespaces list --json"))
@json_flag()
@store_options(api=True)
async def list_namespaces(target: Target, as_json: bool) -> int:
    """Namespaces with their jobs and runs this hour (of the quota, if set), and the largest
    payload they take. A token of one namespace lists its own only."""
    client = await open_client(target)
    try:
        found = await client.list_namespaces()
    finally:
        await client.close()
    if as_json:
        print_json([namespace_json(n) for n in found])
    else:
        print_table(["NAMESPACE", "JOBS", "RUNS THIS HOUR", "MAX PAYLOAD BYTES"],
                    [[n.name, _of(n.jobs, n.quotas.max_jobs),
                      _of(n.runs_this_hour, n.quotas.max_runs_per_hour),
                      "-" if n.quotas.max_payload_bytes is None
                      else str(n.quotas.max_payload_bytes)] for n in found])
    return 0


def _quota(value: str | None, option: str) -> int | None:
    if value is None or value.lower() == UNLIMITED:
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ValidationError(option, f"must be a whole number from 0, or '{UNLIMITED}' for "
                              f"no limit (got {value!r})")
    return number


@namespaces.command("set", epilog=examples(
    "tickwork namespaces set acme --max-jobs 500",
    "tickwork namespaces set acme --max-runs-per-hour 10000 --max-payload-bytes 65536",
    "tickwork namespaces set acme --max-jobs none   # no limit"))
@click.argument("name")
@click.option("--max-jobs", metavar="N", help="jobs defined at once ('none': no limit)")
@click.option("--max-runs-per-hour", metavar="N",
              help="attempts started per UTC clock hour ('none': no limit)")
@click.option("--max-payload-bytes", metavar="N",
              help="a job's payload as compact JSON ('none': no limit)")
@json_flag("print the namespace as JSON")
@store_options(api=True)
async def set_quotas(*, target: Target, name: str, max_jobs: str | None,
                     max_runs_per_hour: str | None, max_payload_bytes: str | None,
                     as_json: bool) -> int:
    """Set quotas of namespace NAME; the ones not given keep their values."""
    given = {"max_jobs": max_jobs, "max_runs_per_hour": max_runs_per_hour,
             "max_payload_bytes": max_payload_bytes}
    changes = {key: _quota(value, "--" + key.replace("_", "-"))
               for key, value in given.items() if value is not None}
    if not changes:
        raise ValidationError("", "give at least one of --max-jobs, --max-runs-per-hour, "
                              "--max-payload-bytes")
    client = await open_client(target)
    try:
        info = await client.set_quotas(name, changes)
    finally:
        await client.close()
    if as_json:
        print_json(namespace_json(info))
    else:
        print(f"namespace {info.name}: jobs {_of(info.jobs, info.quotas.max_jobs)}, runs this "
              f"hour {_of(info.runs_this_hour, info.quotas.max_runs_per_hour)}, max payload "
              f"{'-' if info.quotas.max_payload_bytes is None else info.quotas.max_payload_bytes}"
              " bytes")
    return 0
