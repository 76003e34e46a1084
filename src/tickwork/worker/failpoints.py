"""Failpoints: named places in the worker where a fault test can make the process die.

``TICKWORK_FAILPOINTS`` lists them, comma-separated, each ``point=action[:probability][@count]``:

- ``after_execute=kill``      every time a job has run, before its result is handed to the completer
- ``after_execute=kill:0.2``  each time with probability 0.2
- ``after_commit=kill@3``     the third time a batch of results has been committed to the store
- ``after_ack=kill``          after a batch of Redis stream entries is acknowledged (Redis dispatch)
- ``consume_after_commit=kill``  after a consumed job command is committed, before its ack

The one action is ``kill``: the process sends itself SIGKILL, as ``kill -9`` would. The variable is
read once, when this module is first imported (at worker start); without it ``failpoint()`` is a
dictionary lookup that finds nothing. ``TICKWORK_TEST_FAILPOINT_SEED`` seeds the probability
draws.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import time
from dataclasses import dataclass

from tickwork.errors import ConfigError

ENV = "TICKWORK_FAILPOINTS"
SEED_ENV = "TICKWORK_TEST_FAILPOINT_SEED"
POINTS = ("after_execute", "after_commit", "after_ack", "consume_after_commit")
ACTIONS = ("kill",)

log = logging.getLogger("tickwork.worker.failpoints")


@dataclass(frozen=True, slots=True)
class Failpoint:
    point: str
    action: str = "kill"
    probability: float = 1.0
    at_hit: int | None = None  # fire on this hit only (1-based); None: every hit (by probability)


def parse(spec: str) -> dict[str, Failpoint]:
    """``after_execute=kill:0.2,after_commit=kill@3`` -> failpoints by point name."""
    points: dict[str, Failpoint] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        point, sep, rest = item.partition("=")
        point = point.strip()
        if not sep or point not in POINTS:
            raise ConfigError(ENV, f"{item!r}: expected point=action with point one of "
                                   f"{', '.join(POINTS)}")
        rest, _, count = rest.partition("@")
        action, _, probability = rest.partition(":")
        if action not in ACTIONS:
            raise ConfigError(ENV, f"{item!r}: the action must be one of {', '.join(ACTIONS)}")
        try:
            p = float(probability) if probability else 1.0
            n = int(count) if count else None
        except ValueError:
            raise ConfigError(ENV, f"{item!r}: probability is a number in (0, 1], count a "
                                   "positive integer") from None
        if not 0 < p <= 1 or (n is not None and n < 1):
            raise ConfigError(ENV, f"{item!r}: probability must be in (0, 1] and count >= 1")
        points[point] = Failpoint(point, action, p, n)
    return points


_active: dict[str, Failpoint] = {}
_hits: dict[str, int] = {}
_rng = random.Random()  # noqa: S311  (fault injection, not cryptography)


def configure(spec: str, seed: str | None = None) -> None:
    """Replace the active failpoints (the environment's, at import)."""
    global _active  # noqa: PLW0603  (one process-wide table, set once at start)
    _active = parse(spec)
    _hits.clear()
    _rng.seed(seed)


def active() -> dict[str, Failpoint]:
    return dict(_active)


def failpoint(name: str) -> None:
    """Do what the failpoint ``name`` is configured to do; nothing when it is not configured."""
    fp = _active.get(name)
    if fp is None:
        return
    hit = _hits[name] = _hits.get(name, 0) + 1
    if fp.at_hit is not None and hit != fp.at_hit:
        return
    if fp.probability < 1 and _rng.random() >= fp.probability:
        return
    log.critical("failpoint %s hit %d: killing process %d at %.6f", name, hit, os.getpid(),
                 time.time())
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


configure(os.environ.get(ENV, ""), os.environ.get(SEED_ENV))
