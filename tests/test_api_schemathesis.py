"""A property-based run over the OpenAPI document: whatever schemathesis sends, no 5xx.

The app is built when the module loads (schemathesis reads the schema at collection), on a
SQLite file in a temporary directory that is removed at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.client import AsyncClient
from tickwork.drivers.sqlite.store import SqliteStore

_DIR = tempfile.mkdtemp(prefix="tickwork-fuzz-")
atexit.register(shutil.rmtree, _DIR, True)
_STORE = SqliteStore(f"sqlite:///{_DIR}/fuzz.db")
_CLIENT = AsyncClient(_STORE)


async def _setup() -> str:
    await _STORE.migrate()
    await _CLIENT.create_job({"name": "existing", "schedule": {"every": "1h"}, "kind": "http",
                              "payload": {"url": "https://example.org/"}})
    return (await create_token(_CLIENT, "fuzz", "admin"))[0]


TOKEN = asyncio.run(_setup())
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_CLIENT))


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: Any) -> None:
    response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)
