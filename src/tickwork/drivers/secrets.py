"""The SecretStore seam: where encrypted secrets live, apart from the main Store.

A driver stores opaque ciphertext (Fernet tokens made by ``tickwork.secrets.SecretKeyring``):
it never sees a plaintext value and never needs the key. Names are case-sensitive, at most
``MAX_SECRET_NAME`` characters of ``A-Z a-z 0-9 _ . -`` (checked by the callers, in
``tickwork.secrets``). Every method is async; ``now`` comes from the caller, as in the Store.

A driver (``drivers.sqlite.secrets``, ``drivers.postgres.secrets``) keeps one table:
``secrets(name PRIMARY KEY, value, created_at, updated_at)``, created by its store's
migrations, so a migrated database is ready for secrets.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from tickwork.errors import TickworkError

MAX_SECRET_NAME = 128


class SecretNotFound(TickworkError, LookupError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no secret {name!r}; set it with `tickwork secrets set {name}`")


class SecretStore(Protocol):
    async def secret_set(self, name: str, ciphertext: bytes, now: datetime) -> None:
        """Insert or replace. A new secret gets created_at = updated_at = now; a replaced one
        keeps its created_at."""
        ...

    async def secret_get(self, name: str) -> bytes:
        """The ciphertext, or SecretNotFound."""
        ...

    async def secret_list(self) -> list[tuple[str, datetime]]:
        """``(name, updated_at)`` for every secret, by name. Never the values."""
        ...

    async def secret_delete(self, name: str) -> None:
        """Delete, or SecretNotFound if there is no such secret."""
        ...

    async def close(self) -> None:
        """Release connections (a no-op where there are none)."""
        ...
