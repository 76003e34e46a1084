"""One root error, and the outcomes a job can return as values.

Errors subclass builtins where they fit, so ``except LookupError`` keeps working.
"""

from __future__ import annotations

from datetime import datetime


class TickworkError(Exception):
    """The root of every error tickwork raises on purpose."""


class ValidationError(TickworkError, ValueError):
    """A job document or setting is wrong. ``field`` names where, the message says why."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class ConfigError(ValidationError):
    """A setting is missing, unknown or out of bounds."""


class JobNotFound(TickworkError, LookupError):
    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(f"no job {ref!r}")


class OccurrenceNotFound(TickworkError, LookupError):
    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(f"no run {ref!r}")


class Forbidden(TickworkError, PermissionError):
    """The caller may see this but not change it (a shared queue, to a client of one
    namespace): 403 in the API."""


class Conflict(TickworkError):
    """The request clashes with what is stored (a duplicate name, a finished occurrence)."""


class QuotaExceeded(TickworkError):
    """A namespace's quota refuses the request. ``resets_at`` is set for a quota over time
    (runs per hour): the request may succeed after it; the others (jobs, payload size) hold
    until something is deleted or the quota is raised."""

    def __init__(self, namespace: str, quota: str, limit: int, used: int, reason: str, *,
                 resets_at: datetime | None = None, retry_after: int | None = None) -> None:
        self.namespace = namespace
        self.quota = quota
        self.limit = limit
        self.used = used
        self.resets_at = resets_at
        self.retry_after = retry_after
        super().__init__(f"namespace {namespace!r}: quota {quota} ({limit}) {reason}")


class StaleVersion(Conflict):
    """A versioned change to a job older than (or as old as) the last one applied to it."""

    def __init__(self, name: str, version: int, applied: int) -> None:
        self.name, self.version, self.applied = name, version, applied
        super().__init__(f"job {name!r}: version {version} is not newer than version "
                         f"{applied}, already applied")


class StoreError(TickworkError):
    """The store failed in a way the caller cannot fix (driver errors are translated to this)."""


class StoreUnavailable(StoreError, ConnectionError):
    """The store cannot be reached or is locked by another process. ``logged``: the store has
    said so already (once per outage), so a loop that retries need not log it again."""

    def __init__(self, message: str, *, logged: bool = False) -> None:
        super().__init__(message)
        self.logged = logged


def reported_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is a store outage the store has logged already: a loop that retries
    need not log it (with its traceback) at every pass."""
    return isinstance(exc, StoreUnavailable) and exc.logged


class NotMigrated(StoreError):
    """The database does not exist, or its schema is older than this tickwork: a command
    that only reads (or changes existing jobs) does not create or upgrade it."""


class DispatchError(TickworkError):
    """The dispatch (Redis) failed in a way the caller cannot fix; driver errors become this."""


class DispatchUnavailable(DispatchError, ConnectionError):
    """The dispatch cannot be reached, is loading, read-only or out of memory: callers switch
    to degraded mode (claiming straight from the store) until it is back."""
