"""Critical work first when the store is the only source of work (degraded mode).

With Redis unreachable, every worker claims straight from the store, and the store is the
bottleneck. A worker then serves its queues in priority order (``queue_priorities``): a queue
claims only while no queue of higher priority is *behind*. A queue is behind when its last
claim filled every slot it asked for (more may be due) and it has not yet come back with fewer;
it catches up when a claim returns fewer than it asked for, or when the store says it has
nothing due (its slots may all be busy with what it claimed last). A queue held back is told
to look again (``wake``) as soon as the queues above it have caught up.

Queues of equal priority never hold each other back, so with no priorities set (all 0) nothing
changes. The order is strict: while a critical queue has more due work than slots, queues
below it wait; that is what the setting asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping


class PriorityGate:
    def __init__(self, priorities: Mapping[str, int]) -> None:
        self.priorities = dict(priorities)
        self._behind: set[str] = set()
        self._held: set[str] = set()  # queues told to wait: woken when they may claim

    def priority(self, queue: str) -> int:
        return self.priorities.get(queue, 0)

    def degraded(self) -> None:
        """The store became the only source: until each has claimed once and come back with
        fewer than it asked for, every queue above the lowest counts as behind, so that the
        first claims of degraded mode are the critical queues'."""
        lowest = min(self.priorities.values(), default=0)
        self._behind = {q for q, p in self.priorities.items() if p > lowest}

    def holding(self, queue: str) -> bool:
        """Whether ``queue`` was held back and waits for a wake-up."""
        return queue in self._held

    def behind_above(self, queue: str) -> list[str]:
        """The queues of higher priority than ``queue`` that are behind."""
        mine = self.priority(queue)
        return sorted(q for q in self._behind if self.priority(q) > mine)

    def may_claim(self, queue: str) -> bool:
        """Whether ``queue`` may claim now: no queue of higher priority is behind."""
        mine = self.priority(queue)
        if any(self.priority(q) > mine for q in self._behind):
            self._held.add(queue)
            return False
        self._held.discard(queue)
        return True

    def claimed(self, queue: str, asked: int, got: int, wake: Callable[[str], None]) -> None:
        """A claim of ``queue`` asked for ``asked`` and got ``got``: note whether it is behind,
        and wake the queues held back that may claim now."""
        if got >= asked > 0:
            self._behind.add(queue)
        else:
            self.caught_up(queue, wake)

    def caught_up(self, queue: str, wake: Callable[[str], None]) -> None:
        """``queue`` has nothing due left: wake the queues held back that may claim now."""
        if queue not in self._behind:
            return
        self._behind.discard(queue)
        for held in sorted(self._held, key=self.priority, reverse=True):
            if self.may_claim(held):
                self._held.discard(held)
                wake(held)

    def reset(self, wake: Callable[[str], None], queues: Iterable[str] = ()) -> None:
        """Forget who is behind (degraded mode ended) and wake every queue held back."""
        self._behind.clear()
        for queue in {*self._held, *queues}:
            wake(queue)
        self._held.clear()
