"""plan_claims: the catch-up window and the overlap policies, decided without a store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from tickwork.drivers.base import MAX_BATCH, LeaseRef
from tickwork.drivers.claiming import (
    Candidate,
    ClaimPlan,
    Margins,
    candidates_for,
    fresh_query,
    fresh_share,
    is_past_catchup,
    plan_claims,
)
from tickwork.models import (
    JobSpec,
    OccurrenceState,
    Overlap,
    ScheduleSpec,
    Trigger,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def spec(overlap: Overlap = Overlap.SKIP, catchup: float = 3600.0) -> JobSpec:
    return JobSpec(name="j", schedule=ScheduleSpec(type="every", every_seconds=60), kind="http",
                   payload={}, overlap=overlap, catchup_window_seconds=catchup)


def cand(job: str, ago: float, overlap: Overlap = Overlap.SKIP, *, attempt: int = 0,
         trigger: Trigger = Trigger.SCHEDULE, catchup: float = 3600.0) -> Candidate:
    """An occurrence of ``job`` scheduled ``ago`` seconds before NOW."""
    return Candidate(
        job_id=job, scheduled_at=NOW - timedelta(seconds=ago),
        state=OccurrenceState.RETRYING if attempt else OccurrenceState.SCHEDULED,
        attempt=attempt, trigger=trigger, spec=spec(overlap, catchup))


def running_ref(job: str, ago: float = 600, attempt: int = 1) -> LeaseRef:
    return LeaseRef(job, NOW - timedelta(seconds=ago), attempt)


def plan(candidates: Sequence[Candidate], running: Mapping[str, Iterable[LeaseRef]] | None = None,
         limit: int = 10, retrying: Iterable[str] = ()) -> ClaimPlan:
    return plan_claims(candidates, running or {}, NOW, limit, frozenset(retrying))


def names(cs: Iterable[Candidate]) -> list[tuple[str, float]]:
    return [(c.job_id, (NOW - c.scheduled_at).total_seconds()) for c in cs]


Keys = Sequence[tuple[str, float]]


def assert_plan(p: ClaimPlan, *, claim: Keys = (), missed: Keys = (), skipped: Keys = (),
                superseded: Keys = (), cancel_running: Sequence[LeaseRef] = ()) -> None:
    """Each list of the plan, as (job, seconds ago); anything not named must be empty."""
    assert names(p.claim) == list(claim)
    assert names(p.missed) == list(missed)
    assert names(p.skipped) == list(skipped)
    assert names(p.superseded) == list(superseded)
    assert p.cancel_running == list(cancel_running)


class TestNothingRunning:
    def test_claims_in_candidate_order(self) -> None:
        p = plan([cand("a", 10), cand("b", 30), cand("c", 20)])
        assert_plan(p, claim=[("a", 10), ("b", 30), ("c", 20)])

    def test_limit_leaves_the_rest_waiting(self) -> None:
        p = plan([cand("a", 10), cand("b", 20), cand("c", 30)], limit=2)
        assert_plan(p, claim=[("a", 10), ("b", 20)])

    def test_zero_limit_claims_nothing(self) -> None:
        assert_plan(plan([cand("a", 10)], limit=0))

    def test_empty_running_list_is_not_busy(self) -> None:
        p = plan([cand("a", 10)], running={"a": []})
        assert_plan(p, claim=[("a", 10)])

    def test_other_jobs_running_do_not_matter(self) -> None:
        p = plan([cand("a", 10)], running={"b": [running_ref("b")]})
        assert_plan(p, claim=[("a", 10)])


class TestCatchup:
    def test_older_than_window_is_missed(self) -> None:
        p = plan([cand("a", 61, catchup=60), cand("b", 59, catchup=60)])
        assert_plan(p, claim=[("b", 59)], missed=[("a", 61)])

    def test_exactly_the_window_is_not_missed(self) -> None:
        c = cand("a", 60, catchup=60)
        assert not is_past_catchup(c, NOW)
        assert is_past_catchup(c, NOW + timedelta(microseconds=1))

    def test_retries_are_never_missed(self) -> None:
        p = plan([cand("a", 7200, attempt=1, catchup=60)])
        assert_plan(p, claim=[("a", 7200)])

    @pytest.mark.parametrize("trigger", [Trigger.MANUAL, Trigger.BACKFILL])
    def test_triggered_runs_are_never_missed(self, trigger: Trigger) -> None:
        p = plan([cand("a", 7200, trigger=trigger, catchup=60)])
        assert_plan(p, claim=[("a", 7200)])

    def test_missed_do_not_use_the_limit(self) -> None:
        p = plan([cand("a", 7200), cand("b", 7100), cand("c", 10)], limit=1)
        assert_plan(p, claim=[("c", 10)], missed=[("a", 7200), ("b", 7100)])

    def test_missed_is_not_overlap(self) -> None:
        # The missed one neither runs nor makes the job busy for the next one.
        p = plan([cand("a", 7200), cand("a", 10)])
        assert_plan(p, claim=[("a", 10)], missed=[("a", 7200)])

    def test_missed_even_when_the_job_is_busy(self) -> None:
        p = plan([cand("a", 7200, Overlap.BUFFER_ALL)], running={"a": [running_ref("a")]})
        assert_plan(p, missed=[("a", 7200)])


class TestSkip:
    def test_busy_job_is_skipped(self) -> None:
        p = plan([cand("a", 10), cand("b", 10)], running={"a": [running_ref("a")]})
        assert_plan(p, claim=[("b", 10)], skipped=[("a", 10)])

    def test_one_per_job_within_a_batch(self) -> None:
        p = plan([cand("a", 30), cand("a", 20), cand("a", 10)])
        assert_plan(p, claim=[("a", 30)], skipped=[("a", 20), ("a", 10)])

    def test_left_waiting_when_the_batch_is_full(self) -> None:
        p = plan([cand("b", 40), cand("a", 30), cand("a", 20)], limit=1)
        assert_plan(p, claim=[("b", 40)])


class TestBufferOne:
    def test_busy_job_keeps_one_and_skips_the_rest(self) -> None:
        p = plan([cand("a", 30, Overlap.BUFFER_ONE), cand("a", 20, Overlap.BUFFER_ONE),
                  cand("a", 10, Overlap.BUFFER_ONE)], running={"a": [running_ref("a")]})
        assert_plan(p, skipped=[("a", 20), ("a", 10)])

    def test_idle_job_runs_one_and_buffers_one(self) -> None:
        p = plan([cand("a", 30, Overlap.BUFFER_ONE), cand("a", 20, Overlap.BUFFER_ONE),
                  cand("a", 10, Overlap.BUFFER_ONE)])
        assert_plan(p, claim=[("a", 30)], skipped=[("a", 10)])

    def test_buffers_are_per_job(self) -> None:
        p = plan([cand("a", 20, Overlap.BUFFER_ONE), cand("b", 20, Overlap.BUFFER_ONE),
                  cand("a", 10, Overlap.BUFFER_ONE), cand("b", 10, Overlap.BUFFER_ONE)],
                 running={"a": [running_ref("a")], "b": [running_ref("b")]})
        assert_plan(p, skipped=[("a", 10), ("b", 10)])


class TestBufferAll:
    def test_busy_job_waits_without_skipping(self) -> None:
        p = plan([cand("a", 20, Overlap.BUFFER_ALL), cand("a", 10, Overlap.BUFFER_ALL)],
                 running={"a": [running_ref("a")]})
        assert_plan(p)

    def test_idle_job_runs_one_at_a_time(self) -> None:
        p = plan([cand("a", 30, Overlap.BUFFER_ALL), cand("a", 20, Overlap.BUFFER_ALL),
                  cand("b", 10, Overlap.BUFFER_ALL)])
        assert_plan(p, claim=[("a", 30), ("b", 10)])


class TestCancelPrevious:
    def test_busy_job_cancels_the_running_one(self) -> None:
        refs = [running_ref("a", 600), running_ref("a", 300, attempt=2)]
        p = plan([cand("a", 10, Overlap.CANCEL_PREVIOUS)], running={"a": refs})
        assert_plan(p, claim=[("a", 10)], cancel_running=refs)

    def test_latest_wins_within_a_batch(self) -> None:
        # Candidates come by priority then due time; the latest scheduled wins wherever it is.
        p = plan([cand("a", 20, Overlap.CANCEL_PREVIOUS), cand("a", 5, Overlap.CANCEL_PREVIOUS),
                  cand("a", 30, Overlap.CANCEL_PREVIOUS)])
        assert_plan(p, claim=[("a", 5)], superseded=[("a", 20), ("a", 30)])

    def test_latest_wins_and_cancels_running(self) -> None:
        ref = running_ref("a")
        p = plan([cand("a", 20, Overlap.CANCEL_PREVIOUS), cand("a", 10, Overlap.CANCEL_PREVIOUS),
                  cand("b", 10)], running={"a": [ref]})
        assert_plan(p, claim=[("a", 10), ("b", 10)], superseded=[("a", 20)],
                    cancel_running=[ref])

    def test_missed_ones_do_not_win(self) -> None:
        p = plan([cand("a", 7200, Overlap.CANCEL_PREVIOUS, catchup=60),
                  cand("a", 10, Overlap.CANCEL_PREVIOUS, catchup=60)])
        assert_plan(p, claim=[("a", 10)], missed=[("a", 7200)])

    def test_full_batch_leaves_the_running_one_alone(self) -> None:
        ref = running_ref("a")
        p = plan([cand("b", 30), cand("a", 10, Overlap.CANCEL_PREVIOUS)], running={"a": [ref]},
                 limit=1)
        assert_plan(p, claim=[("b", 30)])

    def test_running_given_as_iterators(self) -> None:
        ref = running_ref("a")
        p = plan([cand("a", 10, Overlap.CANCEL_PREVIOUS)], running={"a": iter([ref])})
        assert_plan(p, claim=[("a", 10)], cancel_running=[ref])


class TestAllowAll:
    def test_busy_job_runs_anyway(self) -> None:
        p = plan([cand("a", 20, Overlap.ALLOW_ALL), cand("a", 10, Overlap.ALLOW_ALL)],
                 running={"a": [running_ref("a")]})
        assert_plan(p, claim=[("a", 20), ("a", 10)])

    def test_limit_still_applies(self) -> None:
        p = plan([cand("a", 30, Overlap.ALLOW_ALL), cand("a", 20, Overlap.ALLOW_ALL),
                  cand("a", 10, Overlap.ALLOW_ALL)], limit=2)
        assert_plan(p, claim=[("a", 30), ("a", 20)])


class TestStartedRuns:
    """A run that started (attempt >= 1) is the earlier run: never skipped, and the job's newer
    occurrences are the ones its overlap policy holds back while it waits to run again."""

    def test_a_retry_due_after_newer_ones_runs_and_they_are_skipped(self) -> None:
        # Rescued after a crash: due now, later than the backlog that piled up meanwhile.
        p = plan([cand("a", 3), cand("a", 2), cand("a", 5, attempt=1)], retrying={"a"})
        assert_plan(p, claim=[("a", 5)], skipped=[("a", 3), ("a", 2)])

    def test_a_retry_not_due_yet_holds_newer_ones_back(self) -> None:
        # The store says job a has a run waiting for its backoff; it is not a candidate.
        p = plan([cand("a", 2), cand("b", 2)], retrying={"a"})
        assert_plan(p, claim=[("b", 2)], skipped=[("a", 2)])

    @pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.BUFFER_ONE, Overlap.BUFFER_ALL])
    def test_a_retry_behind_a_running_one_waits_unskipped(self, overlap: Overlap) -> None:
        p = plan([cand("a", 5, overlap, attempt=1)], running={"a": [running_ref("a", 3)]})
        assert_plan(p)

    def test_a_retry_does_not_use_up_the_buffer(self) -> None:
        p = plan([cand("a", 5, Overlap.BUFFER_ONE, attempt=1), cand("a", 3, Overlap.BUFFER_ONE),
                  cand("a", 2, Overlap.BUFFER_ONE)], running={"a": [running_ref("a", 9)]})
        assert_plan(p, skipped=[("a", 2)])

    def test_newer_ones_behind_a_retry_per_policy(self) -> None:
        p = plan([cand("one", 3, Overlap.BUFFER_ONE), cand("one", 2, Overlap.BUFFER_ONE),
                  cand("all", 3, Overlap.BUFFER_ALL), cand("allow", 3, Overlap.ALLOW_ALL)],
                 retrying={"one", "all", "allow"})
        assert_plan(p, claim=[("allow", 3)], skipped=[("one", 2)])

    def test_two_retries_of_one_job_run_one_at_a_time(self) -> None:
        p = plan([cand("a", 9, attempt=1), cand("a", 5, attempt=2)], retrying={"a"})
        assert_plan(p, claim=[("a", 9)])


def test_policies_mix_across_jobs() -> None:
    running = {job: [running_ref(job)] for job in ("skip", "one", "all", "cancel", "allow")}
    p = plan([
        cand("skip", 10, Overlap.SKIP),
        cand("one", 20, Overlap.BUFFER_ONE), cand("one", 10, Overlap.BUFFER_ONE),
        cand("all", 10, Overlap.BUFFER_ALL),
        cand("cancel", 10, Overlap.CANCEL_PREVIOUS),
        cand("allow", 10, Overlap.ALLOW_ALL),
        cand("idle", 10, Overlap.SKIP),
        cand("old", 7200, Overlap.ALLOW_ALL),
    ], running=running)
    assert_plan(p, claim=[("cancel", 10), ("allow", 10), ("idle", 10)],
                missed=[("old", 7200)], skipped=[("skip", 10), ("one", 10)],
                cancel_running=running["cancel"])


@pytest.mark.parametrize("limit", [1, 4, 64, 500, MAX_BATCH, 5 * MAX_BATCH])
def test_a_claim_reads_a_margin_past_its_limit_not_twice_it(limit: int) -> None:
    """Room to get past a few held-back occurrences, without reading, locking and decoding
    as many rows again as a burst's claim takes; bounded like every batch (rule 8)."""
    n = candidates_for(limit)
    assert min(limit, MAX_BATCH) < n <= min(limit, MAX_BATCH) * 5 // 4 + 1
    assert candidates_for(limit, margin=False) == min(limit, MAX_BATCH)


def test_the_plan_counts_what_the_policy_left_waiting() -> None:
    """Started runs behind a running one, buffer_one's kept run and buffer_all's runs wait;
    skipped, missed and claimed ones do not count."""
    p = plan([cand("started", 30, attempt=1), cand("started", 20),
              cand("one", 20, Overlap.BUFFER_ONE), cand("one", 10, Overlap.BUFFER_ONE),
              cand("all", 20, Overlap.BUFFER_ALL), cand("all", 10, Overlap.BUFFER_ALL),
              cand("skip", 10), cand("old", 7200, Overlap.ALLOW_ALL), cand("free", 5)],
             running={"one": [running_ref("one")], "all": [running_ref("all")],
                      "skip": [running_ref("skip")]}, retrying=["started"])
    assert_plan(p, claim=[("started", 30), ("free", 5)], missed=[("old", 7200)],
                skipped=[("started", 20), ("one", 10), ("skip", 10)])
    assert p.waiting == 3  # one's run at 20, all's two


def test_a_queue_reads_a_margin_only_after_a_claim_left_runs_waiting() -> None:
    margins = Margins()
    exact, wide = candidates_for(64, margin=False), candidates_for(64)
    assert margins.candidates("q", 64) == exact
    margins.note("q", plan([cand("all", 10, Overlap.BUFFER_ALL)],
                           running={"all": [running_ref("all")]}))
    assert (margins.candidates("q", 64), margins.candidates("other", 64)) == (wide, exact)
    margins.note("q", plan([cand("a", 10), cand("b", 10)]))
    assert margins.candidates("q", 64) == exact
    held = ClaimPlan(held=[cand("limited", 10)])  # a limit held it back
    margins.note("q", held)
    assert margins.candidates("q", 64) == wide


def test_a_fresh_share_is_half_a_claim_and_none_of_a_claim_of_one() -> None:
    """One at a time, the oldest first: a steady stream must not keep a backlog waiting."""
    assert [fresh_share(n) for n in (1, 2, 3, 64)] == [0, 1, 1, 32]
    assert fresh_share(10 * MAX_BATCH) == MAX_BATCH // 2


def test_the_fresh_query_is_refused_unless_the_oldest_order_is_there_once() -> None:
    order = "ORDER BY o.priority DESC, o.due_at\n"
    fresh = "ORDER BY o.due_at DESC\n"
    assert fresh_query(f"SELECT 1\n{order}LIMIT 2", order, fresh) == f"SELECT 1\n{fresh}LIMIT 2"
    for text in ("SELECT 1\nORDER BY o.due_at\n", f"SELECT 1\n{order}UNION\n{order}"):
        with pytest.raises(ValueError, match="exactly once"):
            fresh_query(text, order, fresh)
