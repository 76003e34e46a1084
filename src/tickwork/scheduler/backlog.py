"""A queue's backlog bound, sized in time rather than in entries.

The promoter keeps each queue's streams to a backlog of entries no worker has been given yet:
work that comes due while a burst drains is delivered behind that backlog, so the wait it adds
is the backlog divided by the rate workers read at. A bound in entries is a different wait on
every deployment (500 entries were 50 ms of a fast two-core drain and 175 ms of a slow one's).
This bound is the entries workers read in ``seconds``.

The read rate is measured from what the promoter moves while the bound holds it back: then
the streams are full and whatever moves is what workers read since the last pass. Windows in
which the bound never held say nothing about the workers (the streams had room) and leave
the size as it was. Several schedulers promote a queue each at its own pace, and each measures
only what it moved: each bound is then a share of the wanted one, which shortens the wait
further and never starves the workers (every promoter still refills the streams at each look,
and no bound goes under ``LEAST``).
"""

from __future__ import annotations

# The wait a backlog adds to work due during a burst: a third of the 250 ms p99 that W1's
# steady stream is held to, leaving the rest to the claim, the promoter's pass and the
# host's jitter. 50 ms cost 5-8 % of the steady run's drain on a host draining 6,000 a
# second; 80 ms keeps about the 500 entries of before there (docs/benchmarks.md, tenth
# session).
DEFAULT_SECONDS = 0.08
# Bounds on the size: enough that workers never find the streams empty between two of the
# promoter's looks (5 ms apart while held: 128 entries are 25,000 reads a second), and not
# more than half a second of the fastest drain measured.
LEAST = 128
MOST = 5000
START = 500  # the fixed bound of earlier releases, until the first measured window
WINDOW_SECONDS = 0.25


class BacklogSize:
    """One queue's bound, updated from each promote call's outcome."""

    def __init__(self, *, seconds: float = DEFAULT_SECONDS, least: int = LEAST,
                 most: int = MOST, start: int = START,
                 window_seconds: float = WINDOW_SECONDS) -> None:
        if seconds <= 0:
            raise ValueError(f"seconds ({seconds}) must be positive")
        if not 0 < least <= most:
            raise ValueError(f"least ({least}) must be positive and at most most ({most})")
        if window_seconds <= 0:
            raise ValueError(f"window_seconds ({window_seconds}) must be positive")
        self.seconds = seconds
        self.least = least
        self.most = most
        self.window_seconds = window_seconds
        self.size = min(max(start, least), most)
        self.rate = 0.0  # entries read a second, in the last window that measured it
        self._since: float | None = None
        self._moved = 0
        self._held = False

    def observe(self, moved: int, held: bool, now: float) -> bool:
        """One promote call: ``moved`` entries, ``held`` if the bound stopped it moving
        everything due; ``now`` on a monotonic clock. Whether the size changed."""
        if self._since is None:
            self._since = now
        self._moved += moved
        self._held = self._held or held
        elapsed = now - self._since
        if elapsed < self.window_seconds:
            return False
        was = self.size
        if self._held:
            self.rate = self._moved / elapsed
            wanted = self.rate * self.seconds
            # Halfway there each window: a burst's first fill, counted as read, and one
            # slow window do not swing the bound.
            self.size = min(max(round((self.size + wanted) / 2), self.least), self.most)
        self._since, self._moved, self._held = now, 0, False
        return self.size != was
