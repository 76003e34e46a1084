"""One settings object (STYLE habit 8): from CLI flags, TICKWORK_* variables, a TOML file.

``load_settings`` reads the sources by precedence: flags over the environment over the TOML file
over the defaults. Each value is checked where it is read, so an error says where it came from;
``Settings.validate`` then checks bounds and the rules that span fields, with the checks in
tickwork.config.checks. A typo is an error.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tickwork.config.checks import (
    MAX_CONCURRENCY,
    check_alert_defaults,
    check_consume,
    check_database,
    check_executors,
    check_less,
    check_logs,
    check_other_stores,
    check_processes,
    check_queues,
    check_shard_lease,
    format_seconds,
    parse_address,
)
from tickwork.config.coerce import DEFAULT_CONCURRENCY, Kind, coerce, parse_queues
from tickwork.config.priorities import (
    check_priorities,
    merge_priorities,
    priorities_in_queues,
)
from tickwork.errors import ConfigError
from tickwork.executors.base import ExecutorSettings
from tickwork.logs import LOG_FORMATS

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DEFAULT_CONCURRENCY",
    "ENV_VARS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "LOOPBACK_HOSTS",
    "MAX_CONCURRENCY",
    "NOT_SETTINGS",
    "NOT_SETTINGS_PREFIXES",
    "Settings",
    "load_settings",
    "parse_address",
    "parse_queues",
]

CONFIG_FILE = "tickwork.toml"
CONFIG_ENV = "TICKWORK_CONFIG"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
# TICKWORK_* variables that are not settings: the config path, the secrets key (read only from
# the environment, by tickwork.secrets, so it never sits in a settings object or a TOML file),
# the variables a shell job gets (a job may itself run the tickwork CLI), and the test suite's.
NOT_SETTINGS = frozenset({
    CONFIG_ENV, "TICKWORK_SECRET_KEY", "TICKWORK_IDEMPOTENCY_KEY", "TICKWORK_ATTEMPT",
    "TICKWORK_SCHEDULED_AT", "TICKWORK_DEADLINE", "TICKWORK_JOB_ID", "TICKWORK_JOB_NAME",
    "TICKWORK_FAILPOINTS",  # read by tickwork.worker.failpoints, for fault tests
    "TICKWORK_EVENT_LOOP",  # read by tickwork.runtime.eventloop before any setting
})
NOT_SETTINGS_PREFIXES = ("TICKWORK_TEST_",)



@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a tickwork process is configured with; see docs/configuration.md."""

    database: str = "sqlite:///tickwork.db"  # sqlite:///path | postgresql://...
    redis: str | None = None
    # The API's and dashboard's lists and stats read here (a read replica); None: `database`.
    read_database: str | None = None
    queues: tuple[tuple[str, int], ...] = (("default", DEFAULT_CONCURRENCY),)
    # Which queues come first in degraded mode and in the reconciler (config/priorities.py);
    # also written in `queues` after an @: "critical:8@10". Unnamed queues: 0.
    queue_priorities: tuple[tuple[str, int], ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    worker_id: str | None = None
    planner_horizon_seconds: float = 5.0
    # One-off jobs (schedule type "at") are planned this far ahead (at least as far as the
    # others): a burst of them due at one instant is planned before it, not around it
    planner_one_off_horizon_seconds: float = 300.0
    planner_interval_seconds: float = 1.0
    # 0: jitter delays every run of a job that has some; N: only runs at an instant the
    # planner plans N or more runs for (a burst), so lone runs start on time
    planner_burst_threshold: int = 0
    # A scheduler plans the shards it holds in this many disjoint parts at once: one part's
    # planning (Python) runs while another's statements wait for PostgreSQL
    planner_lanes: int = 2
    poll_interval_seconds: float = 1.0  # longest a worker sleeps before looking again
    lease_seconds: float = 30.0
    heartbeat_seconds: float = 10.0
    shutdown_grace_seconds: float = 30.0
    rescue_interval_seconds: float = 5.0
    # Run history (finished runs, attempts) older than this is pruned; a fraction of a day is
    # for tests and benchmarks (on PostgreSQL it costs DELETEs inside the day's partition).
    retention_days: float = 30.0
    audit_retention_days: int = 365  # audit entries older than this are pruned
    # Finished one-off jobs and deleted jobs are purged this long after they ended.
    finished_job_retention_seconds: float = 7 * 86400.0
    prune_interval_seconds: float = 600.0  # how often the pruner looks (more often when busy)
    shard_count: int = 64  # PostgreSQL: shards jobs are spread over (fixed when first migrated)
    # PostgreSQL: a scheduler's lease on its shards, renewed every third of it; a killed
    # scheduler's shards are taken over after about this long.
    shard_lease_seconds: float = 5.0
    max_deliveries: int = 5  # Redis: deliveries of one stream entry before it is dead-lettered
    log_level: str = "info"
    log_each_run: bool = False  # a line per finished attempt; else failures and a summary
    log_format: str = "text"  # text | json (tickwork.logs)
    access_log: bool = False  # the API logs a line per request (tickwork.api.access)
    otel: bool = False  # a trace span per attempt (the otel extra); OTEL_* variables also enable
    executors: ExecutorSettings = field(default_factory=ExecutorSettings)
    demo: bool = False
    api_enabled: bool = True  # `tickwork run` serves the API and dashboard on host:port
    open_access: bool = False  # no token needed: loopback hosts only
    metrics_address: str | None = None  # scheduler and worker: serve /metrics, /healthz here
    # Alerts (docs/operations.md#alerts): the policy of jobs without their own, as JSON
    # {"all": <alerts>, "queues": {"name": <alerts>}}, and how often they are judged.
    alert_defaults: str | None = None
    alert_interval_seconds: float = 5.0
    # Job commands to consume (docs/streams.md): BROKER/SOURCE entries, each a broker of
    # executors.brokers and the stream, queue or subject its commands arrive on.
    consume: tuple[str, ...] = ()

    def validate(self) -> None:
        """Raise ConfigError for the first value out of bounds or in conflict with another."""
        check_database(self.database)
        check_other_stores(self.redis, self.read_database)
        check_queues(self.queues)
        check_priorities(self.queue_priorities)
        if not self.host:
            raise ConfigError("host", "must not be empty")
        if not 0 <= self.port <= 65535:
            raise ConfigError("port", f"must be from 0 to 65535 (got {self.port})")
        if self.open_access and self.host not in LOOPBACK_HOSTS:
            raise ConfigError(
                "open_access", "is allowed only when host is a loopback address "
                f"({', '.join(LOOPBACK_HOSTS)}); got host {self.host!r}. Create a token with "
                "'tickwork tokens create' instead")
        if self.worker_id is not None and not self.worker_id.strip():
            raise ConfigError("worker_id", "must not be empty")
        for name in _SECONDS:
            value = getattr(self, name)
            if name == "shutdown_grace_seconds":
                ok, bound = value >= 0, "at least 0"
            else:
                ok, bound = value > 0, "greater than 0"
            if not (ok and math.isfinite(value)):
                raise ConfigError(
                    name, f"must be a finite number {bound} (got {format_seconds(value)})")
        if not (self.retention_days > 0 and math.isfinite(self.retention_days)):
            raise ConfigError("retention_days", "must be a finite number of days greater than "
                              f"0 (got {self.retention_days:g})")
        for name, least in (("planner_burst_threshold", 0), ("planner_lanes", 1),
                            ("audit_retention_days", 1)):
            if getattr(self, name) < least:
                raise ConfigError(name, f"must be at least {least} (got {getattr(self, name)})")
        if not 1 <= self.shard_count <= 4096:
            raise ConfigError("shard_count", f"must be from 1 to 4096 (got {self.shard_count})")
        check_processes(self.max_deliveries, self.metrics_address)
        check_shard_lease(self.shard_lease_seconds)
        check_less("heartbeat_seconds", self.heartbeat_seconds,
                    "lease_seconds", self.lease_seconds, strict=True)
        check_less("planner_interval_seconds", self.planner_interval_seconds,
                    "planner_horizon_seconds", self.planner_horizon_seconds, strict=False)
        check_logs(self.log_level, LOG_LEVELS, self.log_format)
        check_executors(self.executors, _EXECUTOR_KINDS)
        check_alert_defaults(self.alert_defaults, self.executors)
        check_consume(self.consume, self.executors.brokers)


def load_settings(
    *,
    flags: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    toml_path: str | None = None,
) -> Settings:
    """Settings from flags (non-None values), then TICKWORK_* variables, then TOML, then defaults.

    Without ``toml_path`` the file is ``$TICKWORK_CONFIG`` if set, else ``./tickwork.toml`` if
    it exists. ``env`` defaults to ``os.environ``. The result has passed ``validate()``.
    """
    environ = os.environ if env is None else env
    top: dict[str, Any] = {}
    executors: dict[str, Any] = {}
    path = _config_path(toml_path, environ)
    if path is not None:
        _read_toml(path, top, executors)
    _read_env(environ, top, executors)
    _read_flags(flags or {}, top, executors)
    for name in ("log_level", "log_format"):
        if name in top:
            top[name] = top[name].lower()
    at = top.pop(_QUEUES_AT, ())
    if at:  # "critical:8@10" in queues: over queue_priorities, from whichever source
        top["queue_priorities"] = merge_priorities(top.get("queue_priorities", ()), at)
    settings = Settings(**top, executors=replace(ExecutorSettings(), **executors))
    settings.validate()
    return settings


# --- where the values come from -------------------------------------------------------------

_SETTING_KINDS: dict[str, Kind] = {
    "database": "str",
    "redis": "optional_str",
    "read_database": "optional_str",
    "queues": "queues",
    "queue_priorities": "priorities",
    "host": "str",
    "port": "int",
    "worker_id": "optional_str",
    "planner_horizon_seconds": "seconds",
    "planner_one_off_horizon_seconds": "seconds",
    "planner_interval_seconds": "seconds",
    "planner_burst_threshold": "int",
    "planner_lanes": "int",
    "poll_interval_seconds": "seconds",
    "lease_seconds": "seconds",
    "heartbeat_seconds": "seconds",
    "shutdown_grace_seconds": "seconds",
    "rescue_interval_seconds": "seconds",
    "retention_days": "days",
    "audit_retention_days": "int",
    "finished_job_retention_seconds": "seconds",
    "prune_interval_seconds": "seconds",
    "shard_count": "int",
    "shard_lease_seconds": "seconds",
    "max_deliveries": "int",
    "log_level": "str",
    "log_each_run": "bool",
    "log_format": "str",
    "access_log": "bool",
    "otel": "bool",
    "demo": "bool",
    "api_enabled": "bool",
    "open_access": "bool",
    "metrics_address": "optional_str",
    "alert_defaults": "optional_str",
    "alert_interval_seconds": "seconds",
    "consume": "str_list",
}
_SECONDS = tuple(name for name, kind in _SETTING_KINDS.items() if kind == "seconds")


def _kind_of(default: object) -> Kind:
    """The kind of an executor setting, from its default value."""
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "seconds"
    if isinstance(default, tuple):
        return "str_list"
    return "str"


_EXECUTOR_KINDS: dict[str, Kind] = {
    f.name: "brokers" if f.name == "brokers" else _kind_of(getattr(ExecutorSettings(), f.name))
    for f in fields(ExecutorSettings)
}
# Environment variable -> (section, setting); section "" is Settings, "executors" the rest.
ENV_VARS: dict[str, tuple[str, str]] = {
    "TICKWORK_DATABASE_URL": ("", "database"),
    "TICKWORK_REDIS_URL": ("", "redis"),
    **{f"TICKWORK_{name.upper()}": ("", name) for name in _SETTING_KINDS
       if name not in ("database", "redis")},
    **{f"TICKWORK_{name.upper()}": ("executors", name) for name in _EXECUTOR_KINDS},
}


def _config_path(toml_path: str | None, environ: Mapping[str, str]) -> str | None:
    chosen = toml_path or environ.get(CONFIG_ENV) or None
    if chosen is None:
        return CONFIG_FILE if Path(CONFIG_FILE).is_file() else None
    if not Path(chosen).is_file():
        source = "" if toml_path else f" (from {CONFIG_ENV})"
        raise ConfigError("config", f"config file {chosen!r} does not exist{source}")
    return chosen


def _read_toml(path: str, top: dict[str, Any], executors: dict[str, Any]) -> None:
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"{path} is not valid TOML: {exc}") from None
    where = f"in {path}"
    for key, value in data.items():
        if key == "executors" and isinstance(value, dict):
            for name, item in value.items():
                kind = _EXECUTOR_KINDS.get(name)
                if kind is None:
                    hint = _suggest(name, _EXECUTOR_KINDS)
                    raise ConfigError(
                        "executors", f"unknown setting {name!r} in [executors] of {path}{hint}"
                    )
                executors[name] = coerce(item, kind, f"executors.{name}", where, text=False)
        elif key == "executors":
            raise ConfigError("executors", f"must be an [executors] table ({where})")
        elif key == "brokers":  # [brokers] stands for [executors.brokers]
            executors["brokers"] = coerce(value, "brokers", "executors.brokers", where,
                                           text=False)
        elif key in _SETTING_KINDS:
            _put(top, key, value, where, text=False)
        elif key in _EXECUTOR_KINDS:
            raise ConfigError("", f"setting {key!r} in {path} belongs in its [executors] table")
        else:
            hint = _suggest(key, _SETTING_KINDS)
            raise ConfigError("", f"unknown setting {key!r} in {path}{hint}")


def _read_env(environ: Mapping[str, str], top: dict[str, Any], executors: dict[str, Any]) -> None:
    for var, raw in environ.items():
        if not var.startswith("TICKWORK_") or var in NOT_SETTINGS:
            continue
        if var.startswith(NOT_SETTINGS_PREFIXES):  # the test suite's own
            continue
        target = ENV_VARS.get(var)
        if target is None:
            # Compare without the shared prefix, or every name looks close to every other.
            prefix = len("TICKWORK_")
            close = difflib.get_close_matches(var[prefix:], [v[prefix:] for v in ENV_VARS], n=1)
            hint = f" (did you mean TICKWORK_{close[0]}?)" if close else ""
            raise ConfigError("", f"unknown environment variable {var}{hint}")
        section, name = target
        if section:
            executors[name] = coerce(raw, _EXECUTOR_KINDS[name], f"executors.{name}",
                                      f"from {var}", text=True)
        else:
            _put(top, name, raw, f"from {var}", text=True)


def _read_flags(flags: Mapping[str, object], top: dict[str, Any],
                executors: dict[str, Any]) -> None:
    for name, value in flags.items():
        if value is None:
            continue
        where = f"from --{name.replace('_', '-')}"
        text = isinstance(value, str)
        if name in _SETTING_KINDS:
            _put(top, name, value, where, text=text)
        elif name in _EXECUTOR_KINDS:
            executors[name] = coerce(value, _EXECUTOR_KINDS[name], f"executors.{name}", where,
                                      text=text)
        else:
            hint = _suggest(name, [*_SETTING_KINDS, *_EXECUTOR_KINDS])
            raise ConfigError("", f"unknown setting {name!r} in flags{hint}")


_QUEUES_AT = "_queues_at"  # the @P priorities of the queues value read last


def _put(top: dict[str, Any], name: str, value: object, where: str, *, text: bool) -> None:
    top[name] = coerce(value, _SETTING_KINDS[name], name, where, text=text)
    if name == "queues":
        top[_QUEUES_AT] = priorities_in_queues(value)


def _suggest(name: str, known: Mapping[str, object] | list[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
