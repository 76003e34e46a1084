"""redis-py's exceptions, translated at the driver edge (STYLE habit 7).

Anything that means "Redis cannot serve us now" (refused, timed out, loading after a restart,
a read-only replica after a failover, out of memory under ``noeviction``, a cluster that is
down, no cluster node reachable, a slot without a master while a failover runs) becomes
``DispatchUnavailable``, so callers switch to degraded mode; any other Redis error becomes
``DispatchError``. Callers never see a redis exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePath

from redis import exceptions as rx

from tickwork.errors import DispatchError, DispatchUnavailable

_UNAVAILABLE = (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError, rx.ReadOnlyError,
                rx.ClusterDownError, rx.TryAgainError, rx.MasterDownError, rx.SlotNotCoveredError,
                OSError)
_UNAVAILABLE_REPLIES = ("OOM", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")


_CLIENT_INTERNALS = ("redis", "asyncio")  # packages whose frames mean "the client's socket"


def _a_dropped_connection(exc: BaseException) -> bool:
    """redis-py 8.1 leaks an AttributeError or TypeError ('NoneType' object has no attribute
    'writelines', ... is not callable) when a connection is closed under a command: after a
    peer reset, or when its cluster client re-reads the slot map (a failover) and drops
    connections other commands are using. Raised inside redis-py or asyncio, it means the
    connection is gone; raised anywhere else, it is a bug and is not hidden."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    parts = PurePath(tb.tb_frame.f_code.co_filename).parts
    return any(p in parts for p in _CLIENT_INTERNALS) and "tickwork" not in parts


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
    except rx.RedisClusterException as exc:  # not a RedisError; "cannot be connected" at start
        unreachable = "cannot be connected" in str(exc) or isinstance(
            exc.__context__, (rx.ConnectionError, rx.TimeoutError, OSError))
        kind = DispatchUnavailable if unreachable else DispatchError
        raise kind(f"redis {operation}: {type(exc).__name__}: {exc}") from exc
    except rx.RedisError as exc:
        raise DispatchError(f"redis {operation}: {type(exc).__name__}: {exc}") from exc
    except (AttributeError, TypeError) as exc:
        if not _a_dropped_connection(exc):
            raise
        raise DispatchUnavailable(f"redis {operation}: connection dropped under the command "
                                  f"({type(exc).__name__}: {exc})") from exc
