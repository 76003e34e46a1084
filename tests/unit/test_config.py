"""Settings: precedence, TOML, TICKWORK_* variables, typos rejected, validate() messages."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tickwork.config import ENV_VARS, Settings, load_settings
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors.base import ExecutorSettings


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty directory, so no ./tickwork.toml is picked up by accident."""
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_of(**kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_settings(**kwargs)
    return info.value


# --- sources and precedence -----------------------------------------------------------------


def test_defaults() -> None:
    assert load_settings(env={}) == Settings()
    settings = Settings()
    assert settings.database == "sqlite:///tickwork.db"
    assert settings.queues == (("default", 256),)
    assert settings.executors == ExecutorSettings()
    settings.validate()


def test_precedence_is_flags_then_env_then_toml_then_defaults(tmp_path: Path) -> None:
    toml = write(tmp_path / "t.toml", 'port = 1001\nhost = "toml-host"\nlog_level = "error"\n')
    env = {"TICKWORK_PORT": "1002", "TICKWORK_HOST": "env-host"}
    flags = {"port": 1003, "host": None}  # None means "flag not given"
    settings = load_settings(flags=flags, env=env, toml_path=toml)
    assert (settings.port, settings.host, settings.log_level) == (1003, "env-host", "error")
    assert settings.lease_seconds == 30.0  # the default
    assert settings.shard_lease_seconds == 5.0  # its own, short: failover within seconds
    assert load_settings(env=env, toml_path=toml).port == 1002
    assert load_settings(env={}, toml_path=toml).port == 1001


def test_a_full_toml_file(tmp_path: Path) -> None:
    toml = write(tmp_path / "tickwork.toml", """
database = "postgresql://tickwork@db/tickwork"
redis = "redis://cache:6379/0"
queues = "default:8,mail:2"
host = "0.0.0.0"
port = 9000
worker_id = "worker-a"
planner_horizon_seconds = 10
planner_interval_seconds = 2.5
poll_interval_seconds = "500ms"
lease_seconds = "1m"
heartbeat_seconds = 20
shutdown_grace_seconds = 0
rescue_interval_seconds = 10
shard_lease_seconds = "3s"
log_level = "WARNING"
demo = true

[executors]
shell_enabled = true
shell_allowed_executables = ["backup", "/usr/bin/pg_dump"]
python_allowed_modules = ["reports.jobs"]
output_limit_bytes = 1024
http_user_agent = "acme-scheduler"
""")
    settings = load_settings(env={}, toml_path=toml)
    assert settings == Settings(
        database="postgresql://tickwork@db/tickwork",
        redis="redis://cache:6379/0",
        queues=(("default", 8), ("mail", 2)),
        host="0.0.0.0",
        port=9000,
        worker_id="worker-a",
        planner_horizon_seconds=10.0,
        planner_interval_seconds=2.5,
        poll_interval_seconds=0.5,
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
        shutdown_grace_seconds=0.0,
        rescue_interval_seconds=10.0,
        shard_lease_seconds=3.0,
        log_level="warning",
        executors=ExecutorSettings(
            shell_enabled=True,
            shell_allowed_executables=("backup", "/usr/bin/pg_dump"),
            python_allowed_modules=("reports.jobs",),
            output_limit_bytes=1024,
            http_user_agent="acme-scheduler",
        ),
        demo=True,
    )


@pytest.mark.parametrize(("text", "expected"), [
    ('queues = "default:16,mail:4"', (("default", 16), ("mail", 4))),
    ('queues = ["default:16", "mail"]', (("default", 16), ("mail", 256))),
    ("queues = {default = 16, mail = 4}", (("default", 16), ("mail", 4))),
])
def test_queues_in_toml(tmp_path: Path, text: str, expected: tuple[tuple[str, int], ...]) -> None:
    assert load_settings(env={}, toml_path=write(tmp_path / "q.toml", text)).queues == expected


def test_the_environment(tmp_path: Path) -> None:
    env = {
        "TICKWORK_DATABASE_URL": "postgresql://u@h/db",
        "TICKWORK_REDIS_URL": "rediss://cache:6380",
        "TICKWORK_QUEUES": "default:4, mail:2",
        "TICKWORK_PORT": " 8080 ",
        "TICKWORK_WORKER_ID": "w1",
        "TICKWORK_LEASE_SECONDS": "2m",
        "TICKWORK_HEARTBEAT_SECONDS": "15",
        "TICKWORK_SHARD_LEASE_SECONDS": "2.5",
        "TICKWORK_LOG_LEVEL": "DEBUG",
        "TICKWORK_DEMO": "yes",
        "TICKWORK_SHELL_ENABLED": "true",
        "TICKWORK_SHELL_ALLOWED_EXECUTABLES": "backup, /usr/bin/pg_dump,",
        "TICKWORK_PYTHON_ALLOWED_MODULES": "reports.jobs,billing",
        "TICKWORK_OUTPUT_LIMIT_BYTES": "2048",
        "PATH": "/usr/bin",  # not ours: ignored
    }
    settings = load_settings(env=env)
    assert settings.database == "postgresql://u@h/db"
    assert settings.redis == "rediss://cache:6380"
    assert settings.queues == (("default", 4), ("mail", 2))
    assert (settings.port, settings.worker_id) == (8080, "w1")
    assert (settings.lease_seconds, settings.heartbeat_seconds) == (120.0, 15.0)
    assert settings.shard_lease_seconds == 2.5
    assert (settings.log_level, settings.demo) == ("debug", True)
    assert settings.executors == ExecutorSettings(
        shell_enabled=True,
        shell_allowed_executables=("backup", "/usr/bin/pg_dump"),
        python_allowed_modules=("reports.jobs", "billing"),
        output_limit_bytes=2048,
    )


def test_an_empty_variable_unsets_an_optional_setting(tmp_path: Path) -> None:
    toml = write(tmp_path / "t.toml", 'redis = "redis://cache"\n')
    assert load_settings(env={"TICKWORK_REDIS_URL": ""}, toml_path=toml).redis is None


@pytest.mark.parametrize(("text", "expected"), [
    ("true", True), ("1", True), ("YES", True), ("on", True),
    ("false", False), ("0", False), ("no", False), ("Off", False),
])
def test_booleans_from_the_environment(text: str, expected: bool) -> None:
    assert load_settings(env={"TICKWORK_DEMO": text}).demo is expected


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("TICKWORK_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TICKWORK_PORT", "9100")
    assert load_settings().port == 9100


def test_string_flags_are_parsed_like_the_environment() -> None:
    flags = {"port": "9001", "queues": "mail:2", "lease_seconds": "45s", "demo": "true",
             "shell_enabled": True, "shell_allowed_executables": ["backup"],
             "shard_lease_seconds": "2s"}
    settings = load_settings(flags=flags, env={})
    assert settings.shard_lease_seconds == 2.0
    assert (settings.port, settings.queues, settings.lease_seconds, settings.demo) == (
        9001, (("mail", 2),), 45.0, True)
    assert settings.executors.shell_allowed_executables == ("backup",)


def test_the_config_file_is_found(tmp_path: Path) -> None:
    write(tmp_path / "tickwork.toml", "port = 7001\n")
    assert load_settings(env={}).port == 7001  # ./tickwork.toml
    other = write(tmp_path / "other.toml", "port = 7002\n")
    assert load_settings(env={"TICKWORK_CONFIG": other}).port == 7002
    explicit = write(tmp_path / "explicit.toml", "port = 7003\n")
    assert load_settings(env={"TICKWORK_CONFIG": other}, toml_path=explicit).port == 7003


def test_variables_that_are_not_settings_are_left_alone() -> None:
    env = {"TICKWORK_JOB_ID": "j1", "TICKWORK_ATTEMPT": "2", "TICKWORK_IDEMPOTENCY_KEY": "k",
           "TICKWORK_SCHEDULED_AT": "x", "TICKWORK_DEADLINE": "x", "TICKWORK_JOB_NAME": "n",
           "TICKWORK_TEST_POSTGRES_URL": "postgresql://x", "tickwork_port": "1"}
    assert load_settings(env=env) == Settings()


def test_every_setting_has_an_environment_variable() -> None:
    top = {f.name for f in dataclasses.fields(Settings)} - {"executors"}
    executors = {f.name for f in dataclasses.fields(ExecutorSettings)}
    assert {name for section, name in ENV_VARS.values() if not section} == top
    assert {name for section, name in ENV_VARS.values() if section} == executors
    assert ENV_VARS["TICKWORK_DATABASE_URL"] == ("", "database")
    assert ENV_VARS["TICKWORK_REDIS_URL"] == ("", "redis")


# --- errors from the sources ----------------------------------------------------------------


def test_an_unknown_toml_key_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path / "tickwork.toml", 'databse = "sqlite:///x.db"\n')
    error = error_of(env={})
    assert str(error) == "unknown setting 'databse' in tickwork.toml (did you mean 'database'?)"
    assert isinstance(error, ValidationError)
    error = error_of(env={}, toml_path=path)
    assert error.reason == f"unknown setting 'databse' in {path} (did you mean 'database'?)"


@pytest.mark.parametrize(("text", "field", "reason"), [
    ("colour = 1", "", "unknown setting 'colour' in t.toml"),
    ("[executors]\nshel_enabled = true", "executors",
     "unknown setting 'shel_enabled' in [executors] of t.toml (did you mean 'shell_enabled'?)"),
    ("shell_enabled = true", "", "setting 'shell_enabled' in t.toml belongs in its [executors] "
                                 "table"),
    ('executors = "shell"', "executors", "must be an [executors] table (in t.toml)"),
    ('port = "8000"', "port", "must be an integer (got '8000' in t.toml)"),
    ("port = 80.5", "port", "must be an integer (got 80.5 in t.toml)"),
    ("demo = 1", "demo", "must be true or false (got 1 in t.toml)"),
    ('demo = "yes"', "demo", "must be true or false (got 'yes' in t.toml)"),
    ("host = 1", "host", "must be a string (got 1 in t.toml)"),
    ("lease_seconds = true", "lease_seconds",
     "must be a number of seconds or a duration such as '30s' (got True in t.toml)"),
    ("queues = 4", "queues", "must be a string such as 'default:16,mail:4' or a table "
                             "(got 4 in t.toml)"),
    ('queues = "mail:x"', "queues", "concurrency of 'mail' must be a whole number (got 'x') "
                                    "(in t.toml)"),
    ("queues = {mail = true}", "queues", "concurrency of 'mail' must be from 1 to 10000 "
                                         "(got True) (in t.toml)"),
    ("[executors]\nshell_allowed_executables = \"backup\"", "executors.shell_allowed_executables",
     "must be a list of strings (got 'backup' in t.toml)"),
    ("[executors]\noutput_limit_bytes = \"1k\"", "executors.output_limit_bytes",
     "must be an integer (got '1k' in t.toml)"),
])
def test_bad_toml_values(text: str, field: str, reason: str) -> None:
    write(Path("t.toml"), text + "\n")
    error = error_of(env={}, toml_path="t.toml")
    assert (error.field, error.reason) == (field, reason)


def test_a_duration_error_says_where_it_came_from() -> None:
    error = error_of(env={"TICKWORK_LEASE_SECONDS": "soon"})
    assert error.field == "lease_seconds"
    assert error.reason.endswith("(from TICKWORK_LEASE_SECONDS)")


def test_invalid_toml_and_missing_files() -> None:
    write(Path("bad.toml"), "port = \n")
    error = error_of(env={}, toml_path="bad.toml")
    assert error.field == "config"
    assert error.reason.startswith("bad.toml is not valid TOML: ")
    error = error_of(env={}, toml_path="missing.toml")
    assert str(error) == "config: config file 'missing.toml' does not exist"
    error = error_of(env={"TICKWORK_CONFIG": "gone.toml"})
    assert str(error) == "config: config file 'gone.toml' does not exist (from TICKWORK_CONFIG)"


@pytest.mark.parametrize(("env", "message"), [
    ({"TICKWORK_DATABASE": "sqlite:///x.db"},
     "unknown environment variable TICKWORK_DATABASE (did you mean TICKWORK_DATABASE_URL?)"),
    ({"TICKWORK_PROT": "1"}, "unknown environment variable TICKWORK_PROT (did you mean "
                             "TICKWORK_PORT?)"),
    ({"TICKWORK_SHELL_ENABLE": "1"}, "unknown environment variable TICKWORK_SHELL_ENABLE (did "
                                     "you mean TICKWORK_SHELL_ENABLED?)"),
    ({"TICKWORK_ZZZ": "1"}, "unknown environment variable TICKWORK_ZZZ"),
    ({"TICKWORK_PORT": "abc"}, "port: must be an integer (got 'abc' from TICKWORK_PORT)"),
    ({"TICKWORK_PORT": "80.0"}, "port: must be an integer (got '80.0' from TICKWORK_PORT)"),
    ({"TICKWORK_DEMO": "maybe"}, "demo: must be true or false (got 'maybe' from TICKWORK_DEMO)"),
    ({"TICKWORK_OUTPUT_LIMIT_BYTES": "lots"}, "executors.output_limit_bytes: must be an integer "
                                             "(got 'lots' from TICKWORK_OUTPUT_LIMIT_BYTES)"),
    ({"TICKWORK_QUEUES": "mail:x"}, "queues: concurrency of 'mail' must be a whole number "
                                    "(got 'x') (from TICKWORK_QUEUES)"),
    ({"TICKWORK_HEARTBEAT_SECONDS": "40"}, "heartbeat_seconds: must be less than lease_seconds "
                                           "(got 40; lease_seconds is 30)"),
    ({"TICKWORK_SHARD_LEASE_SECONDS": "500ms"},
     "shard_lease_seconds: must be at least 1 second (got 0.5)"),
    ({"TICKWORK_SHARD_LEASE_SECONDS": "soon"},
     "shard_lease_seconds: 'soon' is not a duration (use seconds or a duration like 90, 30s, "
     "15m, 1h, 1d, 1h30m or 500ms) (from TICKWORK_SHARD_LEASE_SECONDS)"),
])
def test_bad_environment(env: dict[str, str], message: str) -> None:
    assert str(error_of(env=env)) == message


@pytest.mark.parametrize(("flags", "message"), [
    ({"prot": 1}, "unknown setting 'prot' in flags (did you mean 'port'?)"),
    ({"port": "x"}, "port: must be an integer (got 'x' from --port)"),
    ({"port": True}, "port: must be an integer (got True from --port)"),
    ({"lease_seconds": [1]}, "lease_seconds: must be a number of seconds or a duration such as "
                             "'30s' (got [1] from --lease-seconds)"),
])
def test_bad_flags(flags: dict[str, object], message: str) -> None:
    assert str(error_of(flags=flags, env={})) == message


# --- the docs' examples run (STYLE habit 13) ------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)


def test_the_documented_toml_file_loads(tmp_path: Path) -> None:
    (toml,) = blocks("toml")
    settings = load_settings(env={}, toml_path=write(tmp_path / "doc.toml", toml))
    assert settings.queues == (("default", 16), ("mail", 4), ("reports", 2))
    assert settings.shard_lease_seconds == 5.0
    assert settings.executors.shell_allowed_executables == ("/usr/local/bin/backup", "rsync")


def test_the_documented_environment_loads() -> None:
    (shell,) = blocks("sh")
    env = dict(line.removeprefix("export ").split("=", 1) for line in shell.splitlines()
               if line.startswith("export "))
    settings = load_settings(env=env)
    assert settings.redis == "redis://cache.internal:6379/0"
    assert settings.executors.shell_enabled is True


def test_the_documented_errors_are_the_real_ones(tmp_path: Path) -> None:
    (text,) = blocks("text")
    documented = set(text.splitlines())
    write(tmp_path / "tickwork.toml", 'databse = "x"\n')
    assert str(error_of(env={})) in documented
    write(tmp_path / "tickwork.toml", "[executors]\nshel_enabled = true\n")
    assert str(error_of(env={})) in documented
    (tmp_path / "tickwork.toml").unlink()
    for env in ({"TICKWORK_DATABASE": "x"}, {"TICKWORK_PORT": "abc"},
                {"TICKWORK_QUEUES": "mail:x"}, {"TICKWORK_HEARTBEAT_SECONDS": "40"},
                {"TICKWORK_PLANNER_INTERVAL_SECONDS": "10"},
                {"TICKWORK_DATABASE_URL": "mysql://u:pw@db/x"},
                {"TICKWORK_SHARD_LEASE_SECONDS": "500ms"}):
        assert str(error_of(env=env)) in documented


# --- PostgreSQL deployment settings --------------------------------------------------------


def test_retention_and_shards_from_env_and_their_bounds() -> None:
    settings = load_settings(env={"TICKWORK_RETENTION_DAYS": "7", "TICKWORK_SHARD_COUNT": "128"})
    assert (settings.retention_days, settings.shard_count) == (7, 128)
    assert (Settings().retention_days, Settings().shard_count) == (30, 64)
    for changes, message in (
        ({"retention_days": 0}, "retention_days: must be a finite number of days greater "
                                "than 0 (got 0)"),
        ({"shard_count": 0}, "shard_count: must be from 1 to 4096 (got 0)"),
        ({"shard_count": 5000}, "shard_count: must be from 1 to 4096 (got 5000)"),
    ):
        with pytest.raises(ConfigError) as info:
            dataclasses.replace(Settings(), **changes).validate()
        assert str(info.value) == message


def test_a_fraction_of_a_day_of_retention_and_the_prune_interval() -> None:
    settings = load_settings(env={"TICKWORK_RETENTION_DAYS": "0.01",
                                  "TICKWORK_PRUNE_INTERVAL_SECONDS": "30s"})
    assert (settings.retention_days, settings.prune_interval_seconds) == (0.01, 30.0)
    assert load_settings(env={}, flags={"retention_days": 0.5}).retention_days == 0.5
    assert load_settings(env={}, flags={"retention_days": "2"}).retention_days == 2.0
    assert Settings().prune_interval_seconds == 600.0
    for env, message in (
        ({"TICKWORK_RETENTION_DAYS": "0"},
         "retention_days: must be a finite number of days greater than 0 (got 0)"),
        ({"TICKWORK_RETENTION_DAYS": "-0.5"},
         "retention_days: must be a finite number of days greater than 0 (got -0.5)"),
        ({"TICKWORK_RETENTION_DAYS": "inf"},
         "retention_days: must be a finite number of days greater than 0 (got inf)"),
        ({"TICKWORK_RETENTION_DAYS": "a week"},
         "retention_days: must be a number of days such as 30 or 0.5 "
         "(got 'a week' from TICKWORK_RETENTION_DAYS)"),
        ({"TICKWORK_AUDIT_RETENTION_DAYS": "0.5"},
         "audit_retention_days: must be an integer (got '0.5' from "
         "TICKWORK_AUDIT_RETENTION_DAYS)"),
        ({"TICKWORK_PRUNE_INTERVAL_SECONDS": "0"},
         "prune_interval_seconds: must be greater than zero, got '0' (from "
         "TICKWORK_PRUNE_INTERVAL_SECONDS)"),
        ({"TICKWORK_PRUNE_INTERVAL_SECONDS": "often"},
         "prune_interval_seconds: 'often' is not a duration (use seconds or a duration like "
         "90, 30s, 15m, 1h, 1d, 1h30m or 500ms) (from TICKWORK_PRUNE_INTERVAL_SECONDS)"),
    ):
        with pytest.raises(ConfigError) as info:
            load_settings(env=env)
        assert str(info.value) == message
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, flags={"prune_interval_seconds": -5})
    assert str(info.value) == ("prune_interval_seconds: must be a finite number greater than 0 "
                               "(got -5)")


def test_a_fraction_of_a_day_of_retention_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "tickwork.toml"
    path.write_text("retention_days = 0.25\nprune_interval_seconds = 15\n")
    settings = load_settings(env={}, toml_path=str(path))
    assert (settings.retention_days, settings.prune_interval_seconds) == (0.25, 15.0)
    path.write_text('retention_days = "0.25"\n')  # a TOML value has its type already
    with pytest.raises(ConfigError, match="retention_days: must be a number of days"):
        load_settings(env={}, toml_path=str(path))


# --- the API's settings ------------------------------------------------------------------------

def test_open_access_is_for_loopback_only() -> None:
    assert load_settings(env={"TICKWORK_OPEN_ACCESS": "true"}).open_access is True
    assert load_settings(env={}, flags={"host": "::1", "open_access": True}).open_access is True
    with pytest.raises(ConfigError, match="open_access: is allowed only when host is a loopback"):
        load_settings(env={}, flags={"host": "0.0.0.0", "open_access": True})
    assert load_settings(env={"TICKWORK_API_ENABLED": "false"}).api_enabled is False
