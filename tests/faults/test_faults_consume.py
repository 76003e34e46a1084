"""Fault suite, ``tickwork consume``: kill -9 between a command's store commit and its ack.

The consumer dies at the ``consume_after_commit`` failpoint, after the command committed and
before the broker heard of it. A restart gets the command again and applies it again,
harmlessly: an upsert's version was already applied, so nothing changes and the job exists
once; a trigger finds the run its message made, so the job runs once. The command is
answered and acknowledged this time, and the next command applies as usual.
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


@pytest.mark.parametrize("killed", ["upsert", "trigger"])
@pytest.mark.parametrize("family", ["redis", "amqp", "nats"])
async def test_kill_9_between_commit_and_ack_reapplies_harmlessly(
        tmp_path: Path, family: str, killed: str) -> None:
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
        upsert = {"op": "upsert", "job": JOB, "version": 1, "reply_to": commands.reply}
        trigger = {"op": "trigger", "name": "report", "reply_to": commands.reply}
        await commands.send(upsert)
        if killed == "trigger":
            await commands.send(trigger)
        log = tmp_path / "consume.log"
        at = 1 if killed == "upsert" else 2  # the failpoint's hit: the command to die after
        first = await start({**env, "TICKWORK_FAILPOINTS": f"consume_after_commit=kill@{at}"},
                            log)
        procs.append(first)
        assert await asyncio.wait_for(first.wait(), 60) == -signal.SIGKILL, log.read_text()
        created = await store.job_get("report")  # committed before the kill ...
        answered_before = len(await commands.replies())
        assert answered_before == at - 1  # ... and the last one never answered nor acked

        if killed == "upsert":
            await commands.send(trigger)
        procs.append(await start(env, log))

        async def answered() -> bool:
            return len(await commands.replies()) >= 2  # the upsert's and the trigger's

        await until(answered, lambda: asyncio.sleep(0.1), seconds=45)
        replies = [json.loads(b) for b, _ in await commands.replies()]
        assert all(r["ok"] for r in replies)
        assert (await store.job_get("report")).id == created.id  # the same job, once
        assert await store.job_version_get("report") == 1
        assert await commands.dead_letters() == []
        audit = await store.audit_list(AuditListParams(job_id=created.id))
        assert [e.action.value for e in audit] == ["create", "trigger"]  # one run, once
        again = [r for r in replies if r["op"] == killed][-1]
        assert again["applied"] is False  # the redelivered command changed nothing
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), 30)
        await store.close()
        await commands.close()
