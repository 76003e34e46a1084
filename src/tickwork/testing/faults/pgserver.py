"""A private PostgreSQL server per test, for tests that stop or restart PostgreSQL.

The shared server serves every other test and is never stopped or restarted; a test that needs
to do that initdb's a server of its own (trust authentication, loopback only, a free port, a
small ``shared_buffers``), creates the database ``test`` on it, migrates it, and owns it:

    server = PrivatePostgres(tmp_path)
    try:
        await server.start()
        ...                                   # server.url: postgresql://postgres@127.0.0.1:N/test
        await server.restart_immediate(5)     # a crash: WAL recovery at the next start
    finally:
        await server.close()

PostgreSQL refuses to run as root, so as root the binaries run as the ``postgres`` OS user.
That user could not reach a data directory under the test's ``tmp_path`` (pytest keeps its
temporary tree ``0700``, and every new pytest run tightens it again), so the server lives in a
directory of its own under the system's temporary directory, removed by ``close()``, which
copies the server's log into ``tmp_path`` first.

Without the PostgreSQL server binaries (``/usr/lib/postgresql/<version>/bin``, or ``pg_ctl`` on
the ``PATH``) the calling test is skipped; with ``CI=true`` it fails instead.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest

from tickwork.drivers.postgres.store import PostgresStore

DATABASE = "test"
SERVER_USER = "postgres"  # the OS user the server runs as when tests run as root
BINARIES = Path("/usr/lib/postgresql")
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "shared_buffers": "'16MB'",
    "max_connections": "100",
    "max_wal_size": "'64MB'",
    "dynamic_shared_memory_type": "posix",
    "logging_collector": "off",
    "log_min_messages": "warning",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _missing(reason: str) -> NoReturn:
    message = f"a private PostgreSQL server cannot be started: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}. CI=true: a missing service is a failure here.")
    pytest.skip(message)  # raises


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb``, else ``pg_ctl``'s
    directory on the ``PATH``."""
    versions = sorted((p for p in BINARIES.glob("*/bin") if (p / "initdb").exists()),
                      key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)] or [0])
    if versions:
        return versions[-1]
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl and (Path(pg_ctl).parent / "initdb").exists():
        return Path(pg_ctl).parent
    return None


class PrivatePostgres:
    """One PostgreSQL server this test owns: ``start()``, ``stop_immediate()``,
    ``restart_immediate(down_seconds)``, ``close()``."""

    def __init__(self, tmp: Path, *, port: int | None = None) -> None:
        self.tmp = tmp
        self.port = port or free_port()
        self.bindir: Path | None = None
        self.root: Path | None = None  # data directory, socket and log live here
        self.running = False
        self._as: list[str] = []  # the prefix that runs a binary as the server's user

    @property
    def url(self) -> str:
        return self.url_of(DATABASE)

    def url_of(self, database: str) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    @property
    def data(self) -> Path:
        assert self.root is not None, "the server was never created"
        return self.root / "data"

    @property
    def log(self) -> Path:
        assert self.root is not None, "the server was never created"
        return self.root / "server.log"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> PrivatePostgres:
        """Create the server on first use (initdb, database ``test``, migrations); start it."""
        first = self.root is None
        if first:
            await self._initdb()
        await self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log))
        self.running = True
        if first:
            await self._create_database()
        return self

    async def stop_immediate(self) -> float:
        """``pg_ctl stop -m immediate``: every backend is killed at once, nothing is flushed or
        checkpointed; the next start recovers from the WAL. Returns the instant it was sent."""
        at = time.time()
        await self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "60")
        self.running = False
        return at

    async def restart_immediate(self, down_seconds: float) -> tuple[float, float]:
        """Stop in immediate mode, stay down ``down_seconds``, start again (with WAL recovery).
        Returns (stopped at, accepting connections again at)."""
        stopped = await self.stop_immediate()
        await asyncio.sleep(max(0.0, stopped + down_seconds - time.time()))
        await self.start()
        return stopped, time.time()

    async def close(self) -> None:
        """Stop the server if it runs, keep its log in ``tmp``, remove its directory."""
        if self.root is None:
            return
        if self.running:
            try:
                await self.stop_immediate()
            except AssertionError:
                pid = self._postmaster_pid()
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
        if self.log.exists():
            shutil.copyfile(self.log, self.tmp / "postgres.log")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    # -- internals ---------------------------------------------------------------------------

    async def _initdb(self) -> None:
        self.bindir = find_bindir()
        if self.bindir is None:
            _missing(f"no initdb under {BINARIES}/<version>/bin or on the PATH "
                     "(apt-get install postgresql)")
        self.root = Path(tempfile.mkdtemp(prefix="tickwork-pg-"))  # 0700, as PostgreSQL wants
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam(SERVER_USER)
            except KeyError:
                _missing(f"running as root and there is no {SERVER_USER!r} user to run it as")
            runuser = shutil.which("runuser")
            if runuser is None:
                _missing("running as root and runuser (util-linux) is not installed")
            self._as = [runuser, "-u", SERVER_USER, "--"]
            os.chown(self.root, user.pw_uid, user.pw_gid)
        await self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", SERVER_USER,
                        "-E", "UTF8", "--no-locale", "--no-sync")
        settings = {**SETTINGS, "port": str(self.port),
                    "unix_socket_directories": f"'{self.root}'"}
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# tickwork fault tests: a private, small, loopback-only server\n")
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())

    async def _create_database(self) -> None:
        async with await psycopg.AsyncConnection.connect(
                self.url_of("postgres"), autocommit=True, connect_timeout=10) as conn:
            await conn.execute(f"CREATE DATABASE {DATABASE}")
        store = PostgresStore(self.url)
        try:
            await store.migrate()
        finally:
            await store.close()

    async def _pg_ctl(self, *args: str) -> None:
        await self._run("pg_ctl", "-D", str(self.data), *args)

    async def _run(self, binary: str, *args: str) -> None:
        assert self.bindir is not None
        proc = await asyncio.create_subprocess_exec(
            *self._as, str(self.bindir / binary), *args, cwd=self.root,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True)
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise AssertionError(f"{binary} {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{out.decode(errors='replace')}{log}")

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
