"""Executors: one module per kind of job, and the two entry points the rest of tickwork uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tickwork.errors import ValidationError
from tickwork.executors import http, python, shell
from tickwork.executors.base import ExecutionContext, Executor, ExecutorSettings
from tickwork.executors.http import HttpExecutor
from tickwork.executors.python import PythonExecutor
from tickwork.executors.shell import ShellExecutor

__all__ = [
    "AVAILABLE_KINDS",
    "ExecutionContext",
    "Executor",
    "ExecutorSettings",
    "HttpExecutor",
    "PythonExecutor",
    "ShellExecutor",
    "build_executors",
    "validate_payload",
]

AVAILABLE_KINDS = ("http", "shell", "python")
PLANNED_KINDS = ("slack", "email")

_VALIDATORS: dict[str, Callable[[object], dict[str, Any]]] = {
    "http": http.validate_payload,
    "shell": shell.validate_payload,
    "python": python.validate_payload,
}


def validate_payload(kind: str, payload: object) -> dict[str, Any]:
    """The normalised payload for ``kind``, or ValidationError naming the field."""
    validator = _VALIDATORS.get(kind)
    if validator is not None:
        return validator(payload)
    if kind in PLANNED_KINDS:
        raise ValidationError("kind", f"kind {kind!r} is not available yet")
    raise ValidationError(
        "kind", f"unknown kind {kind!r}; expected one of {', '.join(AVAILABLE_KINDS)}"
    )


def build_executors(settings: ExecutorSettings) -> dict[str, Executor]:
    """One executor per available kind, keyed by kind."""
    executors: list[Executor] = [
        HttpExecutor(settings),
        ShellExecutor(settings),
        PythonExecutor(settings),
    ]
    return {e.kind: e for e in executors}
