"""Alerts end to end on a FakeClock, on SQLite and on PostgreSQL (the ``store`` fixture runs
each test on both): each condition fires and resolves, the cooldown holds back a repeat, and
deliveries reach a real local HTTP receiver (webhook and Slack-compatible) and a real SMTP
server, or are retried and recorded when they fail."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from test_executor_email import Mailbox, serve

from tickwork.clock import FakeClock
from tickwork.config import load_settings
from tickwork.document import parse_job_document
from tickwork.document.alerts import alert_policy, parse_alert_defaults
from tickwork.drivers.alerts import AlertListParams, StoredAlert
from tickwork.drivers.base import JobDeleteParams, JobUpdateParams, Store
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ValidationError
from tickwork.executors import ExecutorSettings, build_executors
from tickwork.models import Job, OccurrenceState
from tickwork.scheduler.alert_delivery import AlertDeliverer
from tickwork.scheduler.alerts import AlertEvaluator
from tickwork.scheduler.planner import Planner
from tickwork.testing.factories import (
    NOW,
    add_occurrences,
    claim,
    claim_one,
    complete,
    completion,
    create_params,
    seconds,
)

DEAD = OccurrenceState.DEAD


class Receiver:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.status = 200
        self.url = ""


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()

    async def hook(request: web.Request) -> web.Response:
        r.seen.append({"path": request.path, "json": await request.json()})
        return web.Response(status=r.status, text="ok" if r.status == 200 else "boom")

    app = web.Application()
    app.router.add_post("/{what}", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    r.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield r
    await runner.cleanup()


@pytest.fixture
def store(each_store: Store) -> Store:
    """Each test on both stores (conftest's each_store): the facts the evaluator reads are
    each driver's queries."""
    return each_store


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """SQLite only: for tests of a channel, which do not depend on the store."""
    s = SqliteStore(f"sqlite:///{tmp_path}/c.db")
    await s.migrate()
    yield s
    await s.close()


class World:
    def __init__(self, store: Store, receiver: Receiver, **settings: Any) -> None:
        self.store = store
        self.receiver = receiver
        self.clock = FakeClock(NOW)
        self.executors = build_executors(ExecutorSettings(outbound_allow=("127.0.0.1",),
                                                          **settings))
        self.deliverer = AlertDeliverer(store=store, clock=self.clock, executors=self.executors,
                                        backoff_base_seconds=10, max_attempts=3)
        self.evaluator = AlertEvaluator(store=store, clock=self.clock,
                                        on_changed=self.deliverer.wake)

    async def job(self, alerts: dict[str, Any], **doc: Any) -> Job:
        channels = alerts.pop("channels", [
            {"kind": "webhook", "url": f"{self.receiver.url}/hook"},
            {"kind": "slack", "webhook_url": f"{self.receiver.url}/slack"}])
        spec = parse_job_document({
            "name": "nightly", "schedule": {"every": "1m"}, "kind": "http",
            "payload": {"url": "https://example.org/x"}, "retry": {"max_attempts": 1},
            "alerts": {"channels": channels, **alerts}, **doc}).spec
        return await self.store.job_create(create_params(spec, next_run_at=None))

    async def run(self, job: Job, offset: float, state: OccurrenceState) -> None:
        at = NOW + seconds(offset)
        await add_occurrences(self.store, job, at)
        claimed = await claim_one(self.store, at)
        await complete(self.store, at, completion(claimed, state=state, started_at=at))

    async def judge(self, offset: float) -> list[StoredAlert]:
        now = NOW + seconds(offset)
        self.clock.set(now)
        await self.evaluator.run_once(now)
        await self.deliverer.run_once(now)
        return await self.store.alert_list(AlertListParams())

    async def close(self) -> None:
        for e in self.executors.values():
            await e.close()


@pytest.fixture
async def world(store: Store, receiver: Receiver) -> AsyncIterator[World]:
    w = World(store, receiver)
    yield w
    await w.close()


def states(alerts: list[StoredAlert]) -> list[tuple[str, str]]:
    return [(a.condition, a.state) for a in alerts]


async def test_a_dead_run_fires_then_a_success_resolves(world: World) -> None:
    job = await world.job({})
    await world.run(job, 0, DEAD)
    [alert] = await world.judge(1)
    assert (alert.condition, alert.state, alert.job_name) == ("failed", "firing", "nightly")
    assert "ended dead" in alert.detail
    assert [(d.kind, d.state, d.attempts) for d in alert.deliveries] == [
        ("webhook", "delivered", 1), ("slack", "delivered", 1)]
    hook, slack = world.receiver.seen
    assert hook["path"] == "/hook"
    assert hook["json"]["type"] == "alert.firing"
    assert hook["json"]["condition"] == "failed"
    assert slack["path"] == "/slack"
    assert slack["json"]["text"].startswith("[tickwork] ALERT: nightly: failed")
    assert await world.judge(2) == [alert]  # still firing: nothing new
    assert len(world.receiver.seen) == 2
    await world.run(job, 60, OccurrenceState.SUCCEEDED)
    [alert] = await world.judge(61)
    assert alert.state == "resolved"
    assert [d.event for d in alert.deliveries] == ["firing", "firing", "resolved", "resolved"]
    assert [s["json"].get("type") for s in world.receiver.seen[2:3]] == ["alert.resolved"]
    assert world.receiver.seen[3]["json"]["text"].startswith("[tickwork] RESOLVED: nightly")


async def test_a_failure_a_success_followed_before_the_pass_still_fires(world: World) -> None:
    job = await world.job({})
    assert await world.judge(1) == []
    await world.run(job, 10, DEAD)
    await world.run(job, 60, OccurrenceState.SUCCEEDED)
    [alert] = await world.judge(61)
    assert (alert.condition, alert.state) == ("failed", "firing")
    assert "ended dead (a later run has succeeded since)" in alert.detail
    [alert] = await world.judge(62)
    assert alert.state == "resolved"
    assert [d.event for d in alert.deliveries] == ["firing", "firing", "resolved", "resolved"]


async def test_a_deleted_jobs_alert_is_resolved(world: World) -> None:
    job = await world.job({})
    await world.run(job, 0, DEAD)
    assert states(await world.judge(1)) == [("failed", "firing")]
    await world.store.job_delete(JobDeleteParams(id=job.id, now=NOW + seconds(2)))
    [alert] = await world.judge(3)
    assert (alert.state, alert.detail) == ("resolved", "resolved: the job was deleted")
    assert world.receiver.seen[-1]["json"]["text"].startswith("[tickwork] RESOLVED: nightly")


async def test_an_alert_the_job_no_longer_asks_for_is_resolved(world: World) -> None:
    job = await world.job({"consecutive_failures": 1})
    await world.run(job, 0, DEAD)
    assert sorted(states(await world.judge(1))) == [
        ("consecutive_failures", "firing"), ("failed", "firing")]
    doc = {"name": "nightly", "schedule": {"every": "1m"}, "kind": "http",
           "payload": {"url": "https://example.org/x"},
           "alerts": {"channels": [{"kind": "webhook", "url": f"{world.receiver.url}/hook"}]}}
    await world.store.job_update(JobUpdateParams(
        id=job.id, spec=parse_job_document(doc).spec, next_run_at=None, now=NOW + seconds(2)))
    alerts = {a.condition: a for a in await world.judge(3)}
    assert alerts["failed"].state == "firing"  # the last run is still dead
    assert (alerts["consecutive_failures"].state, alerts["consecutive_failures"].detail) == (
        "resolved", "resolved: the job no longer asks for this alert")
    del doc["alerts"]
    await world.store.job_update(JobUpdateParams(
        id=job.id, spec=parse_job_document(doc).spec, next_run_at=None, now=NOW + seconds(4)))
    alerts = {a.condition: a for a in await world.judge(5)}
    assert (alerts["failed"].state, alerts["failed"].detail) == (
        "resolved", "resolved: the job has no alerts now")


async def test_only_the_states_asked_for(world: World) -> None:
    job = await world.job({"on": ["missed"]})
    await world.run(job, 0, DEAD)
    assert await world.judge(1) == []


async def test_consecutive_failures(world: World) -> None:
    job = await world.job({"on": [], "consecutive_failures": 3})
    for i in range(2):
        await world.run(job, 60 * i, DEAD)
    assert await world.judge(121) == []
    await world.run(job, 120, OccurrenceState.CRASHED)
    assert states(await world.judge(122)) == [("consecutive_failures", "firing")]
    await world.run(job, 180, OccurrenceState.SUCCEEDED)
    assert states(await world.judge(181)) == [("consecutive_failures", "resolved")]


async def test_cooldown_holds_back_a_repeat(world: World) -> None:
    job = await world.job({"cooldown": "10m"})
    await world.run(job, 0, DEAD)
    await world.judge(1)
    await world.run(job, 60, OccurrenceState.SUCCEEDED)
    await world.judge(61)
    assert len(world.receiver.seen) == 4  # fired and resolved, on two channels
    await world.run(job, 120, DEAD)
    quiet = (await world.judge(121))[0]
    assert (quiet.state, quiet.notified, quiet.deliveries) == ("firing", False, ())
    await world.run(job, 180, OccurrenceState.SUCCEEDED)
    await world.judge(181)
    await world.run(job, 700, DEAD)
    loud = (await world.judge(701))[0]
    assert loud.notified
    assert len(world.receiver.seen) == 6  # nothing for the quiet one, not even resolved


async def test_late_start(world: World) -> None:
    job = await world.job({"on": [], "late_after": "2m"})
    await add_occurrences(world.store, job, NOW)
    assert await world.judge(119) == []
    [alert] = await world.judge(121)
    assert (alert.condition, alert.state) == ("late_start", "firing")
    assert "has not started 120s after it" in alert.detail
    await claim_one(world.store, NOW + seconds(122))
    assert states(await world.judge(123)) == [("late_start", "resolved")]


async def test_running_too_long(world: World) -> None:
    job = await world.job({"on": [], "running_longer_than": "1h"})
    await add_occurrences(world.store, job, NOW)
    claimed = await claim_one(world.store, NOW)
    assert await world.judge(3599) == []
    assert states(await world.judge(3601)) == [("running_too_long", "firing")]
    await complete(world.store, NOW + seconds(3700), completion(claimed))
    assert states(await world.judge(3701)) == [("running_too_long", "resolved")]


async def test_no_success_within(world: World) -> None:
    job = await world.job({"on": [], "no_success_within": "1h"})
    assert await world.judge(3599) == []
    [alert] = await world.judge(3601)
    assert (alert.condition, alert.detail) == (
        "no_success", "the job has never succeeded, more than 3600s ago")
    await world.run(job, 3700, OccurrenceState.SUCCEEDED)
    assert states(await world.judge(3701)) == [("no_success", "resolved")]
    assert states(await world.judge(3701 + 3601))[0] == ("no_success", "firing")


async def test_a_failing_channel_is_retried_and_recorded(world: World) -> None:
    world.receiver.status = 500
    job = await world.job({"channels": [
        {"kind": "webhook", "url": f"{world.receiver.url}/hook"},
        {"kind": "webhook", "url": "http://127.0.0.1:1/closed"}]})
    await world.run(job, 0, DEAD)
    [alert] = await world.judge(1)
    assert [(d.state, d.attempts) for d in alert.deliveries] == [("pending", 1), ("pending", 1)]
    assert "HTTP 500" in (alert.deliveries[0].last_error or "")
    assert "127.0.0.1:1" in (alert.deliveries[1].last_error or "")
    await world.judge(5)  # not due again yet (backoff 10 s)
    assert len(world.receiver.seen) == 1
    world.receiver.status = 200
    [alert] = await world.judge(11)
    assert [(d.state, d.attempts) for d in alert.deliveries] == [
        ("delivered", 2), ("pending", 2)]
    [alert] = await world.judge(31)  # third and last attempt (backoff 20 s)
    assert (alert.deliveries[1].state, alert.deliveries[1].attempts) == ("failed", 3)


async def test_the_scheduler_keeps_planning_while_a_channel_fails(world: World) -> None:
    """Planning and alerting are separate loops: a failing channel costs only its own."""
    world.receiver.status = 500
    job = await world.job({})
    planner = Planner(store=world.store, clock=world.clock, horizon_seconds=5)
    await world.run(job, 0, DEAD)
    await world.judge(1)
    other = parse_job_document({"name": "other", "schedule": {"every": "1m"}, "kind": "http",
                                "payload": {"url": "https://example.org/x"}}).spec
    await world.store.job_create(create_params(other, next_run_at=NOW + seconds(3)))
    assert (await planner.run_once(NOW + seconds(1)))[0] == 1
    [alert] = await world.store.alert_list(AlertListParams())
    assert alert.deliveries[0].state == "pending"


async def test_email_channel(sqlite_store: Store, receiver: Receiver) -> None:
    box = Mailbox()
    async with await serve(box):
        w = World(sqlite_store, receiver, smtp_host="127.0.0.1", smtp_port=box.port,
                  smtp_tls="none", smtp_from="tickwork@example.org")
        try:
            job = await w.job({"channels": [{"kind": "email", "to": ["ops@example.org"]}]})
            await w.run(job, 0, DEAD)
            [alert] = await w.judge(1)
        finally:
            await w.close()
    assert alert.deliveries[0].state == "delivered"
    [(envelope, msg)] = box.received
    assert envelope.rcpt_tos == ["ops@example.org"]
    assert msg["Subject"] == "[tickwork] ALERT: nightly: failed"


async def test_defaults_apply_to_jobs_without_alerts(store: Store,
                                                     receiver: Receiver) -> None:
    hook = {"channels": [{"kind": "webhook", "url": f"{receiver.url}/mail-queue"}]}
    defaults = parse_alert_defaults(json.dumps({"queues": {"mail": hook}}))
    w = World(store, receiver)
    w.evaluator.defaults = defaults
    try:
        spec = parse_job_document({"name": "mailer", "queue": "mail", "schedule": {
            "every": "1m"}, "kind": "http", "payload": {"url": "https://example.org/x"}}).spec
        job = await store.job_create(create_params(spec, next_run_at=None))
        other = parse_job_document({"name": "other", "schedule": {"every": "1m"},
                                    "kind": "http", "payload": {"url": "https://example.org/x"}})
        await store.job_create(create_params(other.spec, next_run_at=None))
        await add_occurrences(store, job, NOW)
        [claimed] = (await claim(store, NOW, queue="mail")).claims
        await complete(store, NOW, completion(claimed, state=DEAD))
        [alert] = await w.judge(1)
    finally:
        await w.close()
    assert alert.job_name == "mailer"
    assert [s["path"] for s in receiver.seen] == ["/mail-queue"]


async def test_the_default_for_all_jobs_comes_after_the_queues_and_the_jobs_own(
        store: Store, receiver: Receiver) -> None:
    def hook(path: str) -> dict[str, Any]:
        return {"channels": [{"kind": "webhook", "url": f"{receiver.url}/{path}"}]}

    w = World(store, receiver)
    w.evaluator.defaults = parse_alert_defaults(json.dumps(
        {"all": hook("all"), "queues": {"mail": hook("mail-queue")}}))
    try:
        for name, extra in (("plain", {}), ("mailer", {"queue": "mail"}),
                            ("own", {"alerts": hook("own")}), ("null", {"alerts": None})):
            spec = parse_job_document({"name": name, "schedule": {"every": "1m"},
                                       "kind": "http", "payload": {"url": "https://x.org/"},
                                       **extra}).spec
            job = await store.job_create(create_params(spec, next_run_at=None))
            await add_occurrences(store, job, NOW)
            [claimed] = (await claim(store, NOW, queue=spec.queue)).claims
            await complete(store, NOW, completion(claimed, state=DEAD))
        alerts = await w.judge(1)
    finally:
        await w.close()
    assert sorted(a.job_name for a in alerts) == ["mailer", "null", "own", "plain"]
    assert sorted((s["json"]["job_name"], s["path"]) for s in receiver.seen) == [
        ("mailer", "/mail-queue"), ("null", "/all"), ("own", "/own"), ("plain", "/all")]


def test_alert_defaults_from_toml_and_the_environment(tmp_path: Path) -> None:
    text = ('{"all": {"channels": [{"kind": "slack", "webhook_url": "https://hooks.example.org/a"'
            '}], "late_after": "10m"}, "queues": {"mail": {"channels": [{"kind": "email", '
            '"to": ["mail@example.org"]}], "consecutive_failures": 5}}}')
    toml = tmp_path / "tickwork.toml"
    toml.write_text("alert_defaults = '''\n" + text + "\n'''\n")
    for settings in (load_settings(env={}, toml_path=str(toml)),
                     load_settings(env={"TICKWORK_ALERT_DEFAULTS": text}, toml_path=None)):
        defaults = parse_alert_defaults(settings.alert_defaults)
        assert defaults.every_job is not None
        assert defaults.queues is not None
        every = alert_policy(defaults.every_job)
        assert (every.channels[0]["kind"], every.late_after) == ("slack", 600)
        assert alert_policy(defaults.queues["mail"]).consecutive_failures == 5
        assert defaults.text_for(None, "default") == defaults.every_job
        assert defaults.text_for(None, "mail") == defaults.queues["mail"]
    with pytest.raises(ValidationError) as err:
        load_settings(env={"TICKWORK_ALERT_DEFAULTS": '{"all": {"channels": []}}'},
                      toml_path=None)
    assert err.value.field == "alert_defaults.all.channels"


@pytest.mark.parametrize(("alerts", "field"), [
    ({}, "alerts.channels"),
    ({"channels": []}, "alerts.channels"),
    ({"channels": [{"kind": "pager"}]}, "alerts.channels[0].kind"),
    ({"channels": [{"kind": "slack", "webhook_url": "ftp://x"}]},
     "alerts.channels[0].webhook_url"),
    ({"channels": [{"kind": "email", "to": ["a@example.org"], "subject": "x"}]},
     "alerts.channels[0]"),
    ({"channels": [{"kind": "email", "to": ["a@example.org"]}], "on": ["late"]}, "alerts.on"),
    ({"channels": [{"kind": "email", "to": ["a@example.org"]}], "cooldwn": 5}, "alerts"),
    ({"channels": [{"kind": "email", "to": ["a@example.org"]}], "late_after": 0},
     "alerts.late_after"),
])
def test_bad_alerts_name_the_field(alerts: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_job_document({"name": "x", "schedule": {"every": "1m"}, "kind": "http",
                            "payload": {"url": "https://example.org/x"}, "alerts": alerts})
    assert err.value.field == field
