"""A deployment to measure: a fresh database, and the processes of DESIGN §2 started on it.

- SQLite is single-process: one ``tickwork run --no-api`` (planner, rescuer and workers in one
  process); ``--schedulers`` and ``--workers`` do not apply.
- PostgreSQL: a database of its own per run (``tickwork_bench_<random>``), migrated, then
  ``--schedulers`` ``tickwork scheduler`` and ``--workers`` ``tickwork worker`` processes;
  the database is dropped at the end unless ``--keep``.
- ``--redis URL`` is passed on to every process started; a version whose processes do not
  take it yet is reported before anything starts.

Processes log to files in the run's directory (never to a pipe the bench could forget to
drain), and stop with SIGTERM, gracefully (G10), so the record is complete when they exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import LiteralString

from tickwork.config import DEFAULT_CONCURRENCY
from tickwork.drivers import POSTGRES, backend_of
from tickwork.drivers.sqlite.connection import path_from_url
from tickwork.errors import ConfigError, StoreUnavailable

BENCH_DB_PREFIX = "tickwork_bench_"
TICKWORK = [sys.executable, "-m", "tickwork.cli.main"]
STOP_SECONDS = 60.0


def is_postgres(url: str) -> bool:
    return backend_of(url) == POSTGRES


def replace_database(url: str, name: str) -> str:
    """``url`` with its database name replaced (query string kept)."""
    base, _, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}" + (f"?{query}" if query else "")


@dataclass
class Child:
    kind: str  # scheduler | worker | service
    argv: list[str]
    log: Path
    proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def status(self, field_name: str) -> int | None:
        """A ``/proc/<pid>/status`` figure in KiB (VmHWM: peak RSS, VmRSS: now)."""
        try:
            text = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
        return None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Deployment:
    database: str  # as the user gave it (for PostgreSQL: the server to create a database on)
    workdir: Path
    redis: str | None = None
    schedulers: int = 1
    workers: int = 2
    concurrency: int | None = None  # None: the processes' default, as a user starts them
    log_level: str | None = None  # None: the processes' default
    keep: bool = False
    profile_dir: Path | None = None  # run each child under cProfile, writing here
    env: dict[str, str] = field(default_factory=dict)  # more environment (publish: brokers)
    url: str = ""  # the database this run uses
    children: list[Child] = field(default_factory=list)
    keep_workdir: bool = False  # set when something went wrong: its logs are evidence
    _created_db: str | None = None

    @property
    def kind(self) -> str:
        base = "postgres" if is_postgres(self.database) else "sqlite"
        return f"{base}+redis" if self.redis else base

    @property
    def record_dir(self) -> Path:
        return self.workdir / "record"

    def describe(self) -> dict[str, object]:
        if is_postgres(self.database):
            procs: dict[str, object] = {"schedulers": self.schedulers, "workers": self.workers}
        else:
            procs = {"service": 1}
        return {"kind": self.kind, **procs,
                "concurrency": self.concurrency or f"default ({DEFAULT_CONCURRENCY})",
                "database": self.url.rsplit("@", 1)[-1], "redis": self.redis is not None,
                "log_level": self.log_level or "default (info)"}

    # -- the database ------------------------------------------------------------------------

    def check(self) -> None:
        """Refuse what cannot work, before anything is created."""
        if self.redis is not None and not is_postgres(self.database):
            raise ConfigError("redis", "Redis dispatch needs PostgreSQL as the store "
                                  "(--database postgresql://...)")
        if not is_postgres(self.database):
            path = path_from_url(self.database) if self.database != "sqlite:" else ""
            if path and path != ":memory:" and Path(path).exists():
                raise ConfigError("database", f"{path} exists; the benchmark needs a fresh "
                                  "database: give a path that does not exist")
            if path == ":memory:":
                raise ConfigError("database", "an in-memory SQLite database cannot be shared "
                                  "with a service process; give a file path")

    async def create_database(self) -> None:
        self.record_dir.mkdir(parents=True, exist_ok=True)
        if not is_postgres(self.database):
            path = path_from_url(self.database) if self.database != "sqlite:" else ""
            self.url = f"sqlite:///{path or self.workdir / 'bench.db'}"
            return
        name = f"{BENCH_DB_PREFIX}{uuid.uuid4().hex[:10]}"
        await asyncio.to_thread(_admin_sql, self.database, "CREATE DATABASE {}", name)
        self._created_db = name
        self.url = replace_database(self.database, name)

    async def drop_database(self) -> None:
        if self.keep:
            return
        if self._created_db is not None:
            name, self._created_db = self._created_db, None
            assert name.startswith(BENCH_DB_PREFIX)
            await asyncio.to_thread(_admin_sql, self.database,
                                    "DROP DATABASE IF EXISTS {} WITH (FORCE)", name)
        elif self.url.startswith("sqlite:///") and self.database != "sqlite:":
            await asyncio.to_thread(_remove_sqlite_files, path_from_url(self.url))

    # -- the processes -----------------------------------------------------------------------

    def _argv(self, command: str, *extra: str) -> list[str]:
        argv = [*TICKWORK, command, "--database", self.url, *extra]
        if self.log_level is not None:
            argv += ["--log-level", self.log_level]
        if self.redis is not None:
            argv += ["--redis", self.redis]
        return argv

    def plan(self) -> list[Child]:
        queues = [] if self.concurrency is None else ["--queues", f"default:{self.concurrency}"]
        logs = self.workdir / "logs"
        if not is_postgres(self.database):
            return [Child("service", self._argv("run", "--no-api", *queues),
                          logs / "service.log")]
        children = [Child("scheduler", self._argv("scheduler", "--scheduler-id",
                                                  f"bench-scheduler-{i}"),
                          logs / f"scheduler-{i}.log") for i in range(self.schedulers)]
        children += [Child("worker", self._argv("worker", *queues, "--worker-id",
                                                f"bench-worker-{i}"),
                           logs / f"worker-{i}.log") for i in range(self.workers)]
        return children

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        allowed = [m for m in env.get("TICKWORK_PYTHON_ALLOWED_MODULES", "").split(",") if m]
        env["TICKWORK_PYTHON_ALLOWED_MODULES"] = ",".join([*allowed, "tickwork.bench"])
        env.pop("TICKWORK_DATABASE_URL", None)
        env.pop("TICKWORK_REDIS_URL", None)
        return {**env, **self.env}

    async def start(self) -> None:
        env = self.environment()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        for n, child in enumerate(self.plan()):
            argv = child.argv
            if self.profile_dir is not None:
                self.profile_dir.mkdir(parents=True, exist_ok=True)
                out = self.profile_dir / f"{child.kind}-{n}.prof"
                argv = [sys.executable, "-m", "tickwork.bench.cpuprofile", str(out), *argv[1:]]
            with child.log.open("wb") as log:
                child.proc = await asyncio.create_subprocess_exec(
                    *argv, env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=log, stderr=log, start_new_session=True)
            self.children.append(child)

    def check_alive(self) -> None:
        for child in self.children:
            if child.proc is not None and child.proc.returncode is not None:
                raise StoreUnavailable(
                    f"the {child.kind} process exited early (status {child.proc.returncode}); "
                    f"its log ({child.log}):\n{child.log_tail()}")

    def peak_memory(self) -> dict[str, list[int]]:
        """Peak RSS (KiB) of each process, by kind, read while they still run."""
        out: dict[str, list[int]] = {}
        for child in self.children:
            hwm = child.status("VmHWM")
            if hwm is not None:
                out.setdefault(child.kind, []).append(hwm)
        return out

    def process_ids(self) -> dict[str, list[int]]:
        """The pids to read CPU time of, by kind: the processes started, and the PostgreSQL
        backends serving this run's database if they are processes of this machine."""
        out: dict[str, list[int]] = {}
        for child in self.children:
            if child.proc is not None and child.proc.returncode is None:
                out.setdefault(child.kind, []).append(child.pid)
        if is_postgres(self.url):
            out["postgres"] = _local_backends(self.url)
        return out

    async def stop(self) -> None:
        """SIGTERM (graceful), then SIGKILL of the process group of a child that hangs."""
        running = [c.proc for c in self.children if c.proc and c.proc.returncode is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in running:
            try:
                await asyncio.wait_for(proc.wait(), STOP_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


def _remove_sqlite_files(path: str) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        with contextlib.suppress(OSError):
            Path(path + suffix).unlink()


def _local_backends(url: str) -> list[int]:
    """Backend pids of ``url``'s database that are PostgreSQL processes here (none for a
    server on another machine, whose pids mean nothing here)."""
    import psycopg  # noqa: PLC0415  (the postgres extra, only for PostgreSQL runs)

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            pids = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")]
    except psycopg.Error:
        return []
    local = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"postgres"):
                local.append(pid)
    return local


def _admin_sql(server_url: str, template: LiteralString, name: str) -> None:
    try:
        import psycopg  # noqa: PLC0415  (the postgres extra, only for PostgreSQL runs)
        from psycopg import sql  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigError("database", "PostgreSQL needs the postgres extra: "
                          "pip install 'tickwork[postgres]'") from exc
    try:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL(template).format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise StoreUnavailable(f"PostgreSQL at {server_url.rsplit('@', 1)[-1]}: {exc}") from exc
