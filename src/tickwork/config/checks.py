"""The checks behind ``Settings.validate`` (STYLE habit 8), apart from where values come from.

Each check sees one value or a few and raises ConfigError naming the field and the bound.
tickwork.config reads the sources, coerces the values and calls these; it re-exports
``MAX_CONCURRENCY`` and ``parse_address``, which live here because the checks need them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from tickwork.document import QUEUE_NAME, QUEUE_NAME_RULE
from tickwork.document.alerts import parse_alert_defaults
from tickwork.drivers import SQLITE, backend_of
from tickwork.drivers.redis_url import parse_redis_url
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors.admission import check_alert_brokers
from tickwork.executors.base import ExecutorSettings
from tickwork.executors.email import check_settings as check_smtp_settings
from tickwork.executors.http import parse_endpoint_secrets
from tickwork.executors.publish import check_settings as check_broker_settings
from tickwork.executors.shell_policy import env_name_problem, parse_argument_patterns, runs_code
from tickwork.executors.ssrf import OutboundPolicy
from tickwork.logs import LOG_FORMATS
from tickwork.secrets import check_name, config_reference

MAX_CONCURRENCY = 10_000
# A scheduler renews its shard leases every third of shard_lease_seconds, in a transaction
# under one advisory lock all schedulers share. Shorter than this, a database round trip or a
# pause of a few hundred milliseconds lets the leases lapse, and shards move for nothing.
MIN_SHARD_LEASE_SECONDS = 1.0


def parse_address(value: str, name: str = "metrics_address") -> tuple[str, int]:
    """``HOST:PORT`` as ``(host, port)``: ``127.0.0.1:9100``, ``[::1]:9100``, ``0.0.0.0:0``
    (port 0 picks a free one); ``:9100`` or ``9100`` alone mean the loopback ``127.0.0.1``."""
    text = value.strip()
    m = (re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]+)", text)
         or re.fullmatch(r"([A-Za-z0-9.-]*):([0-9]+)", text)
         or re.fullmatch(r"()([0-9]+)", text))
    if m is None:
        shown = repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
        raise ConfigError(name, f"must be HOST:PORT, such as 127.0.0.1:9100 or [::1]:9100 "
                                f"(got {shown})")
    host, port = m.group(1) or "127.0.0.1", int(m.group(2))
    if port > 65535:
        raise ConfigError(name, f"port must be from 0 to 65535 (got {port})")
    return host, port


def check_url(name: str, value: str, schemes: tuple[str, ...]) -> None:
    scheme, sep, _ = value.partition("://")
    if not sep or scheme.lower() not in schemes:
        # Only the scheme is echoed: the rest of a URL may hold a password.
        got = f"a {scheme!r} URL" if sep else "no scheme"
        examples = {"database": "sqlite:///PATH or postgresql://...",
                    "read_database": "postgresql://... (or sqlite:///PATH)"}
        raise ConfigError(name, f"must be {examples[name]} (got {got})")


def check_database(url: str) -> None:
    check_url("database", url, ("sqlite", "postgresql", "postgres"))
    if backend_of(url) != SQLITE or url == "sqlite://:memory:":
        return
    if not url.startswith("sqlite:///") or url == "sqlite:///":
        raise ConfigError("database", "must be sqlite:///PATH, with three slashes and a path")


def check_other_stores(redis: str | None, read_database: str | None) -> None:
    """Redis' URL (one server, a Redis Cluster or a Sentinel-managed master: docs/redis.md),
    and the read replica's (``read_database``), when set."""
    if redis is not None:
        check_redis(redis)
    if read_database is not None:
        check_url("read_database", read_database, ("sqlite", "postgresql", "postgres"))


def check_redis(url: str) -> None:
    """One server, a Redis Cluster or a Sentinel-managed master (docs/redis.md)."""
    try:
        parse_redis_url(url)
    except ValueError as exc:
        raise ConfigError("redis", str(exc)) from None


def check_queues(queues: tuple[tuple[str, Any], ...]) -> None:
    if not queues:
        raise ConfigError("queues", "must name at least one queue, e.g. 'default:16,mail:4'")
    seen: set[str] = set()
    for name, concurrency in queues:
        if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
            raise ConfigError("queues", f"queue name {name!r} {QUEUE_NAME_RULE}")
        if name in seen:
            raise ConfigError("queues", f"lists {name!r} twice")
        seen.add(name)
        if (not isinstance(concurrency, int) or isinstance(concurrency, bool)
                or not 1 <= concurrency <= MAX_CONCURRENCY):
            raise ConfigError(
                "queues",
                f"concurrency of {name!r} must be from 1 to {MAX_CONCURRENCY}"
                f" (got {concurrency!r})",
            )


def check_processes(max_deliveries: int, metrics_address: str | None) -> None:
    """The Redis rescuer's poison threshold and the scheduler's and worker's metrics address."""
    if max_deliveries < 1:
        raise ConfigError("max_deliveries", f"must be at least 1 (got {max_deliveries})")
    if metrics_address is not None:
        parse_address(metrics_address, "metrics_address")


def check_logs(level: str, levels: tuple[str, ...], fmt: str) -> None:
    if level not in levels:
        raise ConfigError("log_level", f"must be one of {', '.join(levels)} (got {level!r})")
    if fmt not in LOG_FORMATS:
        raise ConfigError("log_format", f"must be one of {', '.join(LOG_FORMATS)} (got {fmt!r})")


def check_shard_lease(seconds: float) -> None:
    if seconds < MIN_SHARD_LEASE_SECONDS:
        raise ConfigError("shard_lease_seconds", f"must be at least "
                          f"{format_seconds(MIN_SHARD_LEASE_SECONDS)} second (got "
                          f"{format_seconds(seconds)})")


def check_less(name: str, value: float, other: str, bound: float, *, strict: bool) -> None:
    if value < bound or (value == bound and not strict):
        return
    relation = "less than" if strict else "at most"
    raise ConfigError(name, f"must be {relation} {other} (got {format_seconds(value)}; {other} is "
                            f"{format_seconds(bound)})")


def check_executors(executors: ExecutorSettings, kinds: Mapping[str, str]) -> None:
    """``kinds``: each setting's kind as tickwork.config reads it; the "int" ones are counts."""
    for f in fields(executors):
        value = getattr(executors, f.name)
        if kinds[f.name] == "int" and value < 1:
            raise ConfigError(f"executors.{f.name}", f"must be at least 1 (got {value})")
    if executors.shell_enabled and not executors.shell_allowed_executables:
        raise ConfigError(
            "executors.shell_allowed_executables",
            "must name at least one executable when executors.shell_enabled is true",
        )
    _check_shell(executors)
    _check_outbound(executors)


def _check_shell(executors: ExecutorSettings) -> None:
    """The argument patterns parse, code-running executables have some, no unsafe variable
    is allowlisted and every working directory is absolute."""
    try:
        patterns = parse_argument_patterns(executors.shell_allowed_arguments)
    except ValueError as exc:
        raise ConfigError("executors.shell_allowed_arguments", str(exc)) from None
    for exe in executors.shell_allowed_executables:
        if runs_code(exe) and exe not in patterns:
            raise ConfigError("executors.shell_allowed_executables", (
                f"{exe!r} runs code named in its arguments; allowlist it only with argument "
                f"patterns in executors.shell_allowed_arguments ('{exe}=REGEX')"))
    for name in executors.shell_allowed_env:
        stem = name.removesuffix("*")
        problem = env_name_problem(stem) if stem else "would allow every variable"
        if problem is not None:
            raise ConfigError("executors.shell_allowed_env", f"{name!r}: {problem}")
    for directory in executors.shell_allowed_cwd:
        if not os.path.isabs(directory):
            raise ConfigError("executors.shell_allowed_cwd",
                              f"{directory!r} is not an absolute path")


def _check_outbound(executors: ExecutorSettings) -> None:
    """The SSRF allowlist, webhook signing secrets and SMTP settings."""
    OutboundPolicy(executors.outbound_allow)  # raises ConfigError naming the bad entry
    field = "executors.webhook_signing_secrets"
    try:
        for _, name in parse_endpoint_secrets(executors.webhook_signing_secrets):
            check_name(name, field)
    except ValidationError as exc:
        raise ConfigError(field, exc.reason) from None
    except ValueError as exc:
        raise ConfigError(field, str(exc)) from None
    if executors.smtp_port > 65535:
        raise ConfigError("executors.smtp_port",
                          f"must be from 1 to 65535 (got {executors.smtp_port})")
    problem = check_smtp_settings(executors)
    if problem is not None:
        name, _, reason = problem.partition(" ")
        raise ConfigError(f"executors.{name}", reason)
    secret = config_reference(executors.smtp_password)
    if secret is not None:
        try:
            check_name(secret, "executors.smtp_password")
        except ValidationError as exc:
            raise ConfigError(exc.field, f"{exc.reason} (after $secret:)") from None
    problem = check_broker_settings(executors.brokers)
    if problem is not None:
        raise ConfigError("executors.brokers", problem)
    for _, url in executors.brokers:
        secret = config_reference(url)
        if secret is not None:
            try:
                check_name(secret, "executors.brokers")
            except ValidationError as exc:
                raise ConfigError(exc.field, f"{exc.reason} (after $secret:)") from None


def check_alert_defaults(text: str | None, executors: ExecutorSettings) -> None:
    """``alert_defaults`` parses, and its publish channels name brokers of
    ``executors.brokers`` (the process that reads this setting is the one that delivers)."""
    try:
        defaults = parse_alert_defaults(text)
        if defaults.every_job is not None:
            check_alert_brokers(defaults.every_job, executors, "alert_defaults.all")
        for queue, policy in (defaults.queues or {}).items():
            check_alert_brokers(policy, executors, f"alert_defaults.queues.{queue}")
    except ConfigError:
        raise
    except ValidationError as exc:
        raise ConfigError(exc.field, exc.reason) from None


def format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


CONSUMABLE = ("redis", "amqp", "nats")  # the broker families `tickwork consume` reads


def parse_consume(entry: str) -> tuple[str, str]:
    """``"events/tickwork.commands"`` as ``("events", "tickwork.commands")``: a broker of
    ``executors.brokers`` and the stream, queue or subject to read commands from."""
    broker, slash, source = entry.partition("/")
    if not slash or not broker or not source or any(c.isspace() for c in entry):
        raise ConfigError("consume", f"{entry!r} must be BROKER/SOURCE: a configured broker "
                          "and the stream, queue or subject to read, e.g. "
                          "'events/tickwork.commands'")
    return broker, source


def check_consume(consume: tuple[str, ...], brokers: tuple[tuple[str, str], ...]) -> None:
    known = dict(brokers)
    for entry in consume:
        broker, _ = parse_consume(entry)
        url = known.get(broker)
        if url is None:
            names = ", ".join(sorted(known)) or "none is configured"
            raise ConfigError("consume", f"{entry!r} names broker {broker!r}, which is not in "
                              f"executors.brokers ({names})")
        scheme = url.partition("://")[0].lower()
        family = {"rediss": "redis", "amqps": "amqp", "tls": "nats"}.get(scheme, scheme)
        if config_reference(url) is None and family not in CONSUMABLE:
            raise ConfigError("consume", f"{entry!r}: broker {broker!r} is {scheme}; commands "
                              f"are read from {', '.join(CONSUMABLE)} brokers only")
