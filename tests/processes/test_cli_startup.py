"""Starting a command as a user would: `tickwork run --import` from the project folder, and
one line (never a traceback) when a module or an optional extra is missing.

The commands run as the installed ``tickwork`` script does: ``python -P`` puts neither the
working directory nor the script's folder first on ``sys.path``. A missing extra is simulated
by ``sys.modules[name] = None``, which makes importing it fail as if it were not installed.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tickwork.testing.processes import Service, env_for

TICKWORK = (sys.executable, "-P", "-m", "tickwork.cli.main")
MAIN = "from tickwork.cli.main import main; sys.exit(main(sys.argv[1:]))"
PG_URL = "postgresql://postgres@127.0.0.1:1/none"  # never reached: the check comes first
REDIS_URL = "redis://127.0.0.1:1/0"


def write_project(root: Path) -> None:
    (root / "myapp").mkdir()
    (root / "myapp" / "__init__.py").write_text("")
    (root / "myapp" / "jobs.py").write_text(
        "import tickwork\n\n\n@tickwork.job(every='1h')\ndef ping() -> str:\n"
        "    return 'pong'\n")
    (root / "myapp" / "broken.py").write_text("RATIO = 1 / 0\n")


def tickwork(tmp_path: Path, *args: str, blocked: str | None = None,
             **extra: str) -> tuple[int, str, str]:
    env = env_for(tmp_path, **extra)
    env.pop("PYTHONPATH", None)
    block = f"sys.modules[{blocked!r}] = None; " if blocked else ""
    done = subprocess.run([sys.executable, "-P", "-c", f"import sys; {block}{MAIN}", *args],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    return done.returncode, done.stdout, done.stderr


async def test_run_imports_a_module_from_the_working_directory(tmp_path: Path) -> None:
    write_project(tmp_path)
    env = env_for(tmp_path)
    env.pop("PYTHONPATH", None)
    service = Service(env, "--import", "myapp.jobs", "--no-api", command=TICKWORK,
                      cwd=tmp_path)
    try:
        await service.start()
        await service.wait_for(r"created job myapp\.jobs\.ping")
        service.terminate()
        assert await service.exit_code() == 0
    finally:
        await service.close()


@pytest.mark.parametrize(("module", "message"), [
    ("nosuch.jobs", "cannot import nosuch.jobs: No module named 'nosuch' (looked in {cwd} and "
     "the installed packages)"),
    ("myapp.nosuch", "cannot import myapp.nosuch: No module named 'myapp.nosuch' (looked in "
     "{cwd} and the installed packages)"),
    ("myapp.broken", "importing myapp.broken failed: ZeroDivisionError: division by zero"),
])
def test_a_module_that_cannot_be_imported_is_one_line(tmp_path: Path, module: str,
                                                      message: str) -> None:
    write_project(tmp_path)
    code, out, err = tickwork(tmp_path, "run", "--import", module, "--no-api")
    assert (code, out) == (2, "")
    assert err == f"tickwork: error: --import: {message.format(cwd=tmp_path)}\n"
    assert not (tmp_path / "tickwork.db").exists()


REDIS_MISSING = ("tickwork: error: redis: dispatching through Redis needs the redis extra: "
                 "pip install 'tickwork[redis]'\n")


@pytest.mark.parametrize(("blocked", "args", "expected"), [
    ("redis", ("run", "--redis", REDIS_URL, "--no-api"), REDIS_MISSING),
    ("redis", ("worker", "--database", PG_URL, "--redis", REDIS_URL), REDIS_MISSING),
    ("redis", ("scheduler", "--database", PG_URL, "--redis", REDIS_URL), REDIS_MISSING),
    ("redis", ("api", "--redis", REDIS_URL), REDIS_MISSING),
    ("redis", ("jobs", "trigger", "x", "--redis", REDIS_URL), REDIS_MISSING),
    ("psycopg", ("worker", "--database", PG_URL),
     "tickwork: error: database: tickwork worker needs the postgres extra: "
     "pip install 'tickwork[postgres]'\n"),
    ("psycopg_pool", ("scheduler", "--database", PG_URL),
     "tickwork: error: database: tickwork scheduler needs the postgres extra: "
     "pip install 'tickwork[postgres]'\n"),
    ("psycopg", ("jobs", "list", "--database", PG_URL),
     "tickwork: error: database: PostgreSQL needs the postgres extra: "
     "pip install 'tickwork[postgres]'\n"),
])
def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path, blocked: str,
                                               args: tuple[str, ...], expected: str) -> None:
    if args[:2] == ("jobs", "trigger"):
        assert tickwork(tmp_path, "migrate")[0] == 0
    code, out, err = tickwork(tmp_path, *args, blocked=blocked)
    assert (code, out, err) == (2, "", expected)


def test_an_unknown_event_loop_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    code, out, err = tickwork(tmp_path, "run", "--no-api", TICKWORK_EVENT_LOOP="trio")
    assert (code, out) == (2, "")
    assert err == ("tickwork: error: TICKWORK_EVENT_LOOP: 'trio' is not an event loop "
                   "tickwork runs on: use uvloop or asyncio\n")
    assert not (tmp_path / "tickwork.db").exists()


@pytest.mark.slow
async def test_a_worker_runs_a_job_module_from_the_working_directory(
        tmp_path: Path, postgres_url: str) -> None:
    """As ``tickwork run``: a python job's module in the project folder imports in a worker
    started as the installed script, whose own folder is what Python puts on sys.path."""
    write_project(tmp_path)
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url,
                  TICKWORK_PYTHON_ALLOWED_MODULES="myapp")
    env.pop("PYTHONPATH", None)
    doc = ('{"name": "ping", "schedule": {"every": "1d"}, "kind": "python", '
           '"payload": {"callable": "myapp.jobs:ping"}}')
    for args, stdin in ((("jobs", "create", "--json", "-"), doc), (("jobs", "trigger", "ping"),
                                                                   None)):
        done = subprocess.run([*TICKWORK, *args], env=env, cwd=tmp_path, input=stdin,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
    worker = await asyncio.create_subprocess_exec(
        *TICKWORK, "worker", env=env, cwd=tmp_path, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    assert worker.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(30):
            while line := (await worker.stderr.readline()).decode():
                seen.append(line)
                if "ping @" in line:
                    break
    finally:
        worker.terminate()
        await worker.wait()
    assert any(re.search(r"ping @ \S+ attempt 1: succeeded", line) for line in seen), seen
    # A service process runs on uvloop (tickwork.runtime.eventloop), and says so.
    assert any(re.search(r"worker is running: .*, event loop uvloop$", line.rstrip())
               for line in seen), seen


def test_importing_tickwork_leaves_the_http_and_smtp_clients_unloaded() -> None:
    """``import tickwork`` (what ``@tickwork.job`` costs an application) loads no job
    kind's client library: each is imported when a payload of its kind is first checked."""
    probe = ("import sys, tickwork; "
             "print(sorted(m for m in ('aiohttp', 'aiosmtplib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
    after = ("import sys; from tickwork.executors import validate_payload; "
             "validate_payload('http', {'url': 'https://example.org/'}); "
             "print('aiohttp' in sys.modules)")
    done = subprocess.run([sys.executable, "-P", "-c", after], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "True"
