"""What a deployment lets a job run, checked when a job is created or changed.

The worker checks again before every attempt (its settings decide). This check turns a job
that could never run into an error naming the field (422 on the API, exit status 2 on the CLI)
wherever the creating process knows the settings: always in ``tickwork run``, whose own workers
run what it creates, and for what ``tickwork api`` and the CLI have configured (an empty
python allowlist or shell jobs switched off there say nothing about the workers' settings).
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from tickwork.errors import ValidationError
from tickwork.executors.base import ExecutorSettings
from tickwork.executors.publish import check_broker
from tickwork.executors.python import module_refusal, resolve_callable
from tickwork.executors.shell import resolve_command
from tickwork.models import JobSpec


def check_alert_brokers(alerts: str, settings: ExecutorSettings, field: str) -> None:
    """Raise ValidationError naming the channel unless each publish channel of ``alerts``
    (canonical text) names a configured broker and the destination that broker takes, as a
    publish job's payload must."""
    for index, channel in enumerate(json.loads(alerts)["channels"]):
        if channel["kind"] != "publish":
            continue
        where = f"{field}.channels[{index}]"
        try:
            check_broker(channel, settings)
        except ValidationError as exc:
            raise ValidationError(exc.field.replace("payload", where, 1), exc.reason) from None


@dataclass(slots=True)
class JobPolicy:
    settings: ExecutorSettings
    runs_jobs: bool  # this process's own workers run the jobs it creates
    _checked: dict[str, None] = field(default_factory=dict)  # callables found runnable

    def check(self, spec: JobSpec) -> None:
        """Raise ValidationError naming the field when ``spec`` could never run here."""
        if spec.kind == "python":
            self._check_python(spec.payload["callable"])
        elif spec.kind == "shell":
            self._check_shell(spec.payload)
        elif spec.kind == "publish" and (self.runs_jobs or self.settings.brokers):
            check_broker(spec.payload, self.settings)
        if spec.alerts is not None and (self.runs_jobs or self.settings.brokers):
            check_alert_brokers(spec.alerts, self.settings, "alerts")

    def _check_python(self, target: str) -> None:
        allowed = self.settings.python_allowed_modules
        if target in self._checked or not (allowed or self.runs_jobs):
            return
        refusal = module_refusal(target, allowed)
        if refusal is not None:
            raise ValidationError("payload.callable", refusal)
        module_name = target.partition(":")[0]
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            if not self.runs_jobs and isinstance(exc, ImportError):
                return  # installed where the workers run, perhaps not here
            raise ValidationError("payload.callable", f"cannot import {module_name!r}: "
                                  f"{type(exc).__name__}: {exc}") from None
        found = resolve_callable(module, target, allowed)
        if isinstance(found, str):
            raise ValidationError("payload.callable", found)
        if len(self._checked) >= 4096:
            self._checked.clear()
        self._checked[target] = None

    def _check_shell(self, payload: dict[str, Any]) -> None:
        if self.runs_jobs or self.settings.shell_enabled:
            resolve_command(payload, self.settings, os.environ.get("PATH", os.defpath),
                            look_up=self.runs_jobs)
