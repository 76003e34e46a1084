"""The client's namespaces: each one's quotas and usage, and setting quotas. A mixin of
``AsyncClient``; the checks the quotas make are in ``client/quotas.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tickwork.client.quotas import merge_quotas, namespace_info
from tickwork.clock import Clock
from tickwork.drivers.limits import hour_start
from tickwork.drivers.namespaces import (
    NAMESPACE_NAME,
    NAMESPACE_RULE,
    NamespaceInfo,
    NamespaceListParams,
    NamespaceSetParams,
)
from tickwork.errors import ValidationError

if TYPE_CHECKING:
    from tickwork.drivers.admin import AdminStore


def check_namespace(name: str) -> str:
    if not isinstance(name, str) or not NAMESPACE_NAME.fullmatch(name):
        raise ValidationError("namespace", NAMESPACE_RULE)
    return name


class NamespaceMethods:
    clock: Clock
    namespace: str | None

    if TYPE_CHECKING:  # AsyncClient's property
        @property
        def admin(self) -> AdminStore: ...

    async def list_namespaces(self) -> list[NamespaceInfo]:
        """Namespaces with their quotas and usage: only this client's own, if it has one."""
        now = self.clock.now()
        if self.namespace is not None:
            return [await namespace_info(self.admin, self.namespace, now)]
        return await self.admin.namespace_list(NamespaceListParams(hour_start=hour_start(now)))

    async def set_quotas(self, name: str, changes: Mapping[str, object]) -> NamespaceInfo:
        """Change some of a namespace's quotas (``max_jobs``, ``max_runs_per_hour``,
        ``max_payload_bytes``: a whole number >= 0, or None to lift it); the others keep
        their values."""
        name = check_namespace(name)
        if self.namespace is not None and name != self.namespace:
            raise ValidationError("namespace", "a client of one namespace sets only its own")
        now = self.clock.now()
        current = await namespace_info(self.admin, name, now)
        quotas = merge_quotas(current.quotas, changes)
        await self.admin.namespace_set(NamespaceSetParams(name=name, quotas=quotas, now=now))
        return await namespace_info(self.admin, name, now)
