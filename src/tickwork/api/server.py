"""Serving the app in-process: uvicorn as a task of the caller's event loop.

The service (or ``tickwork api``) owns the process's signals and decides when to stop, so
uvicorn's own signal capture is turned off; ``stop()`` asks it to finish open requests and
waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator

import uvicorn
from fastapi import FastAPI

from tickwork.errors import TickworkError

log = logging.getLogger("tickwork.api")
STARTUP_TIMEOUT_SECONDS = 10.0


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the owner of the process handles SIGTERM and SIGINT

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        except SystemExit:  # uvicorn exits when it cannot bind; here ApiServer.start reports it
            self.should_exit = True


class ApiServer:
    def __init__(self, app: FastAPI, *, host: str, port: int) -> None:
        config = uvicorn.Config(app, host=host, port=port, lifespan="off", access_log=False,
                                log_level="warning", server_header=False)
        self.host = host
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        for server in self._server.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self._server.config.port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(), name="tickwork-api")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STARTUP_TIMEOUT_SECONDS
        while not self._server.started:  # uvicorn offers no event to wait on
            if self._task.done() or loop.time() > deadline:
                await self.stop()
                raise TickworkError(f"could not serve the API on {self.host}:"
                                       f"{self._server.config.port} (is the port in use?)")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception, SystemExit):
            await self._task
        self._task = None
