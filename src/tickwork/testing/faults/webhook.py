"""A webhook target that misbehaves: ``/hang`` never answers, ``/trickle`` sends a byte now and
then and never finishes, ``/ok`` answers 200. Every request is recorded in the fault ledger as an
execution (the target is where an HTTP job executes), failed unless it was ``/ok``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from aiohttp import web

from tickwork.testing.faults import ledger


class MisbehavingTarget:
    def __init__(self, ledger_path: Path, trickle_every: float = 0.2) -> None:
        self.ledger_path = ledger_path
        self.trickle_every = trickle_every
        self.closing = asyncio.Event()
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/{mode}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        self.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        self.requests += 1
        h = request.headers
        ledger.insert(
            self.ledger_path, key=h["Idempotency-Key"], job_id=h["Tickwork-Job-Id"], job="",
            scheduled_at=datetime.fromisoformat(h["Tickwork-Scheduled-At"]).timestamp(),
            attempt=int(h["Tickwork-Attempt"]), worker=f"webhook /{mode}", ended=True,
            outcome="ok" if mode == "ok" else "failed")
        if mode == "hang":
            await self.closing.wait()
        elif mode == "trickle":
            response = web.StreamResponse()
            await response.prepare(request)
            while not self.closing.is_set():
                await response.write(b".")
                await asyncio.sleep(self.trickle_every)
            return response
        return web.Response(text="ok")
