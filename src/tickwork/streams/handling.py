"""One command's fate: applied, stale or dead, with the reply and dead letter it calls for.

``CommandHandler.handle`` parses and applies one message body and says what its source must
send before it acknowledges the message: the reply (to ``reply_to``, when there is one) and,
for a command that cannot be applied (not JSON, an unknown op, an invalid document, a job
that does not exist), the error to dead-letter the original message with. A failure of the
store (StoreError) is raised instead: the message stays unacknowledged and comes again.

A command is acknowledged only after its transaction committed; ``consume_after_commit`` is
the failpoint between the two (a crash there re-applies the command, which its version, or
an upsert's sameness, makes harmless).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from tickwork.client import AsyncClient
from tickwork.document.render import job_json
from tickwork.errors import (
    Conflict,
    JobNotFound,
    StaleVersion,
    StoreError,
    TickworkError,
    ValidationError,
)
from tickwork.metrics import Metrics
from tickwork.models import Job
from tickwork.streams.commands import (
    Command,
    apply,
    check_reply_to,
    parse_command,
    reply_to_of,
)
from tickwork.worker.failpoints import failpoint

log = logging.getLogger("tickwork.streams")
APPLIED, STALE, DEAD = "applied", "stale", "dead"


@dataclass(frozen=True, slots=True)
class Handled:
    outcome: str  # applied | stale | dead
    reply_to: str | None
    reply: bytes  # the JSON answer, sent only when reply_to is set
    error: str | None = None  # dead: why, sent along with the original message


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


class CommandHandler:
    def __init__(self, client: AsyncClient, *, source: str,
                 where: tuple[str, str] = ("", ""), metrics: Metrics | None = None) -> None:
        self.client = client
        self.source = source  # broker/stream, as the settings name it
        self.where = where  # the stream (queue, subject) read, and its dead letters
        self.metrics = metrics
        self.actor = f"consume:{source}"

    async def handle(self, body: bytes, reply_to: str | None = None,
                     message_id: str | None = None) -> Handled:
        """``reply_to``: the transport's own (AMQP's property), used when the command has
        none; ``message_id``: the broker's identity of the message (a Redis entry id, a
        JetStream sequence, an AMQP message_id), the same when it is delivered again."""
        command: Command | None = None
        try:
            command = parse_command(body)
            check_reply_to(command.reply_to or reply_to, *self.where)
            answer = await apply(self.client, command, self.actor, message_id)
        except StoreError:
            raise  # not the command's fault: it stays unacknowledged and is read again
        except StaleVersion as exc:
            failpoint("consume_after_commit")  # nothing was written; the same place anyway
            assert command is not None
            current = await self._current(command.name, command.namespace)
            return self._done(STALE, command.reply_to or reply_to, {
                "ok": True, "op": command.op, "applied": False, "name": command.name,
                "reason": str(exc), "applied_version": exc.applied,
                **({"job": job_json(current)} if current is not None else {})})
        except (ValidationError, LookupError, Conflict, TickworkError) as exc:
            where = (command.reply_to if command else reply_to_of(body)) or reply_to
            if isinstance(exc, ValidationError) and exc.field == "reply_to":
                where = None  # a refused reply_to gets no reply
            return self._dead(body, exc, command, where)
        except Exception as exc:  # a bug: kept with its error rather than blocking the stream
            log.exception("command from %s failed unexpectedly", self.source)
            return self._dead(body, RuntimeError(f"internal error: {type(exc).__name__}: "
                                                 f"{exc}"), command, None)
        failpoint("consume_after_commit")
        reply = {"ok": True, "applied": True, **answer}
        return self._done(APPLIED if reply["applied"] else STALE,
                          command.reply_to or reply_to, reply)

    def refused(self, error: str) -> Handled:
        """A message that holds no command at all: dead-lettered with ``error``."""
        log.warning("message from %s dead-lettered: %s", self.source, error)
        return self._done(DEAD, None, {"ok": False, "error": error}, error)

    async def _current(self, name: str, namespace: str) -> Job | None:
        """The job ``name`` of ``namespace`` (a command's), or None."""
        try:
            return await self.client.scoped(namespace).get_job(name)
        except JobNotFound:
            return None

    def _done(self, outcome: str, reply_to: str | None, reply: dict[str, Any],
              error: str | None = None) -> Handled:
        if self.metrics is not None:
            self.metrics.command_handled(self.source, outcome)
        return Handled(outcome, reply_to, _json(reply), error)

    def _dead(self, body: bytes, exc: Exception, command: Command | None,
              reply_to: str | None) -> Handled:
        error = str(exc) if str(exc) else type(exc).__name__
        if isinstance(exc, LookupError) and command is not None:
            error = f"{command.op}: no job named {command.name!r}"
        log.warning("command from %s dead-lettered: %s", self.source, error)
        reply: dict[str, Any] = {"ok": False, "error": error}
        if isinstance(exc, ValidationError) and exc.field:
            reply["field"] = exc.field
        if command is not None:
            reply |= {"op": command.op, "name": command.name}
        return self._done(DEAD, reply_to, reply, error)

