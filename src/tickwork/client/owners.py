"""Queues and limit keys a namespace owns (docs/namespaces.md#queues-and-limit-keys).

A queue's or a key's row may name one namespace that owns it; most name none and are shared
by every namespace, as all were before owners existed. Only a client (or token) without a
namespace gives one to a namespace or shares it again.

- A client of one namespace changes (pauses, limits, deletes) what its namespace owns; a
  shared one is Forbidden (it may read it, not change it); one another namespace owns is not
  found, worded as for one that does not exist, so whether it exists is not revealed.
- A job names a queue or ``limit_key`` its namespace owns or a shared one, whoever creates
  it: naming one another namespace owns is refused (ValidationError naming the field), in
  the same words as for one that does not exist. The claim never looks at owners.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tickwork.drivers.limits import KEEP, KEY_BUCKET, QUEUE_BUCKET, LimitOwners, Owner
from tickwork.errors import Forbidden, TickworkError, ValidationError
from tickwork.models import JobSpec

_WHAT = {QUEUE_BUCKET: "queue", KEY_BUCKET: "limit key"}


class NotInNamespace(TickworkError, LookupError):
    """A queue or key this namespace cannot see: absent, or owned by another namespace (which
    is not said)."""

    def __init__(self, kind: str, name: str, namespace: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(absent(kind, name, namespace))


def absent(kind: str, name: str, namespace: str) -> str:
    return f"no {_WHAT[kind]} {name!r} in namespace {namespace!r}"


def may_change(owners: LimitOwners, kind: str, name: str, namespace: str | None,
               owner: Owner = KEEP) -> None:
    """Whether a client of ``namespace`` (None: every one) may change the queue or key
    ``name`` and, with ``owner``, give it that owner."""
    if namespace is None:
        return
    current = (owners.queues if kind == QUEUE_BUCKET else owners.keys).get(name)
    if current is None:
        raise Forbidden(f"{_WHAT[kind]} {name!r} is shared by every namespace: changing it "
                        "needs a token without a namespace")
    if current != namespace:
        raise NotInNamespace(kind, name, namespace)
    if owner is not KEEP and owner != namespace:
        raise Forbidden(f"only a token without a namespace gives a {_WHAT[kind]} to a "
                        "namespace or shares it")


def check_names(spec: JobSpec, namespace: str, owners: LimitOwners) -> None:
    """A job of ``namespace`` names a queue and a ``limit_key`` it owns or shares."""
    owner = owners.queues.get(spec.queue)
    if owner is not None and owner != namespace:
        raise ValidationError("queue", absent(QUEUE_BUCKET, spec.queue, namespace))
    if spec.limit_key is not None:
        owner = owners.keys.get(spec.limit_key)
        if owner is not None and owner != namespace:
            raise ValidationError("limit_key", absent(KEY_BUCKET, spec.limit_key, namespace))


async def owner_check(namespace: str, owners: Callable[[], Awaitable[LimitOwners]]
                      ) -> Callable[[JobSpec], None]:
    """``check_names`` for ``namespace``, reading the owners once; when nothing is owned
    (the usual case) the check does nothing."""
    found = await owners()
    if not found.queues and not found.keys:
        return lambda spec: None
    return lambda spec: check_names(spec, namespace, found)
