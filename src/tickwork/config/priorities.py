"""Queue priorities: which of a worker's queues is served first when the store is the only
source of work (Redis unreachable: degraded mode), and which queues the reconciler re-adds to
Redis first when it comes back.

Written as ``queue_priorities = "critical:10,mail:5"`` (a TOML table works too), or inside
``queues`` after an ``@``: ``--queues critical:8@10,default:16`` (critical, concurrency 8,
priority 10). A queue not named has priority 0; higher is served first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tickwork.errors import ConfigError

MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
Priorities = tuple[tuple[str, int], ...]
_NUMBER = re.compile(r"[+-]?[0-9]+")


def split_priority(item: str, field: str = "queues") -> tuple[str, int | None]:
    """``"critical:8@10"`` as ``("critical:8", 10)``; without an ``@``, ``(item, None)``."""
    head, at, tail = item.partition("@")
    if not at:
        return item, None
    return head, _priority(head.partition(":")[0].strip(), tail.strip(), field)


def priorities_in_queues(value: object) -> Priorities:
    """The ``@P`` priorities written in a ``queues`` value (text or a list of texts)."""
    items: Sequence[object] = value.split(",") if isinstance(value, str) else (
        value if isinstance(value, list | tuple) else ())
    out = []
    for item in items:
        if isinstance(item, str):
            head, priority = split_priority(item)
            if priority is not None:
                out.append((head.partition(":")[0].strip(), priority))
    return tuple(out)


def parse_queue_priorities(value: object, where: str = "") -> Priorities:
    """``"critical:10,mail:5"``, a list of such strings, or a table of name = priority."""
    suffix = f" ({where})" if where else ""
    if isinstance(value, list | tuple) and all(isinstance(i, str) for i in value):
        value = ",".join(value)
    pairs: list[tuple[str, object]] = []
    if isinstance(value, str):
        for item in (i for i in value.split(",") if i.strip()):
            name, colon, number = (part.strip() for part in item.partition(":"))
            if not colon:
                raise ConfigError("queue_priorities", f"{item.strip()!r} must be "
                                  f"NAME:PRIORITY, e.g. 'critical:10'{suffix}")
            pairs.append((name, number))
    elif isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple) and all(
            isinstance(i, tuple) and len(i) == 2 for i in value):
        pairs = [(str(k), v) for k, v in value]
    else:
        raise ConfigError("queue_priorities", "must be a string such as 'critical:10,mail:5' "
                          f"or a table{suffix}")
    out = []
    for queue, given in pairs:
        text = given if isinstance(given, str) else (
            str(given) if isinstance(given, int) and not isinstance(given, bool)
            else repr(given))
        out.append((queue, _priority(queue, text, "queue_priorities", suffix)))
    check_priorities(tuple(out))
    return tuple(out)


def check_priorities(priorities: Priorities) -> None:
    seen: set[str] = set()
    for name, priority in priorities:
        if not name:
            raise ConfigError("queue_priorities", "has an entry with no queue name")
        if name in seen:
            raise ConfigError("queue_priorities", f"lists {name!r} twice")
        seen.add(name)
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise ConfigError("queue_priorities", f"priority of {name!r} must be from "
                              f"{MIN_PRIORITY} to {MAX_PRIORITY} (got {priority})")


def merge_priorities(base: Priorities, over: Priorities) -> Priorities:
    """``base`` with the queues ``over`` names set to its priorities."""
    merged = dict(base)
    merged.update(over)
    return tuple(merged.items())


def _priority(name: str, text: str, field: str, suffix: str = "") -> int:
    if not _NUMBER.fullmatch(text):
        raise ConfigError(field, f"priority of {name!r} must be a whole number "
                          f"(got {text!r}){suffix}")
    value = int(text)
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ConfigError(field, f"priority of {name!r} must be from {MIN_PRIORITY} to "
                          f"{MAX_PRIORITY} (got {value}){suffix}")
    return value
