"""Jobs managed through a message stream (``tickwork consume``; docs/streams.md).

Services send job commands (upsert, delete, pause, resume, trigger) on a Redis stream, a
RabbitMQ queue or a NATS JetStream subject; a consumer applies each to the store and
acknowledges it only once its transaction committed. ``commands.py`` parses and applies,
``handling.py`` decides replies and dead letters, ``sources.py`` holds what every source
shares, and there is one module per broker.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from tickwork.client import AsyncClient
from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.config.checks import CONSUMABLE
from tickwork.errors import ConfigError
from tickwork.executors.brokers import broker_family
from tickwork.executors.ssrf import OutboundPolicy
from tickwork.metrics import Metrics
from tickwork.streams.handling import CommandHandler
from tickwork.streams.sources import (
    SourceConfig,
    StreamSource,
    broker_url,
    configured_sources,
)

if TYPE_CHECKING:
    from tickwork.secrets import SecretResolver

__all__ = ["SourceConfig", "StreamSource", "configured_sources", "open_sources"]


def consumer_name(settings: Settings) -> str:
    """Stable across restarts on one host, so a restarted consumer reads back what it was
    delivered and did not acknowledge (Redis)."""
    return settings.worker_id or f"consume-{socket.gethostname()}"


async def open_sources(settings: Settings, *, client: AsyncClient, clock: Clock,
                       metrics: Metrics | None = None,
                       secrets: SecretResolver | None = None) -> list[StreamSource]:
    """One source loop per ``consume`` entry (not started)."""
    from tickwork.streams.amqp_source import AmqpSource  # noqa: PLC0415  (the brokers extra)
    from tickwork.streams.nats_source import NatsSource  # noqa: PLC0415
    from tickwork.streams.redis_source import RedisSource  # noqa: PLC0415

    kinds: dict[str, type[StreamSource]] = {"redis": RedisSource, "amqp": AmqpSource,
                                            "nats": NatsSource}
    policy = OutboundPolicy(settings.executors.outbound_allow)
    sources: list[StreamSource] = []
    for config in configured_sources(settings):
        family = broker_family(await broker_url(config, secrets))
        kind = kinds.get(family or "")
        if kind is None:
            raise ConfigError("consume", f"{config.label}: broker {config.broker!r} is "
                              f"{family or 'not a broker URL'}; commands are read from "
                              f"{', '.join(CONSUMABLE)} brokers only")
        sources.append(kind(config=config, policy=policy, clock=clock,
                            consumer=consumer_name(settings), secrets=secrets,
                            lease_seconds=settings.lease_seconds,
                            handler=CommandHandler(client, source=config.label,
                                                   where=(config.source, config.dead),
                                                   metrics=metrics)))
    return sources
