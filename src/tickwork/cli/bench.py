"""``tickwork bench w1|w2|w3|w4``: the workloads of DESIGN §6 on a deployment started for the run;
``tickwork bench publish``: publish jobs to a broker, counted by a consumer the bench runs.
``tickwork bench http``: the HTTP executor's client against the alternatives (no deployment).

The figures come from a record the executed jobs write themselves (tickwork.bench.jobs),
never from the store's tables. Exit status 0 when nothing was lost, duplicated or started
early; 1 otherwise (the figures are printed either way); 2 for bad options.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tickwork.cli.options import Group, examples
from tickwork.errors import ValidationError
from tickwork.schedules import parse_duration

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DATABASE = "sqlite:"  # a fresh SQLite file in the run's directory
CONSUMER_START_SECONDS = 20.0  # bench publish: the consumer reaches its broker within this


@click.group(cls=Group, epilog=examples(
    "tickwork bench w1 --jobs 20000",
    "tickwork bench w1 --database postgresql://postgres@127.0.0.1/postgres --workers 2 --json",
    "tickwork bench w3 --duration 60 --plot w3.svg",
    "tickwork bench w4 --database postgresql://postgres@127.0.0.1/postgres --redis redis://127.0.0.1:6379/0",
    "tickwork bench http --requests 5000"))
def bench() -> None:
    """Benchmarks: throughput, lateness, lost and duplicated runs.

    Each workload runs on a deployment started for the run (see docs/benchmarks.md).

    Exits 0 when nothing was lost, duplicated or started early, 1 otherwise; the figures
    are printed either way.
    """


POSITIVE = click.IntRange(min=1)


def _executable(ctx: click.Context, param: click.Parameter, text: str | None) -> Path | None:
    if text is None:
        return None
    path = Path(os.path.abspath(text))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise click.BadParameter(f"{text} is not an executable file", ctx, param)
    return path


def _absolute(ctx: click.Context, param: click.Parameter, text: str | None) -> Path | None:
    return None if text is None else Path(os.path.abspath(text))


def _common(command: F) -> F:
    for option in reversed((
        click.option("--database", metavar="URL", default=DEFAULT_DATABASE,
                     help="sqlite:///NEW-FILE (default: a fresh file in a temporary "
                     "directory), or postgresql://... of a server: a database "
                     "tickwork_bench_<random> is created on it for the run and dropped after"),
        click.option("--redis", metavar="URL", help="Redis dispatch: passed to every process"),
        click.option("--schedulers", type=POSITIVE, default=1, show_default=True,
                     help="tickwork scheduler processes (PostgreSQL)"),
        click.option("--workers", type=POSITIVE, default=2, show_default=True,
                     help="tickwork worker processes (PostgreSQL). SQLite is single-process: "
                     "one tickwork run does everything"),
        click.option("--concurrency", type=POSITIVE,
                     help="concurrency of each worker's queue (default: the processes' own "
                     "default, as a user starts them)"),
        click.option("--process-log-level", metavar="LEVEL",
                     help="the processes' log level (default: their own, as a user starts "
                     "them)"),
        click.option("--keep", is_flag=True,
                     help="keep the database and the run's directory (record, logs)"),
        click.option("--profile", metavar="DIR", callback=_absolute,
                     help="run each process under a CPU-time sampling profiler, writing "
                     "DIR/<kind>-<n>.prof (collapsed stacks) and .prof.top"),
        click.option("--json", "json", is_flag=True, help="print the figures as JSON"),
        click.option("--quiet", is_flag=True, help="no progress output"),
    )):
        command = option(command)
    return command


@bench.command("w1", epilog=examples(
    "tickwork bench w1",
    "tickwork bench w1 --jobs 100000 --database postgresql://postgres@127.0.0.1/postgres",
    "tickwork bench w1 --against ../shared/peers/pgqueuer-w1 --rounds 3",
    "tickwork bench w1 --jobs 20000 --steady 200",
    "tickwork bench w1 --jobs 20000 --global-limit 64"))
@_common
@click.option("--jobs", type=POSITIVE, default=20_000, show_default=True, help="how many jobs")
@click.option("--timeout", type=POSITIVE, default=300, show_default=True,
              help="seconds after T to wait for the drain")
@click.option("--against", metavar="PEER", callback=_executable,
              help="a peer's W1 script (e.g. ../shared/peers/pgqueuer-w1): run it and "
              "tickwork in turn, --rounds times, and print the ratio of the medians")
@click.option("--rounds", type=POSITIVE, default=2, show_default=True,
              help="with --against: rounds of the peer then tickwork")
@click.option("--steady", metavar="RATE", type=POSITIVE,
              help="also RATE one-off jobs a second due evenly from T-1s, whose start "
              "lateness is reported apart (the work kept on time while a burst drains)")
@click.option("--steady-seconds", type=POSITIVE, default=10, show_default=True,
              help="with --steady: how long the steady stream lasts")
@click.option("--global-limit", metavar="N", type=POSITIVE,
              help="limit the jobs' queue to N running at once across every worker "
              "(docs/limits.md): what a limit costs on the claim path")
async def w1(**params: Any) -> int:
    """Burst: N one-off no-op jobs all due at one instant; creation rate, drain time and
    lateness."""
    return await run_bench(_namespace("w1", params))


@bench.command("w2", epilog=examples(
    "tickwork bench w2",
    "tickwork bench w2 --preset full --plot w2.svg",
    "tickwork bench w2 --preset full --retention 3m --size-plot w2-size.svg --json",
    "tickwork bench w2 --heavy-minutes 5,30 --spike 15000-20000"))
@_common
@click.option("--preset", type=click.Choice(["ci", "full"]), default="ci", show_default=True,
              help="ci: 15 minutes, one spike, ~2.5 min; full: an hour, two spikes, ~10 min; "
              "the options below override it")
@click.option("--hour", type=click.IntRange(0, 23), metavar="H",
              help="the hour of the day whose base load to play (default 9)")
@click.option("--start-minute", type=int, metavar="M", help="first minute played")
@click.option("--end-minute", type=int, metavar="M", help="the minute the play stops at")
@click.option("--heavy-minutes", metavar="LIST", help="spike minutes, e.g. 5,30")
@click.option("--spike", metavar="N|LO-HI",
              help="jobs in each spike minute (default 15000-20000)")
@click.option("--per-day", type=POSITIVE, metavar="N",
              help="base load, jobs a day (default 1000000)")
@click.option("--compression", type=float, metavar="X",
              help="time compression: a minute lasts 60/X seconds (default 6)")
@click.option("--seed", type=int, default=1, show_default=True, help="random seed")
@click.option("--plot", metavar="FILE.svg", help="write a plot of lateness over time")
@click.option("--retention", metavar="DURATION",
              help="e.g. 3m: the processes purge finished one-off jobs and prune their history "
              "this long after they finished (a pruner pass every quarter of it), and the "
              "jobs, occurrences and attempts tables are sampled to show they stay bounded")
@click.option("--size-plot", metavar="FILE.svg",
              help="write a plot of the tables' bytes and rows over time")
async def w2(**params: Any) -> int:
    """A day in ten minutes: a compressed load profile with spike minutes."""
    return await run_bench(_namespace("w2", params))


@bench.command("w3", epilog=examples(
    "tickwork bench w3",
    "tickwork bench w3 --jobs 10000 --duration 300 --plot w3.svg",
    "tickwork bench w3 --idle-jobs 100000 --idle-due later"))
@_common
@click.option("--jobs", type=POSITIVE, default=10_000, show_default=True, help="how many jobs")
@click.option("--duration", type=POSITIVE, default=180, show_default=True,
              help="seconds measured")
@click.option("--plot", metavar="FILE.svg", help="write a plot of lateness over time")
@click.option("--idle-jobs", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="N", help="N one-off jobs defined alongside the recurring load, created "
              "first (bulk path, in batches); see --idle-due")
@click.option("--idle-due", type=click.Choice(["later", "window"]), default="later",
              show_default=True,
              help="later: due a day after the run, so never planned during it (the "
              "processes' memory must not grow with N); window: due spread evenly over the "
              "measured window, so the planner plans each")
async def w3(**params: Any) -> int:
    """Recurring: cron (with seconds) and interval jobs for a while; per-tick lateness,
    missed and duplicated ticks."""
    return await run_bench(_namespace("w3", params))


@bench.command("publish", epilog=examples(
    "tickwork bench publish --broker redis --jobs 5000",
    "tickwork bench publish --broker rabbitmq --broker-url amqp://guest:guest@127.0.0.1:5672/",
    "tickwork bench publish --broker nats --database postgresql://postgres@127.0.0.1/postgres"))
@_common
@click.option("--broker", type=click.Choice(["redis", "rabbitmq", "nats", "mqtt"]),
              required=True, help="where the jobs publish")
@click.option("--broker-url", metavar="URL",
              help="the broker (default: its usual port on 127.0.0.1; redis: --redis if "
              "given)")
@click.option("--jobs", type=POSITIVE, default=5_000, show_default=True, help="how many jobs")
@click.option("--timeout", type=POSITIVE, default=300, show_default=True,
              help="seconds after T to wait for every message")
async def publish(**params: Any) -> int:
    """Publish jobs: N publish jobs all due at one instant, counted by a consumer the bench
    runs; throughput and lateness per broker."""
    return await run_bench(_namespace("publish", params))


@bench.command("w4", epilog=examples(
    "tickwork bench w4 --database postgresql://postgres@127.0.0.1/postgres "
    "--redis redis://127.0.0.1:6379/0",
    "tickwork bench w4 --jobs 28800 --duration 120 --database postgresql://... --redis redis://..."))
@_common
@click.option("--jobs", type=POSITIVE, default=288_000, show_default=True,
              help="how many interval jobs")
@click.option("--every", type=click.FloatRange(min=1.0), default=60.0, show_default=True,
              metavar="SECONDS", help="their interval; offsets spread evenly over it")
@click.option("--duration", type=POSITIVE, default=600, show_default=True,
              help="seconds measured")
@click.option("--plot", metavar="FILE.svg", help="write a plot of lateness over time")
async def w4(**params: Any) -> int:
    """Sustained: N interval jobs every minute, offsets spread over it; executions/s,
    lateness, missed and duplicated ticks (record and store), RSS over time, CPU per
    execution."""
    return await run_bench(_namespace("w4", params))


@bench.command("pgcost", epilog=examples(
    "tickwork bench pgcost --database postgresql://postgres@127.0.0.1:5433/postgres",
    "tickwork bench pgcost --database postgresql://... --redis redis://... --json"))
@_common
@click.option("--jobs", type=POSITIVE, default=2000, show_default=True,
              help="how many interval jobs")
@click.option("--every", type=click.FloatRange(min=1.0), default=10.0, show_default=True,
              metavar="SECONDS", help="their interval; offsets spread evenly over it")
@click.option("--duration", type=POSITIVE, default=30, show_default=True,
              help="seconds of ticks measured (the jobs end after it)")
async def pgcost(**params: Any) -> int:
    """What one execution costs PostgreSQL: WAL bytes, rows per table, statements (a count,
    not a speed; run it on a server nothing else writes to)."""
    return await run_bench(_namespace("pgcost", params))


@bench.command("http", epilog=examples(
    "tickwork bench http",
    "tickwork bench http --requests 5000 --concurrency 32 --clients aiohttp,executor --json"))
@click.option("--requests", type=POSITIVE, default=20_000, show_default=True,
              help="POST requests per client")
@click.option("--concurrency", type=POSITIVE, default=64, show_default=True,
              help="requests in flight at once, over as many kept-alive connections")
@click.option("--clients", default="aiohttp,httpx,executor", show_default=True,
              metavar="LIST", help="which to measure, in order (executor: tickwork's "
              "HttpExecutor end to end)")
@click.option("--json", "json", is_flag=True, help="print the figures as JSON")
@click.option("--quiet", is_flag=True, help="no progress output")
async def http(**params: Any) -> int:
    """The HTTP executor's client against the alternatives: requests/s, CPU per request
    and latency of POSTs to a local server (no deployment)."""
    return await run_http_bench(_namespace("http", params))


def _namespace(workload: str, params: dict[str, Any]) -> argparse.Namespace:
    """The options as the workloads read them (``args.jobs``, ...)."""
    return argparse.Namespace(workload=workload, **params)


async def run_bench(args: argparse.Namespace) -> int:
    level = args.process_log_level
    if level is not None and level.lower() not in ("debug", "info", "warning", "error"):
        raise ValidationError("--process-log-level", "must be debug, info, warning or error")
    if args.workload == "w2":
        args.retention_seconds = (None if args.retention is None
                                  else parse_duration(args.retention, "--retention"))
    if getattr(args, "against", None) is not None:
        return await _run_against(args)
    result = await _run_once(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from tickwork.bench.report import table  # noqa: PLC0415  (loaded to run only)

        sys.stdout.write(table(result))
    return 0 if result["ok"] else 1


async def _run_once(args: argparse.Namespace) -> dict[str, Any]:
    """One deployment, one workload: its figures."""
    from tickwork.bench.deploy import Deployment  # noqa: PLC0415  (loaded to run only)
    from tickwork.bench.progress import Progress  # noqa: PLC0415
    from tickwork.bench.runner import bench_run, machine  # noqa: PLC0415

    workdir = Path(tempfile.mkdtemp(prefix="tickwork-bench-"))
    level = args.process_log_level
    env: dict[str, str] = {}
    if args.workload == "publish":
        from tickwork.bench.consumers import DEFAULT_URLS  # noqa: PLC0415  (loaded to run only)
        from tickwork.bench.publish import broker_env  # noqa: PLC0415

        if args.broker_url is None:
            redis = args.redis if args.broker == "redis" else None
            args.broker_url = redis or DEFAULT_URLS[args.broker]
        env = broker_env(args.broker_url)
    if args.workload == "w2" and args.retention is not None:
        from tickwork.bench.w2 import retention_env  # noqa: PLC0415  (loaded to run only)

        env = retention_env(args.retention_seconds)
    deployment = Deployment(
        database=args.database, workdir=workdir, redis=args.redis, schedulers=args.schedulers,
        workers=args.workers, concurrency=args.concurrency,
        log_level=None if level is None else level.lower(), keep=args.keep,
        profile_dir=args.profile, env=env)
    progress = Progress(args.workload.upper(), 1, enabled=not args.quiet)
    async with bench_run(deployment, progress=progress,
                         tag=f"bench-{uuid.uuid4().hex[:6]}") as bench:
        result = await _workload(args, bench)
        result["notes"] = bench.notes
    result = {**result, "deployment": deployment.describe(), "machine": machine()}
    store = result.get("store", {})
    result["ok"] = (all(result[k] == 0 for k in ("lost", "duplicated", "early"))
                    and (not store.get("checked")
                         or store["missed"] == store["duplicated"] == 0))
    if args.keep:
        result["kept"] = {"directory": str(workdir), "database": deployment.url}
    return result


async def _run_against(args: argparse.Namespace) -> int:
    from tickwork.bench import against  # noqa: PLC0415  (loaded to run only)
    from tickwork.bench.runner import machine  # noqa: PLC0415

    def say(text: str) -> None:
        if not args.quiet:
            sys.stderr.write(f"tickwork bench: {text}\n")

    result = await against.interleaved(
        args.rounds, lambda: against.run_peer(args.against, args.jobs),
        lambda: _run_once(args), say)
    result["machine"] = machine()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(against.table(result))
    return 0 if result["ok"] else 1


async def _workload(args: argparse.Namespace, bench: Any) -> dict[str, Any]:
    if args.workload == "w1":
        from tickwork.bench.w1 import run_w1  # noqa: PLC0415

        rate = args.steady or 0  # no --steady: no steady stream
        bench.progress.total = args.jobs + int(rate * args.steady_seconds)
        return await run_w1(bench, jobs=args.jobs, drain_timeout=args.timeout,
                            steady_rate=rate, steady_seconds=args.steady_seconds,
                            global_limit=args.global_limit)
    if args.workload == "w2":
        from tickwork.bench.w2 import profile_from_args, run_w2  # noqa: PLC0415

        profile = profile_from_args(args)
        return await run_w2(bench, profile, plot=args.plot, retention=args.retention_seconds,
                            size_plot=args.size_plot)
    if args.workload == "publish":
        return await _publish(args, bench)
    if args.workload == "pgcost":
        from tickwork.bench.pgcost import run_pgcost  # noqa: PLC0415

        return await run_pgcost(bench, jobs=args.jobs, duration=args.duration, every=args.every)
    if args.workload == "w4":
        from tickwork.bench.w4 import run_w4  # noqa: PLC0415

        return await run_w4(bench, jobs=args.jobs, duration=args.duration, every=args.every,
                            plot=args.plot)
    from tickwork.bench.w3 import run_w3  # noqa: PLC0415

    return await run_w3(bench, jobs=args.jobs, duration=args.duration, plot=args.plot,
                        idle_jobs=args.idle_jobs, idle_due=args.idle_due)


async def _publish(args: argparse.Namespace, bench: Any) -> dict[str, Any]:
    from tickwork.bench.consumers import open_consumer  # noqa: PLC0415  (loaded to run only)
    from tickwork.bench.publish import run_publish  # noqa: PLC0415

    consumer = open_consumer(args.broker, args.broker_url)
    try:
        async with asyncio.timeout(CONSUMER_START_SECONDS):
            await consumer.start()
    except Exception as exc:  # any client's own error: said plainly, never a traceback
        raise ValidationError("--broker-url", f"cannot consume from the {args.broker} broker "
                              f"at {args.broker_url}: {type(exc).__name__}: {exc}") from None
    bench.progress.total = args.jobs
    try:
        return await run_publish(bench, consumer, broker=args.broker, jobs=args.jobs,
                                 drain_timeout=args.timeout)
    finally:
        await consumer.close()


async def run_http_bench(args: argparse.Namespace) -> int:
    """Exit status 0 when every request was answered and reached the server, else 1."""
    from tickwork.bench.http_clients import CLIENTS, run_http, table  # noqa: PLC0415
    from tickwork.bench.runner import machine  # noqa: PLC0415

    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(clients) - set(CLIENTS))
    if not clients or unknown:
        raise ValidationError("--clients", f"must list some of {', '.join(CLIENTS)}"
                              + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    result = await run_http(requests=args.requests, concurrency=args.concurrency,
                            clients=list(dict.fromkeys(clients)), quiet=args.quiet)
    result["machine"] = machine()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(table(result))
    return 0 if result["ok"] else 1
