"""What every command source shares: where it reads (from the settings), and its loop.

A source is a ``Loop`` whose pass reads one batch (waiting up to ``READ_SECONDS`` for the
first message), hands each message to the ``CommandHandler``, sends the reply and the dead
letter the handler asks for, then acknowledges the message. An error (the broker gone, the
store unreachable) drops the connection and the next pass connects again; what was not
acknowledged is delivered again, and applying it again is harmless.

Broker URLs come from ``executors.brokers`` (a URL may be ``$secret:NAME``), and connections
are made by the publish kind's clients (``executors/brokers.py``), so the outbound guard
checks every broker host before a connect.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.config.checks import parse_consume
from tickwork.errors import ConfigError, TickworkError
from tickwork.executors.brokers import broker_family
from tickwork.executors.ssrf import OutboundPolicy
from tickwork.scheduler.loop import Loop
from tickwork.secrets import config_reference
from tickwork.streams.handling import CommandHandler

if TYPE_CHECKING:
    from tickwork.secrets import SecretResolver

log = logging.getLogger("tickwork.streams")
READ_SECONDS = 1.0  # how long one pass waits for a first message (and so, at most, a stop)
RETRY_SECONDS = 1.0  # after a failed pass, doubling while passes keep failing ...
MAX_RETRY_SECONDS = 30.0  # ... up to this
BATCH = 64
GROUP = "tickwork"  # the Redis consumer group, the base of a NATS durable consumer's name
DEAD_SUFFIX = ".dead"


@dataclass(frozen=True, slots=True)
class SourceConfig:
    broker: str  # its name in executors.brokers
    source: str  # the stream, queue or subject
    url: str  # or $secret:NAME

    @property
    def label(self) -> str:
        return f"{self.broker}/{self.source}"

    @property
    def dead(self) -> str:
        """Where commands that cannot be applied go: ``<source>.dead``."""
        return self.source + DEAD_SUFFIX


def configured_sources(settings: Settings) -> list[SourceConfig]:
    brokers = dict(settings.executors.brokers)
    return [SourceConfig(broker, source, brokers[broker])
            for broker, source in map(parse_consume, settings.consume)]


async def broker_url(config: SourceConfig, secrets: SecretResolver | None) -> str:
    secret = config_reference(config.url)
    if secret is None:
        return config.url
    if secrets is None:
        raise ConfigError("consume", f"broker {config.broker!r}'s URL is secret {secret!r}, "
                          "but this process has no secret store")
    return await secrets.get(secret)


class StreamSource(Loop):
    """One source's loop; a subclass reads its broker in ``consume_once``."""

    name = "consume"
    family = ""

    def __init__(self, *, config: SourceConfig, handler: CommandHandler,
                 policy: OutboundPolicy, clock: Clock, consumer: str,
                 secrets: SecretResolver | None = None, batch: int = BATCH,
                 lease_seconds: float = 30.0) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        super().__init__(clock=clock, interval_seconds=RETRY_SECONDS)
        self.config = config
        self.handler = handler
        self.policy = policy
        self.consumer = consumer
        self.secrets = secrets
        self.batch = batch
        self.lease_seconds = lease_seconds  # unacknowledged this long: another may take it
        self.failures = 0  # passes failed in a row

    async def url(self) -> str:
        url = await broker_url(self.config, self.secrets)
        family = broker_family(url)
        if family != self.family:
            what = family or "not a broker URL"
            raise ConfigError("consume", f"broker {self.config.broker!r} is {what}, "
                              f"not {self.family}")
        return url

    async def tick(self, now: datetime) -> bool:
        try:
            more = await self.consume_once()
        except Exception:
            await self.close()  # the next pass connects again; unacknowledged ones come again
            raise
        self.failures = 0
        return more

    async def consume_once(self) -> bool:
        """Read and handle one batch; whether more is waiting."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    def failed(self, exc: Exception) -> float:
        """Log (the first of a run of failures with its traceback) and back off."""
        self.failures += 1
        pause = min(RETRY_SECONDS * 2.0 ** min(self.failures - 1, 16), MAX_RETRY_SECONDS)
        if isinstance(exc, TickworkError) or self.failures > 1:
            log.warning("consuming %s: %s: %s; again in %gs", self.config.label,
                        type(exc).__name__, exc, pause)
        else:
            log.exception("consuming %s failed; again in %gs", self.config.label, pause)
        return pause

    async def stop(self) -> None:
        await super().stop()
        await self.close()
