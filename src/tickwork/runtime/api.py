"""``tickwork api``: the REST API, the dashboard and /metrics alone, on the configured store.

Its client refuses a job that could never run as far as this process's settings know it
(its workers' settings may differ); with Redis configured, what it triggers or backfills goes
straight into Redis' due set.
"""

from __future__ import annotations

import logging

from tickwork.client import AsyncClient
from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.drivers import open_driver
from tickwork.runtime.base import Process
from tickwork.runtime.client import client_for, read_client_for

log = logging.getLogger("tickwork.cli")


class ApiProcess(Process):
    kind = "api"

    def __init__(self, settings: Settings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, open_driver(settings.database), clock)
        self.client: AsyncClient | None = None
        self.reader: AsyncClient | None = None  # read_database's, for lists and stats

    async def start(self) -> None:
        from tickwork.api.app import create_app  # noqa: PLC0415  (FastAPI loads only to serve)
        from tickwork.api.deps import retention_of  # noqa: PLC0415
        from tickwork.api.server import ApiServer  # noqa: PLC0415

        s = self.settings
        self.client = await client_for(s, driver=self.driver)
        self.reader = await read_client_for(s)
        self.http = ApiServer(create_app(self.client, open_access=s.open_access,
                                         allowed_hosts=[s.host], metrics=self.metrics,
                                         access_log=s.access_log,
                                         retention=retention_of(s), read_client=self.reader),
                              host=s.host, port=s.port)
        await self.http.start()
        log.info("API and dashboard on %s/dashboard/ (%s)", self.http.url,
                 "OPEN: no token needed" if s.open_access else "tokens required")

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self.reader is not None:
            await self.reader.close()
        if self.client is not None:
            await self.client.close()  # its store and its Redis dispatch
        else:
            await self.driver.close()
