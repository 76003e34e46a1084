"""What every tickwork process shares: its driver and metrics, signals, and the stop order.

A process is started once, runs until SIGTERM or SIGINT, and stops gracefully: first what
faces the outside (the API or metrics server), then its loops in the order it gives, then the
worker pool (running attempts finish within the grace period, G10), and last the resources
everything used: executors, the secret store, the dispatch and the store.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from typing import TYPE_CHECKING, Any, Protocol

from tickwork.clock import Clock, SystemClock
from tickwork.config import Settings
from tickwork.drivers import Driver
from tickwork.metrics import Metrics

if TYPE_CHECKING:
    from tickwork.drivers.redis.dispatch import RedisDispatch
    from tickwork.executors.base import Executor
    from tickwork.secrets import SecretResolver
    from tickwork.worker.pool import WorkerPool

log = logging.getLogger("tickwork.runtime")

# How many new objects a process makes before the cycle collector looks at the young ones
# (CPython's default: 700). A run makes a few dozen and nearly all are freed by their reference
# counts, so at 700 the collector ran every few runs and walked the batch still running: 3 % of
# a worker's instructions per execution, 1.6 % at 10,000 (python -m tickwork.bench.instructions).
YOUNG_OBJECTS_PER_COLLECTION = 10_000


def collect_less_often() -> None:
    """Once started: what the start made (modules, settings, pools) is left out of every
    later collection, and the young objects are looked at less often."""
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS_PER_COLLECTION, 20, 20)


class Stoppable(Protocol):
    async def stop(self) -> None: ...


class Process:
    kind = "process"

    def __init__(self, settings: Settings, driver: Driver, clock: Clock | None) -> None:
        self.settings = settings
        self.driver = driver
        self.store = driver.store
        self.clock = clock or SystemClock()
        self.metrics = Metrics()
        self.executors: dict[str, Executor] = {}
        self.secrets: SecretResolver | None = None
        self.dispatch: RedisDispatch | None = None
        self.pool: WorkerPool | None = None
        self.http: Any = None  # the API or the metrics server, while serving

    async def start(self) -> None:
        raise NotImplementedError

    def loops(self) -> tuple[Stoppable, ...]:
        """The background loops (and listeners) to stop, in order, before the worker pool."""
        return ()

    async def stop(self) -> None:
        """Graceful: stop serving, planning and claiming, let running attempts finish, then
        release what the process holds."""
        if self.http is not None:
            await self.http.stop()
            self.http = None
        for loop in self.loops():
            await loop.stop()
        await self._stop_more()
        if self.pool is not None:
            await self.pool.stop()
        for executor in self.executors.values():
            await executor.close()
        if self.secrets is not None:
            await self.secrets.store.close()
        if self.dispatch is not None:
            await self.dispatch.close()
        await self.driver.close()
        log.info("stopped")

    async def _stop_more(self) -> None:
        """What a kind of process stops after its loops and before its pool."""

    async def run_until_signalled(self) -> None:
        """Start, run until SIGTERM or SIGINT, then stop gracefully."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
            collect_less_often()
            await stop.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.stop()

    # -- a scheduler's or worker's own /metrics and /healthz ---------------------------------

    async def health(self) -> dict[str, Any]:
        raise NotImplementedError

    async def metrics_text(self) -> str:
        raise NotImplementedError

    async def serve_metrics(self) -> None:
        """Serve /metrics and /healthz on ``metrics_address``, when it is set."""
        if self.settings.metrics_address is None:
            return
        from tickwork.api.process import serve_process  # noqa: PLC0415  (FastAPI: only to serve)

        self.http = await serve_process(self, self.settings.metrics_address, self.kind)

    async def health_of(self, mode: str, **fields: object) -> dict[str, Any]:
        """The /healthz body: the store's reachability, the dispatch mode and ``fields``."""
        from tickwork.api.process import status_of, store_reachable  # noqa: PLC0415

        store_ok = await store_reachable(self.store)
        return {"status": status_of(store_ok, mode), "role": self.kind, "mode": mode,
                "store": "ok" if store_ok else "unreachable", **fields}

    def exit_now_if_threads_abandoned(self) -> None:
        """A sync Python job still running in a thread past the grace period cannot be stopped,
        and the interpreter would wait for it at exit. Its attempt was already given back to
        the store, so leave now rather than run it to the end unrecorded."""
        if self.pool is not None and self.pool.released:
            log.warning("exiting with unfinished job threads abandoned; their attempts were "
                        "released and will run again")
            logging.shutdown()
            os._exit(0)
