"""The vacuumer: where the database server does not vacuum on its own (PostgreSQL with
autovacuum off), tickwork does it for its tables, as autovacuum would.

Without it a busy deployment degrades on such a server: every planned run rewrites its job's
row and every claim and completion its occurrence's, the dead rows pile up in tables and
indexes, and plans made while the tables were small (a prepared statement's generic plan)
stay as they grow. Each pass asks the store for what its thresholds say is due; the store
answers [] at once where the server does it (the default) and on SQLite.
"""

from __future__ import annotations

import logging
from datetime import datetime

from tickwork.clock import Clock
from tickwork.drivers.history import HistoryStore
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.vacuumer")
VACUUM_INTERVAL_SECONDS = 60.0  # autovacuum's own default naptime


class Vacuumer(Loop):
    name = "vacuumer"

    def __init__(self, *, store: HistoryStore, clock: Clock,
                 interval_seconds: float = VACUUM_INTERVAL_SECONDS) -> None:
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self._said = False

    async def run_once(self) -> list[str]:
        done = await self.store.history_vacuum()
        if done and not self._said:
            log.warning("autovacuum is off on this PostgreSQL server: tickwork vacuums and "
                        "analyzes its own tables by the server's thresholds (now: %s); turn "
                        "autovacuum on to leave it to the server", ", ".join(done))
            self._said = True
        elif done:
            log.debug("vacuumed or analyzed %s", ", ".join(done))
        return done

    async def tick(self, now: datetime) -> bool:
        await self.run_once()
        return False
