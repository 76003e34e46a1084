"""redis-py's exceptions, translated at the driver edge (STYLE habit 7).

Anything that means "Redis cannot serve us now" (refused, timed out, loading after a restart,
a read-only replica after a failover, out of memory under ``noeviction``, a cluster that is
down) becomes ``DispatchUnavailable``, so callers switch to degraded mode; any other Redis error
becomes ``DispatchError``. Callers never see a redis exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis import exceptions as rx

from tickwork.errors import DispatchError, DispatchUnavailable

_UNAVAILABLE = (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError, rx.ReadOnlyError,
                rx.ClusterDownError, rx.TryAgainError, rx.MasterDownError, OSError)
_UNAVAILABLE_REPLIES = ("OOM", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")


@contextmanager
def translate(operation: str) -> Iterator[None]:
    try:
        yield
    except _UNAVAILABLE as exc:
        raise DispatchUnavailable(f"redis {operation}: {type(exc).__name__}: {exc}") from exc
    except rx.ResponseError as exc:
        if str(exc).startswith(_UNAVAILABLE_REPLIES):
            raise DispatchUnavailable(f"redis {operation}: {exc}") from exc
        raise DispatchError(f"redis {operation}: {exc}") from exc
    except rx.RedisError as exc:
        raise DispatchError(f"redis {operation}: {type(exc).__name__}: {exc}") from exc
