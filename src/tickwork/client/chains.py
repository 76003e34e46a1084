"""Checks on trigger chains when jobs are saved: every named job exists, and no chain comes
back to where it started (A -> A, A -> B -> A), which would trigger runs without end.

``on_success``, ``on_failure`` and ``on_dead`` name jobs; their edges together make one graph
(a cycle through any mix of them is refused: whether it loops depends on how runs end). The
jobs being saved replace their stored versions in the graph; the others are read from the
store as the walk reaches them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from tickwork.errors import ValidationError
from tickwork.models import JobSpec

CHAIN_FIELDS = ("on_success", "on_failure", "on_dead")

Lookup = Callable[[str], Awaitable[JobSpec | None]]


async def check_chains(saving: Sequence[tuple[str, JobSpec]], lookup: Lookup) -> None:
    """ValidationError naming the field (``on_success[0]``, prefixed with each job's prefix,
    e.g. ``[3].``) of the first chain that names a missing job or closes a cycle."""
    batch: Mapping[str, JobSpec] = {spec.name: spec for _, spec in saving}
    known: dict[str, JobSpec | None] = {}

    async def spec_of(name: str) -> JobSpec | None:
        if name in batch:
            return batch[name]
        if name not in known:
            known[name] = await lookup(name)
        return known[name]

    for prefix, spec in saving:
        for field in CHAIN_FIELDS:
            for index, target in enumerate(getattr(spec, field)):
                path = f"{prefix}{field}[{index}]"
                if await spec_of(target) is None:
                    raise ValidationError(path, f"no job is named {target!r}")
                loop = await _path_back(target, spec.name, spec_of)
                if loop is not None:
                    chain = " -> ".join([spec.name, *loop])
                    raise ValidationError(path, f"makes a cycle of triggers: {chain}")


async def _path_back(start: str, goal: str,
                     spec_of: Callable[[str], Awaitable[JobSpec | None]]) -> list[str] | None:
    """The names from ``start`` to ``goal`` along chains, or None when ``goal`` is not
    reached (depth first, each job visited once)."""
    seen: set[str] = set()
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    while stack:
        name, path = stack.pop()
        if name == goal:
            return path
        if name in seen:
            continue
        seen.add(name)
        spec = await spec_of(name)
        if spec is not None:
            stack.extend((nxt, [*path, nxt]) for nxt in reversed(spec.chained))
    return None
