"""Fault suite, ``tickwork consume``: kill -9 between a command's store commit and its ack.

The consumer dies at the ``consume_after_commit`` failpoint, after the upsert committed and
before the broker heard of it. A restart gets the command again and applies it again,
harmlessly: its version was already applied, so nothing changes, the job exists once, and the
command is answered and acknowledged this time; the next command applies as usual.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from tickwork.drivers.base import AuditListParams
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.processes import TICKWORK, cli, env_for
from tickwork.testing.streams import Commands, until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

JOB = {"name": "report", "schedule": {"cron": "0 3 * * *"}, "kind": "http",
       "payload": {"url": "https://example.org/hook"}}


async def start(env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            *TICKWORK, "consume", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=out,
            start_new_session=True)


@pytest.mark.parametrize("family", ["redis", "amqp", "nats"])
async def test_kill_9_between_commit_and_ack_reapplies_harmlessly(
        tmp_path: Path, family: str) -> None:
    commands = await Commands.open(family)
    store = SqliteStore(f"sqlite:///{tmp_path}/tickwork.db")
    procs: list[asyncio.subprocess.Process] = []
    try:
        env = env_for(tmp_path, TICKWORK_BROKERS=json.dumps({"cmds": commands.url}),
                      TICKWORK_OUTBOUND_ALLOW="127.0.0.1",
                      TICKWORK_CONSUME=f"cmds/{commands.source}",
                      TICKWORK_WORKER_ID="consume-fault-test",
                      TICKWORK_LEASE_SECONDS="2", TICKWORK_HEARTBEAT_SECONDS="1")
        code, _, err = await cli(env, "migrate")
        assert code == 0, err
        await commands.send({"op": "upsert", "job": JOB, "version": 1,
                             "reply_to": commands.reply})
        log = tmp_path / "consume.log"
        first = await start({**env, "TICKWORK_FAILPOINTS": "consume_after_commit=kill@1"}, log)
        procs.append(first)
        assert await asyncio.wait_for(first.wait(), 60) == -signal.SIGKILL, log.read_text()
        created = await store.job_get("report")  # committed before the kill ...
        assert await commands.replies() == []  # ... and never answered nor acknowledged

        await commands.send({"op": "trigger", "name": "report", "reply_to": commands.reply})
        procs.append(await start(env, log))

        async def answered() -> bool:
            return len(await commands.replies()) >= 2

        await until(answered, lambda: asyncio.sleep(0.1), seconds=45)
        # By op: NATS delivers the unacknowledged upsert again after ack_wait, maybe after
        # the trigger sent later (which needs only the job, committed before the kill).
        replies = {r["op"]: r for r in (json.loads(b) for b, _ in await commands.replies())}
        again, trigger = replies["upsert"], replies["trigger"]
        assert (again["ok"], again["applied"], again["applied_version"]) == (True, False, 1)
        assert (trigger["ok"], trigger["op"]) == (True, "trigger")
        assert (await store.job_get("report")).id == created.id  # the same job, once
        assert await store.job_version_get("report") == 1
        assert await commands.dead_letters() == []
        audit = await store.audit_list(AuditListParams(job_id=created.id))
        assert [e.action.value for e in audit] == ["create", "trigger"]
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), 30)
        await store.close()
        await commands.close()
