"""The SecretStore seam: where encrypted secrets live, apart from the main Store.

A driver stores opaque ciphertext (Fernet tokens made by ``tickwork.secrets.SecretKeyring``):
it never sees a plaintext value and never needs the key. Names are case-sensitive, at most
``MAX_SECRET_NAME`` characters of ``A-Z a-z 0-9 _ . -`` (checked by the callers, in
``tickwork.secrets``). Every method is async; ``now`` comes from the caller, as in the Store.

A secret belongs to a namespace, as a job does: ``(namespace, name)`` is its key, and a job
resolves its references in its own namespace only, so a tenant can neither read nor even
learn of another's secrets. ``namespace`` defaults to ``default``, where secrets set before
namespaces had them live and where the settings' ``$secret:NAME`` references read.

A driver (``drivers.sqlite.secrets``, ``drivers.postgres.secrets``) keeps one table:
``secrets(namespace, name, value, created_at, updated_at)`` keyed by ``(namespace, name)``,
created by its store's migrations, so a migrated database is ready for secrets.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.errors import TickworkError

MAX_SECRET_NAME = 128


class SecretNotFound(TickworkError, LookupError):
    """No such secret in the namespace; the message names only that namespace, never whether
    another one has a secret of the name."""

    def __init__(self, name: str, namespace: str = DEFAULT_NAMESPACE) -> None:
        self.name = name
        self.namespace = namespace
        if namespace == DEFAULT_NAMESPACE:
            super().__init__(f"no secret {name!r}; set it with `tickwork secrets set {name}`")
        else:
            super().__init__(f"no secret {name!r} in namespace {namespace!r}; set it with "
                             f"`tickwork secrets set {name} --namespace {namespace}`")


class SecretStore(Protocol):
    async def secret_set(self, name: str, ciphertext: bytes, now: datetime, *,
                         namespace: str = DEFAULT_NAMESPACE) -> None:
        """Insert or replace. A new secret gets created_at = updated_at = now; a replaced one
        keeps its created_at."""
        ...

    async def secret_get(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> bytes:
        """The ciphertext, or SecretNotFound (in ``namespace`` only)."""
        ...

    async def secret_list(self, *, namespace: str = DEFAULT_NAMESPACE
                          ) -> list[tuple[str, datetime]]:
        """``(name, updated_at)`` for every secret of the namespace, by name. Never the
        values."""
        ...

    async def secret_namespaces(self) -> list[str]:
        """Every namespace that holds a secret, by name (``secrets rotate`` does them all)."""
        ...

    async def secret_delete(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        """Delete, or SecretNotFound if the namespace has no such secret."""
        ...

    async def close(self) -> None:
        """Release connections (a no-op where there are none)."""
        ...
