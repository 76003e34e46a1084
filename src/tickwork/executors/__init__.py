"""Executors: one module per kind of job, and the two entry points the rest of tickwork uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tickwork.errors import ValidationError
from tickwork.executors import email, http, publish, python, shell, slack
from tickwork.executors.base import ExecutionContext, Executor, ExecutorSettings
from tickwork.executors.email import EmailExecutor
from tickwork.executors.http import HttpExecutor
from tickwork.executors.outbound import OutboundClient
from tickwork.executors.publish import PublishExecutor
from tickwork.executors.python import PythonExecutor
from tickwork.executors.secured import SecuredExecutor
from tickwork.executors.shell import ShellExecutor
from tickwork.executors.slack import SlackExecutor
from tickwork.secrets import validate_references

if TYPE_CHECKING:
    from tickwork.secrets import SecretResolver

__all__ = [
    "AVAILABLE_KINDS",
    "EmailExecutor",
    "ExecutionContext",
    "Executor",
    "ExecutorSettings",
    "HttpExecutor",
    "PublishExecutor",
    "PythonExecutor",
    "SecuredExecutor",
    "ShellExecutor",
    "SlackExecutor",
    "build_executors",
    "validate_payload",
]

AVAILABLE_KINDS = ("http", "slack", "email", "shell", "python", "publish")

_VALIDATORS: dict[str, Callable[[object], dict[str, Any]]] = {
    "http": http.validate_payload,
    "slack": slack.validate_payload,
    "email": email.validate_payload,
    "shell": shell.validate_payload,
    "python": python.validate_payload,
    "publish": publish.validate_payload,
}


def validate_payload(kind: str, payload: object) -> dict[str, Any]:
    """The normalised payload for ``kind``, or ValidationError naming the field.

    ``{"$secret": "name"}`` references are checked here and kept as they are: they are
    resolved only when an attempt runs.
    """
    validator = _VALIDATORS.get(kind)
    if validator is None:
        raise ValidationError(
            "kind", f"unknown kind {kind!r}; expected one of {', '.join(AVAILABLE_KINDS)}"
        )
    validate_references(payload)
    return validator(payload)


def build_executors(
    settings: ExecutorSettings, secrets: SecretResolver | None = None
) -> dict[str, Executor]:
    """One executor per available kind, keyed by kind.

    Each resolves the payload's secret references with ``secrets`` before it runs and masks
    their values in what it returns; without ``secrets`` a payload that uses one fails.
    """
    outbound = OutboundClient(settings)  # one guarded pool for http and slack
    executors: list[Executor] = [
        HttpExecutor(settings, secrets, client=outbound),
        SlackExecutor(settings, client=outbound),
        EmailExecutor(settings, secrets),
        ShellExecutor(settings),
        PythonExecutor(settings),
        PublishExecutor(settings, secrets),  # one pooled connection per broker
    ]
    return {e.kind: SecuredExecutor(e, secrets) for e in executors}
