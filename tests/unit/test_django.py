"""tickwork.contrib.django in a minimal Django project made in tmp_path: settings from
settings.TICKWORK, jobs autodiscovered from an app's jobs.py, and `manage.py tickwork_run` /
`tickwork_worker` (call_command) running a declared job on SQLite until SIGTERM."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

django = pytest.importorskip("django")

from django.core.management import call_command  # noqa: E402
from django.core.management.base import CommandError  # noqa: E402
from django.test import override_settings  # noqa: E402

from tickwork import registry  # noqa: E402
from tickwork.client import Client  # noqa: E402

APP = "tw_django_shop"  # a name no other test imports
JOBS = '''
import tickwork


@tickwork.job(every="1s", name="shop-ping", args=["shop"])
def ping(label: str) -> str:
    return f"pong from {label}"
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A Django project with one app that declares a job; Django is set up once per process."""
    root = tmp_path_factory.mktemp("djproject")
    (root / APP).mkdir()
    (root / APP / "__init__.py").write_text("", encoding="utf-8")
    (root / APP / "jobs.py").write_text(JOBS, encoding="utf-8")
    (root / "tw_django_settings.py").write_text(f'''
SECRET_KEY = "test"
INSTALLED_APPS = ["django.contrib.contenttypes", "tickwork.contrib.django", "{APP}"]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3",
                          "NAME": "{root}/django.db"}}}}
USE_TZ = True
TICKWORK = {{
    "database": "sqlite:///{root}/tickwork.db",
    "planner_interval_seconds": 0.2,
    "planner_horizon_seconds": 1,
    "poll_interval_seconds": 0.2,
    "shutdown_grace_seconds": 1,
    "executors": {{"output_limit_bytes": 4096}},
}}
''', encoding="utf-8")
    sys.path.insert(0, str(root))
    old = os.environ.get("DJANGO_SETTINGS_MODULE")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tw_django_settings"
    try:
        django.setup()
        yield root
    finally:
        sys.path.remove(str(root))
        if old is None:
            os.environ.pop("DJANGO_SETTINGS_MODULE", None)
        else:
            os.environ["DJANGO_SETTINGS_MODULE"] = old
        for name in [m for m in sys.modules if m.startswith(APP)]:
            del sys.modules[name]


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's declared jobs stay this test's: a later service in this process would sync
    them otherwise."""
    monkeypatch.setattr(registry, "_registered", {})
    for name in [m for m in sys.modules if m.startswith(APP)]:
        monkeypatch.delitem(sys.modules, name)


def succeeded_runs(database: Path) -> list[str]:
    try:
        with sqlite3.connect(database) as conn:
            return [row[0] for row in conn.execute(
                "SELECT job_id FROM occurrences WHERE state = 'succeeded'")]
    except sqlite3.OperationalError:  # not created or migrated yet
        return []


def stop_when_a_run_succeeded(database: Path, done: threading.Event) -> threading.Thread:
    """SIGTERM this process (the command's graceful stop) once a run succeeded, or after 30s."""
    def watch() -> None:
        deadline = time.monotonic() + 30
        while not done.is_set() and time.monotonic() < deadline and not succeeded_runs(database):
            time.sleep(0.1)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("command", ["tickwork_run", "tickwork_worker"])
def test_a_declared_job_is_synced_and_runs(project: Path, own_registry: None,
                                           command: str) -> None:
    database = project / "tickwork.db"
    database.unlink(missing_ok=True)
    done = threading.Event()
    watcher = stop_when_a_run_succeeded(database, done)
    options = {"port": "0"} if command == "tickwork_run" else {}
    try:
        call_command(command, **options)
    finally:
        done.set()
        watcher.join()
    with Client.open(f"sqlite:///{database}") as client:
        job = client.get_job("shop-ping")
        assert job.spec.payload["callable"] == f"{APP}.jobs:ping"
        (run,) = client.list_runs(job="shop-ping", states=["succeeded"], limit=1)
        _, attempts = client.get_run("shop-ping", run.scheduled_at)
        assert attempts[-1].output == "pong from shop"


def test_settings_come_from_the_django_settings(project: Path) -> None:
    from tickwork.contrib.django import tickwork_settings

    settings = tickwork_settings()
    assert settings.database == f"sqlite:///{project}/tickwork.db"
    assert settings.planner_interval_seconds == 0.2
    assert settings.executors.output_limit_bytes == 4096
    assert tickwork_settings(queues="mail:4").queues == (("mail", 4),)
    with override_settings(TICKWORK={"databse": "sqlite:///x.db"}), \
            pytest.raises(CommandError, match="did you mean 'database'"):
        call_command("tickwork_worker")
    with override_settings(TICKWORK="sqlite:///x.db"), pytest.raises(CommandError,
                                                                     match="must be a dict"):
        call_command("tickwork_run")


def test_autodiscovery_imports_each_apps_jobs_module(project: Path, own_registry: None) -> None:
    from tickwork.contrib.django import autodiscover_jobs, declared_jobs

    assert autodiscover_jobs() == [f"{APP}.jobs"]
    assert [doc["name"] for doc in declared_jobs()] == ["shop-ping"]
