"""``tickwork consume``: applies job commands read from message streams (docs/streams.md).

One source loop per ``consume`` entry; any number of these processes may read the same
sources (a Redis consumer group, a RabbitMQ queue, a NATS durable consumer share the work).
Its client refuses a job that could never run as far as this process's settings know it,
as ``tickwork api``'s does; workers check again before each run. With Redis configured,
what a trigger command stores goes straight into Redis' due set.
"""

from __future__ import annotations

import logging
from typing import Any

from tickwork.client import AsyncClient
from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.drivers import open_driver
from tickwork.errors import ConfigError
from tickwork.metrics import CONSUMER
from tickwork.runtime.base import Process
from tickwork.runtime.client import client_for
from tickwork.secrets import resolver_for
from tickwork.streams import StreamSource, open_sources

log = logging.getLogger("tickwork.streams")


async def start_sources(process: Process, client: AsyncClient) -> list[StreamSource]:
    """The process's source loops, started (none without ``consume`` settings)."""
    if not process.settings.consume:
        return []
    if process.secrets is None:
        process.secrets = resolver_for(process.driver)
    sources = await open_sources(process.settings, client=client, clock=process.clock,
                                 metrics=process.metrics, secrets=process.secrets)
    for source in sources:
        source.start()
    log.info("consuming job commands from %s",
             ", ".join(source.config.label for source in sources))
    return sources


class ConsumeProcess(Process):
    kind = CONSUMER

    def __init__(self, settings: Settings, *, clock: Clock | None = None) -> None:
        if not settings.consume:
            raise ConfigError("consume", "names no source: set consume (TICKWORK_CONSUME or "
                              "--consume), e.g. 'events/tickwork.commands'")
        super().__init__(settings, open_driver(settings.database), clock)
        self.client: AsyncClient | None = None
        self.sources: list[StreamSource] = []

    async def start(self) -> None:
        self.client = await client_for(self.settings, driver=self.driver)
        self.sources = await start_sources(self, self.client)
        await self.serve_metrics()

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
            self.http = None
        for source in self.sources:
            await source.stop()
        if self.client is not None:
            await self.client.close()  # its store and its Redis dispatch
        else:
            await self.driver.close()
        log.info("stopped")

    async def health(self) -> dict[str, Any]:
        return await self.health_of(self.driver.name,
                                    sources=[s.config.label for s in self.sources])

    async def metrics_text(self) -> str:
        return self.metrics.render_process(CONSUMER)
