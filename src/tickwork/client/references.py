"""A job's secret references, checked in its own namespace when it is created or changed.

A secret belongs to a namespace (drivers/secrets.py), and a job resolves ``{"$secret": name}``
in its namespace only, so a reference to a secret the namespace lacks could never run: it is
refused up front, by name. The error names the job's namespace only, never whether another
one has a secret of that name. The worker checks again when it resolves (the job may have been
written to the store directly, or the secret deleted since).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

from tickwork.drivers.secrets import SecretNotFound
from tickwork.errors import ValidationError
from tickwork.models import JobSpec
from tickwork.secrets import find_references, reference_paths

RESOLVED_KEPT = 256  # payload objects a SecretCheck remembers as resolving


def has_references(spec: JobSpec) -> bool:
    return bool(find_references(spec.payload)) or bool(
        spec.alerts and find_references(json.loads(spec.alerts)))


class SecretCheck:
    """The names of one namespace's secrets, against which specs are checked.

    Bulk parsing hands equal payloads of one kind out as one object (document/__init__.py),
    so a payload object already found to resolve is not walked again."""

    __slots__ = ("_resolved", "names", "namespace")

    def __init__(self, namespace: str, names: frozenset[str]) -> None:
        self.namespace = namespace
        self.names = names
        # id -> the payload itself, which it keeps alive, so no other object takes its id
        self._resolved: dict[int, object] = {}

    def check(self, spec: JobSpec) -> None:
        """ValidationError naming the field of the first reference the namespace cannot
        resolve."""
        payload = spec.payload
        if self._resolved.get(id(payload)) is not payload:
            self._check(payload, "payload")
            if len(self._resolved) < RESOLVED_KEPT:
                self._resolved[id(payload)] = payload
        if spec.alerts:
            self._check(json.loads(spec.alerts), "alerts")

    def _check(self, value: object, root: str) -> None:
        # Most documents refer to no secret, or to ones the namespace has: the names alone
        # tell (no field paths built, a fifth of bulk creation's time when they were).
        if all(name in self.names for name in find_references(value)):
            return
        for path, name in reference_paths(value, root):
            if name not in self.names:
                raise ValidationError(path, str(SecretNotFound(name, self.namespace)))


async def secret_check(namespace: str,
                       names: Callable[[str], Awaitable[set[str]]]) -> SecretCheck:
    return SecretCheck(namespace, frozenset(await names(namespace)))


async def check_many(specs: Sequence[JobSpec], namespace: str,
                     names: Callable[[str], Awaitable[set[str]]], *, indexed: bool) -> None:
    """Each spec's references (named with its index, as ``[3].payload.url``, if
    ``indexed``); the namespace's names are read only when some spec has references."""
    flagged = [(index, spec) for index, spec in enumerate(specs) if has_references(spec)]
    if not flagged:
        return
    check = await secret_check(namespace, names)
    for index, spec in flagged:
        try:
            check.check(spec)
        except ValidationError as exc:
            if not indexed:
                raise
            raise ValidationError(f"[{index}].{exc.field}", exc.reason) from exc


async def check_secrets(spec: JobSpec, namespace: str,
                        names: Callable[[str], Awaitable[set[str]]]) -> None:
    """One spec's references, read only when it has some."""
    if has_references(spec):
        (await secret_check(namespace, names)).check(spec)
