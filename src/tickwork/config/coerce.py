"""Settings values from what a TOML file, a variable or a flag gave: one coercer per kind.

``text``: the value came as a string (environment, CLI) and may be parsed; a TOML file's
values must already have their type. Each error says where the value came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Literal

from tickwork.config.checks import check_queues
from tickwork.config.priorities import parse_queue_priorities, split_priority
from tickwork.errors import ConfigError, ValidationError
from tickwork.schedules import parse_duration
from tickwork.secrets import CONFIG_REF_PREFIX

# Per queue of a worker: claims and completions batch up to this. A slot costs an asyncio task,
# not a thread (async callables, HTTP, Slack and email run on the loop; sync callables borrow
# a thread only while they run), so the default is set by what a claim costs: 256 drained W1
# about a quarter faster than 64 on PostgreSQL, through Redis and on SQLite alike, with fewer
# statements and commits per run (docs/benchmarks.md). Queues of shell commands or CPU-bound
# sync callables are better given a concurrency near the machine's cores.
DEFAULT_CONCURRENCY = 256
Kind = Literal["str", "optional_str", "int", "days", "seconds", "bool", "queues", "str_list",
               "brokers", "priorities"]
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_queues(value: str) -> tuple[tuple[str, int], ...]:
    """``"default:16,mail:4"`` as ``(("default", 16), ("mail", 4))``; a bare name gets 256.
    A priority after an ``@`` (``"critical:8@10"``) is read by ``priorities_in_queues``."""
    if not value.strip():
        raise ConfigError("queues", "must name at least one queue, e.g. 'default:16,mail:4'")
    queues: list[tuple[str, int]] = []
    for item in value.split(","):
        name, colon, count = (part.strip() for part in split_priority(item)[0].partition(":"))
        if not name:
            raise ConfigError("queues", f"has an entry with no queue name in {value!r}")
        if not colon:
            queues.append((name, DEFAULT_CONCURRENCY))
        elif re.fullmatch(r"[0-9]+", count):
            queues.append((name, int(count)))
        else:
            raise ConfigError(
                "queues", f"concurrency of {name!r} must be a whole number (got {count!r})"
            )
    result = tuple(queues)
    check_queues(result)
    return result


def coerce(value: object, kind: Kind, name: str, where: str, *, text: bool) -> object:
    """One value of one kind. ``text``: it came as a string (env, CLI) and may be parsed."""
    return COERCERS[kind](value, name, where, text)


def _coerce_str(value: object, name: str, where: str, text: bool) -> str:
    if not isinstance(value, str):
        raise bad(name, "must be a string", value, where)
    return value


def _coerce_optional_str(value: object, name: str, where: str, text: bool) -> str | None:
    return _coerce_str(value, name, where, text) or None  # "" unsets


def _coerce_bool(value: object, name: str, where: str, text: bool) -> bool:
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) and text else None
    if word not in (*_TRUE, *_FALSE):
        raise bad(name, "must be true or false", value, where)
    return word in _TRUE


def _coerce_int(value: object, name: str, where: str, text: bool) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and text and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        return int(value)
    raise bad(name, "must be an integer", value, where)


def _coerce_days(value: object, name: str, where: str, text: bool) -> float:
    """A number of days, whole or not (``0.01``); bounds are checked by ``validate``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and text:
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise bad(name, "must be a number of days such as 30 or 0.5", value, where)


def _coerce_str_list(value: object, name: str, where: str, text: bool) -> tuple[str, ...]:
    """A list of strings, or from text one comma-separated string."""
    if isinstance(value, str) and text:
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise bad(name, "must be a list of strings", value, where)


def _coerce_seconds(value: object, name: str, where: str, text: bool) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_duration(value.strip(), name)
        except ValidationError as exc:
            raise ConfigError(name, f"{exc.reason} ({where})") from None
    raise bad(name, "must be a number of seconds or a duration such as '30s'", value, where)


def _coerce_queues(value: object, name: str, where: str, text: bool) -> tuple[tuple[str, int], ...]:
    """``"default:16,mail:4"``, a list of such strings, or a table of name = concurrency."""
    try:
        if isinstance(value, str):
            return parse_queues(value)
        if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
            return parse_queues(",".join(value))
        if isinstance(value, list | tuple) and all(
            isinstance(item, tuple) and len(item) == 2 for item in value
        ):
            check_queues(tuple(value))
            return tuple(value)
        if isinstance(value, Mapping):
            queues = tuple((str(name), count) for name, count in value.items())
            check_queues(queues)
            return queues
    except ConfigError as exc:
        raise ConfigError("queues", f"{exc.reason} ({where})") from None
    raise bad("queues", "must be a string such as 'default:16,mail:4' or a table", value, where)


def _coerce_brokers(value: object, name: str, where: str, text: bool
                    ) -> tuple[tuple[str, str], ...]:
    """Named broker URLs: a table (TOML), or from text a JSON object; a URL may be a secret
    (``{"$secret": "NAME"}`` or ``"$secret:NAME"``)."""
    if isinstance(value, str) and text:
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise bad(name, 'must be a JSON object such as {"events": "amqp://..."}', value,
                       where) from None
    if isinstance(value, list | tuple) and all(
            isinstance(item, tuple) and len(item) == 2 for item in value):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise bad(name, "must be a table of broker name = URL", value, where)
    brokers: list[tuple[str, str]] = []
    for broker, given in value.items():
        url = given
        if isinstance(given, Mapping) and len(given) == 1 and isinstance(given.get("$secret"), str):
            url = CONFIG_REF_PREFIX + given["$secret"]
        if not isinstance(url, str):
            raise ConfigError(name, f"{broker!r} must be a URL or {{\"$secret\": NAME}} "
                              f"({where})")
        brokers.append((str(broker), url))
    return tuple(brokers)


def bad(name: str, rule: str, value: object, where: str) -> ConfigError:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return ConfigError(name, f"{rule} (got {shown} {where})")


COERCERS: dict[Kind, Callable[[object, str, str, bool], object]] = {
    "str": _coerce_str,
    "optional_str": _coerce_optional_str,
    "int": _coerce_int,
    "days": _coerce_days,
    "seconds": _coerce_seconds,
    "bool": _coerce_bool,
    "queues": _coerce_queues,
    "str_list": _coerce_str_list,
    "brokers": _coerce_brokers,
    "priorities": lambda value, name, where, text: parse_queue_priorities(value, where),
}
