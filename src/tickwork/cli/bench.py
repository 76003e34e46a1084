"""``tickwork bench w1|w2|w3``: the workloads of DESIGN §6 on a deployment started for the run.
``tickwork bench http``: the HTTP executor's client against the alternatives (no deployment).

The figures come from a record the executed jobs write themselves (tickwork.bench.jobs),
never from the store's tables. Exit status 0 when nothing was lost, duplicated or started
early; 1 otherwise (the figures are printed either way); 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from tickwork.errors import ValidationError

DEFAULT_DATABASE = "sqlite:"  # a fresh SQLite file in the run's directory


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser(
        "bench", help="measure throughput, lateness, lost and duplicated runs on a deployment "
        "started for the run (see docs/benchmarks.md)")
    workloads = bench.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")

    w1 = workloads.add_parser("w1", help="burst: N one-off no-op jobs all due at one instant")
    _common(w1)
    w1.add_argument("--jobs", type=_positive, default=20_000, help="how many (default 20000)")
    w1.add_argument("--timeout", type=_positive, default=300,
                    help="seconds after T to wait for the drain (default 300)")
    w1.add_argument("--against", metavar="PEER", type=_executable,
                    help="a peer's W1 script (e.g. ../shared/peers/pgqueuer-w1): run it and "
                    "tickwork in turn, --rounds times, and print the ratio of the medians")
    w1.add_argument("--rounds", type=_positive, default=2,
                    help="with --against: rounds of the peer then tickwork (default 2)")
    w1.add_argument("--steady", metavar="RATE", type=_positive, default=0,
                    help="also N one-off jobs a second due evenly from T-1s, whose start "
                    "lateness is reported apart (the work kept on time while a burst drains)")
    w1.add_argument("--steady-seconds", type=_positive, default=10,
                    help="with --steady: how long the steady stream lasts (default 10)")

    w2 = workloads.add_parser("w2", help="a day in ten minutes: a compressed load profile "
                              "with spike minutes")
    _common(w2)
    w2.add_argument("--preset", choices=("ci", "full"), default="ci",
                    help="ci: 15 minutes, one spike, ~2.5 min; full: an hour, two spikes, "
                    "~10 min (default ci); the options below override it")
    w2.add_argument("--hour", type=int, choices=range(24), metavar="H",
                    help="the hour of the day whose base load to play (default 9)")
    w2.add_argument("--start-minute", type=int, metavar="M", help="first minute played")
    w2.add_argument("--end-minute", type=int, metavar="M", help="the minute the play stops at")
    w2.add_argument("--heavy-minutes", metavar="LIST", help="spike minutes, e.g. 5,30")
    w2.add_argument("--spike", metavar="N|LO-HI",
                    help="jobs in each spike minute (default 15000-20000)")
    w2.add_argument("--per-day", type=_positive, metavar="N",
                    help="base load, jobs a day (default 1000000)")
    w2.add_argument("--compression", type=float, metavar="X",
                    help="time compression: a minute lasts 60/X seconds (default 6)")
    w2.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    w2.add_argument("--plot", metavar="FILE.svg", help="write a plot of lateness over time")

    w3 = workloads.add_parser("w3", help="recurring: cron (with seconds) and interval jobs "
                              "for a while")
    _common(w3)
    w3.add_argument("--jobs", type=_positive, default=10_000, help="how many (default 10000)")
    w3.add_argument("--duration", type=_positive, default=180,
                    help="seconds measured (default 180)")
    w3.add_argument("--plot", metavar="FILE.svg", help="write a plot of lateness over time")
    w3.add_argument("--idle-jobs", type=_non_negative, default=0, metavar="N",
                    help="N one-off jobs defined alongside the recurring load, created first "
                    "(bulk path, in batches); see --idle-due (default 0)")
    w3.add_argument("--idle-due", choices=("later", "window"), default="later",
                    help="later: due a day after the run, so never planned during it (the "
                    "processes' memory must not grow with N); window: due spread evenly over "
                    "the measured window, so the planner plans each (default later)")
    http = workloads.add_parser(
        "http", help="the HTTP executor's client against the alternatives: requests/s, CPU "
        "per request and latency of POSTs to a local server (no deployment)")
    http.add_argument("--requests", type=_positive, default=20_000,
                      help="POST requests per client (default 20000)")
    http.add_argument("--concurrency", type=_positive, default=64,
                      help="requests in flight at once, over as many kept-alive connections "
                      "(default 64)")
    http.add_argument("--clients", default="aiohttp,httpx,executor", metavar="LIST",
                      help="which to measure, in order (default aiohttp,httpx,executor; "
                      "executor: tickwork's HttpExecutor end to end)")
    http.add_argument("--json", action="store_true", help="print the figures as JSON")
    http.add_argument("--quiet", action="store_true", help="no progress output")
    http.set_defaults(handler=run_http_bench)
    bench.set_defaults(handler=run_bench)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database", metavar="URL", default=DEFAULT_DATABASE,
                   help="sqlite:///NEW-FILE (default: a fresh file in a temporary directory), "
                   "or postgresql://... of a server: a database tickwork_bench_<random> is "
                   "created on it for the run and dropped after")
    p.add_argument("--redis", metavar="URL", help="Redis dispatch: passed to every process")
    p.add_argument("--schedulers", type=_positive, default=1,
                   help="tickwork scheduler processes (PostgreSQL; default 1)")
    p.add_argument("--workers", type=_positive, default=2,
                   help="tickwork worker processes (PostgreSQL; default 2). SQLite is "
                   "single-process: one tickwork run does everything")
    p.add_argument("--concurrency", type=_positive,
                   help="concurrency of each worker's queue (default: the processes' own "
                   "default, as a user starts them)")
    p.add_argument("--process-log-level",
                   help="the processes' log level (default: their own, as a user starts them)")
    p.add_argument("--keep", action="store_true",
                   help="keep the database and the run's directory (record, logs)")
    p.add_argument("--profile", metavar="DIR", type=_absolute,
                   help="run each process under a CPU-time sampling profiler, writing "
                   "DIR/<kind>-<n>.prof (collapsed stacks) and .prof.top")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def _executable(text: str) -> Path:
    path = Path(os.path.abspath(text))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise argparse.ArgumentTypeError(f"{text} is not an executable file")
    return path


def _absolute(text: str) -> Path:
    return Path(os.path.abspath(text))


def _positive(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


async def run_bench(args: argparse.Namespace) -> int:
    level = args.process_log_level
    if level is not None and level.lower() not in ("debug", "info", "warning", "error"):
        raise ValidationError("--process-log-level", "must be debug, info, warning or error")
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
    deployment = Deployment(
        database=args.database, workdir=workdir, redis=args.redis, schedulers=args.schedulers,
        workers=args.workers, concurrency=args.concurrency,
        log_level=None if level is None else level.lower(), keep=args.keep,
        profile_dir=args.profile)
    progress = Progress(args.workload.upper(), 1, enabled=not args.quiet)
    async with bench_run(deployment, progress=progress,
                         tag=f"bench-{uuid.uuid4().hex[:6]}") as bench:
        result = await _workload(args, bench)
        result["notes"] = bench.notes
    result = {**result, "deployment": deployment.describe(), "machine": machine()}
    result["ok"] = all(result[k] == 0 for k in ("lost", "duplicated", "early"))
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

        steady = int(args.steady * args.steady_seconds)
        bench.progress.total = args.jobs + steady
        return await run_w1(bench, jobs=args.jobs, drain_timeout=args.timeout,
                            steady_rate=args.steady, steady_seconds=args.steady_seconds)
    if args.workload == "w2":
        from tickwork.bench.w2 import profile_from_args, run_w2  # noqa: PLC0415

        profile = profile_from_args(args)
        return await run_w2(bench, profile, plot=args.plot)
    from tickwork.bench.w3 import run_w3  # noqa: PLC0415

    return await run_w3(bench, jobs=args.jobs, duration=args.duration, plot=args.plot,
                        idle_jobs=args.idle_jobs, idle_due=args.idle_due)


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
