"""Executors: one module per kind of job, and the two entry points the rest of tickwork uses."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tickwork.errors import ValidationError
from tickwork.executors.base import ExecutionContext, Executor, ExecutorSettings
from tickwork.secrets import validate_references

if TYPE_CHECKING:
    from tickwork.executors.email import EmailExecutor
    from tickwork.executors.http import HttpExecutor
    from tickwork.executors.publish import PublishExecutor
    from tickwork.executors.python import PythonExecutor
    from tickwork.executors.secured import SecuredExecutor
    from tickwork.executors.shell import ShellExecutor
    from tickwork.executors.slack import SlackExecutor
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

# Each kind's module, imported when a payload of the kind is first checked or run: the HTTP
# and SMTP clients cost a quarter of a second to import, which a CLI command that never
# touches a payload should not pay.
_MODULES = {kind: f"tickwork.executors.{kind}" for kind in AVAILABLE_KINDS}
_CLASSES = {
    "EmailExecutor": "email", "HttpExecutor": "http", "PublishExecutor": "publish",
    "PythonExecutor": "python", "SecuredExecutor": "secured", "ShellExecutor": "shell",
    "SlackExecutor": "slack",
}


def __getattr__(name: str) -> Any:
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"tickwork.executors.{module}"), name)


def validate_payload(kind: str, payload: object) -> dict[str, Any]:
    """The normalised payload for ``kind``, or ValidationError naming the field.

    ``{"$secret": "name"}`` references are checked here and kept as they are: they are
    resolved only when an attempt runs.
    """
    module = _MODULES.get(kind)
    if module is None:
        raise ValidationError(
            "kind", f"unknown kind {kind!r}; expected one of {', '.join(AVAILABLE_KINDS)}"
        )
    validate_references(payload)
    validated: dict[str, Any] = importlib.import_module(module).validate_payload(payload)
    return validated


def build_executors(
    settings: ExecutorSettings, secrets: SecretResolver | None = None
) -> dict[str, Executor]:
    """One executor per available kind, keyed by kind.

    Each resolves the payload's secret references with ``secrets`` before it runs and masks
    their values in what it returns; without ``secrets`` a payload that uses one fails.
    """
    from tickwork.executors.email import EmailExecutor  # noqa: PLC0415  (see _MODULES)
    from tickwork.executors.http import HttpExecutor  # noqa: PLC0415
    from tickwork.executors.outbound import OutboundClient  # noqa: PLC0415
    from tickwork.executors.publish import PublishExecutor  # noqa: PLC0415
    from tickwork.executors.python import PythonExecutor  # noqa: PLC0415
    from tickwork.executors.secured import SecuredExecutor  # noqa: PLC0415
    from tickwork.executors.shell import ShellExecutor  # noqa: PLC0415
    from tickwork.executors.slack import SlackExecutor  # noqa: PLC0415

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
