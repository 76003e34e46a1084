"""The wrapper every executor runs in: secrets resolved before, masked after.

``SecuredExecutor`` replaces each ``{"$secret": name}`` of the payload with its value in the
job's namespace (``ctx.namespace``; never another's) for this attempt only (the stored job
keeps the reference), runs the real executor, then replaces every secret value used (from the
payload or looked up by the executor itself) with ``****`` in the outcome's output and error.
An exception from the executor becomes a retriable Fail whose text is masked the same way, so
no secret reaches the store, the logs or the API.
"""

from __future__ import annotations

import dataclasses
import logging

from tickwork.drivers.secrets import SecretNotFound
from tickwork.errors import StoreError
from tickwork.executors.base import ExecutionContext, Executor, PayloadMemo
from tickwork.outcomes import Cancel, Fail, Outcome, Success
from tickwork.secrets import (
    SecretResolver,
    SecretsUnavailable,
    find_references,
    mask,
    mask_outcome_text,
    start_recording,
    stop_recording,
)

log = logging.getLogger("tickwork.executors")

NO_SECRETS = ("the payload refers to secrets ({names}), but this worker has no secret store "
              "configured")


class SecuredExecutor:
    """``inner`` with payload secrets resolved before and masked after (see the module doc)."""

    def __init__(self, inner: Executor, secrets: SecretResolver | None) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.secrets = secrets
        self._references: PayloadMemo[list[str]] = PayloadMemo()

    async def close(self) -> None:
        await self.inner.close()

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        used, token = start_recording()
        try:
            resolved = await self._resolve(ctx)
            if isinstance(resolved, Fail):
                return resolved
            try:
                outcome = await self.inner.execute(resolved)
            except Exception as exc:  # the pool would log it with its text: mask it first
                message = mask(f"{type(exc).__name__}: {exc}", used)
                # No traceback: its frames' text may hold a secret.
                log.error("executor %s raised %s", ctx.kind, message)
                outcome = Fail(f"executor error: {message}")
            return _masked(outcome, used)
        finally:
            stop_recording(token)

    async def _resolve(self, ctx: ExecutionContext) -> ExecutionContext | Fail:
        names = self._references.lookup(ctx.payload)
        if names is None:  # a walk of the whole payload: once per payload, not per execution
            names = self._references.remember(ctx.payload, find_references(ctx.payload))
        if not names:
            return ctx
        if self.secrets is None:
            return Fail(NO_SECRETS.format(names=", ".join(names)), retriable=False)
        try:
            payload = await self.secrets.resolve(ctx.payload, namespace=ctx.namespace)
        except SecretNotFound as exc:
            return Fail(f"payload: {exc}", retriable=False)
        except SecretsUnavailable as exc:
            return Fail(str(exc), retriable=False)
        except StoreError as exc:  # the database is busy or gone: worth another try
            return Fail(f"reading secrets failed: {exc}")
        return dataclasses.replace(ctx, payload=payload)


def _masked(outcome: Outcome, used: set[str]) -> Outcome:
    if not used:
        return outcome
    if isinstance(outcome, Success):
        return Success(output=mask_outcome_text(outcome.output, used))
    if isinstance(outcome, Fail):
        return dataclasses.replace(outcome, error=mask(outcome.error, used),
                                   output=mask_outcome_text(outcome.output, used))
    return Cancel(mask(outcome.reason, used))
