"""Jobs declared next to their code with ``@tickwork.job(...)``.

The decorator records a job document for the function; the service creates or updates those
jobs when it starts (``tickwork run --import myapp.jobs``) and allows their modules to run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tickwork.document import parse_job_document

F = TypeVar("F", bound=Callable[..., Any])

_registered: dict[str, dict[str, Any]] = {}


def job(
    *,
    cron: str | None = None,
    every: str | float | None = None,
    at: str | None = None,
    timezone: str = "UTC",
    name: str | None = None,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Register the decorated function as a ``python`` job with this schedule.

    ``options`` are any other job document fields (queue, priority, retry, timeout_seconds,
    overlap, tags, ...). The document is validated here, at import, so mistakes show at once.
    """
    schedule: dict[str, Any]
    if sum(x is not None for x in (cron, every, at)) != 1:
        raise TypeError("@tickwork.job needs exactly one of cron=, every= or at=")
    if cron is not None:
        schedule = {"cron": cron, "timezone": timezone}
    elif every is not None:
        schedule = {"every": every}
    else:
        schedule = {"at": at}

    def register(fn: F) -> F:
        if "<" in fn.__qualname__:  # <locals> or <lambda>: nothing a worker could import
            raise TypeError(f"@tickwork.job needs a module-level function; {fn.__qualname__} "
                            "cannot be imported by a worker")
        target = f"{fn.__module__}:{fn.__qualname__}"
        payload: dict[str, Any] = {"callable": target}
        if args:
            payload["args"] = args
        if kwargs:
            payload["kwargs"] = kwargs
        doc = {"name": name or f"{fn.__module__}.{fn.__qualname__}", "schedule": schedule,
               "kind": "python", "payload": payload, **options}
        parse_job_document(doc)
        _registered[doc["name"]] = doc
        return fn

    return register


def registered(modules: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The documents of every decorated job imported so far; with ``modules``, only those
    whose function is in one of them or in a module below one."""
    docs = list(_registered.values())
    if modules is None:
        return docs
    return [d for d in docs if any(_within(str(d["payload"]["callable"]).split(":", 1)[0], m)
                                   for m in modules)]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")
