"""idempotency_key: one text per instant, whatever the instant's time zone or what came before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from tickwork.models import Trigger, idempotency_key

AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_key_names_the_job_and_the_instant_in_utc() -> None:
    assert idempotency_key("a", AT) == "a:2030-01-02T03:04:05Z"
    assert idempotency_key("a", AT, Trigger.MANUAL) == "a:manual:2030-01-02T03:04:05Z"
    paris = AT.astimezone(timezone(timedelta(hours=1)))
    assert idempotency_key("b", paris) == "b:2030-01-02T03:04:05Z"
    assert idempotency_key("c", AT.replace(tzinfo=None)) == "c:2030-01-02T03:04:05Z"


def test_each_instant_keeps_its_own_text_in_turn() -> None:
    later = AT + timedelta(microseconds=250)
    keys = [idempotency_key("j", at) for at in (AT, AT, later, AT, later, later)]
    assert keys == ["j:2030-01-02T03:04:05Z"] * 2 + ["j:2030-01-02T03:04:05.000250Z",
                                                     "j:2030-01-02T03:04:05Z"] + [
        "j:2030-01-02T03:04:05.000250Z"] * 2
