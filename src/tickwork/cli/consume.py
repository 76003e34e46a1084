"""``tickwork consume``: apply job commands read from message streams (docs/streams.md)."""

from __future__ import annotations

import click

from tickwork.cli.common import settings_from
from tickwork.cli.distributed import METRICS
from tickwork.cli.options import Target, examples, logging_options, setting, store_options


@click.command("consume", epilog=examples(
    "tickwork consume --consume events/tickwork.commands     # events: a broker of [brokers]",
    "TICKWORK_CONSUME=events/tickwork.commands,rabbit/jobs tickwork consume "
    "--database postgresql://tickwork@db.internal/tickwork",
    "redis-cli XADD tickwork.commands '*' command "
    "'{\"op\": \"pause\", \"name\": \"nightly-report\"}'"))
@setting("--consume", metavar="BROKER/SOURCE[,...]", env="TICKWORK_CONSUME",
         help="read commands from these: a broker of the brokers setting and its stream, "
         "queue or subject")
@setting("--worker-id", metavar="NAME", env="TICKWORK_WORKER_ID",
         help="this consumer's name in a Redis consumer group (default consume-HOSTNAME; "
         "a restart under the same name takes back what it had not acknowledged)")
@METRICS
@logging_options
@store_options(redis="redis://host:port/db: what trigger commands store goes into Redis' "
               "due set (the postgres + redis deployment)")
async def consume(target: Target, consume: str | None, worker_id: str | None,
                  metrics_address: str | None) -> int:
    """Create, update, pause, resume, trigger and delete jobs from commands on a Redis
    stream, a RabbitMQ queue or a NATS JetStream subject.

    A command is acknowledged once the store committed it; a bad one goes to
    <source>.dead with its error. Run as many as you like: they share the work.
    """
    settings = settings_from(target, consume=consume, worker_id=worker_id,
                             metrics_address=metrics_address)
    from tickwork.runtime.client import load_extra  # noqa: PLC0415  (the process loads to run)
    from tickwork.runtime.consume import ConsumeProcess  # noqa: PLC0415

    if settings.redis:
        load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")
    await ConsumeProcess(settings).run_until_signalled()
    return 0
