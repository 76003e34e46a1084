"""The namespace part of the AdminStore seam: quotas per namespace and what each uses.

A namespace (a tenant) owns jobs and API tokens; it exists as soon as something names it. It
gets a row of its own when its quotas are first set; a quota left unset (None) is unlimited.
Usage is read from the jobs and attempts themselves, so it is never out of step with them;
except the runs this hour of a namespace with ``max_runs_per_hour``, which are the count the
store's claims keep and enforce (``namespace_runs``, drivers/limits.py), seeded from the
attempts when the quota is set.
Every driver passes ``tickwork.testing.conformance.namespaces``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tickwork.errors import QuotaExceeded

DEFAULT_NAMESPACE = "default"
NAMESPACE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9_.-]{0,61}[a-z0-9])?")
NAMESPACE_RULE = ("must be 1 to 63 characters: lower-case letters, digits, '-', '_' and '.', "
                  "starting and ending with a letter or digit")
QUOTA_MAX = 2**62  # a bound that fits every driver's integer column


@dataclass(frozen=True, slots=True)
class Quotas:
    max_jobs: int | None = None  # jobs defined at once (deleted ones do not count)
    max_runs_per_hour: int | None = None  # attempts claimed (started) per UTC clock hour
    max_payload_bytes: int | None = None  # a job's payload, as compact JSON in UTF-8


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    name: str
    quotas: Quotas
    jobs: int  # jobs defined now
    runs_this_hour: int  # attempts claimed since ``hour_start`` (the claims' own count, with
    # a max_runs_per_hour: the figure the quota is enforced on)


@dataclass(frozen=True, slots=True)
class NamespaceListParams:
    hour_start: datetime  # runs_this_hour counts attempts started at or after this instant
    name: str | None = None  # only this one (listed even if nothing names it yet)
    # Count jobs and runs only where a quota needs them (0 otherwise): a quota check before a
    # write, which must not cost a count of every job and of the hour's attempts.
    quotas_only: bool = False


@dataclass(frozen=True, slots=True)
class NamespaceSetParams:
    """Replace a namespace's quotas (all three; None lifts one)."""

    name: str
    quotas: Quotas
    now: datetime


def check_max_jobs(namespace: str, limit: int, held: int, adding: int) -> None:
    """QuotaExceeded when ``held`` live jobs (``adding`` of them new) pass ``limit``."""
    if held > limit:
        raise QuotaExceeded(namespace, "max_jobs", limit, held - adding,
                            f"refuses more jobs: {held - adding} defined, {adding} more "
                            "asked for")


class NamespaceStore(Protocol):
    async def namespace_list(self, p: NamespaceListParams) -> list[NamespaceInfo]:
        """Every namespace with quotas, live jobs or active tokens, by name; with ``name``,
        that one only, whether or not anything names it."""
        ...

    async def namespace_set(self, p: NamespaceSetParams) -> None: ...

    async def secret_names(self, namespace: str) -> set[str]:
        """The names of the namespace's secrets (a secret belongs to one: drivers/secrets.py),
        read on the store's own connection; never a value."""
        ...
