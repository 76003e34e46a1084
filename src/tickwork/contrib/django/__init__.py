"""tickwork in a Django project: add ``"tickwork.contrib.django"`` to ``INSTALLED_APPS``.

- Settings come from ``settings.TICKWORK``, a dict of tickwork settings by name
  (``{"database": "postgresql://...", "queues": "default:16", "executors": {...}}``), over
  the ``TICKWORK_*`` environment variables and tickwork's defaults (``tickwork_settings``).
- Each installed app's ``jobs.py`` is imported (``autodiscover_jobs``), so the functions it
  declares with ``@tickwork.job`` become jobs, like Celery's ``autodiscover_tasks``.
- ``python manage.py tickwork_run`` runs the embedded service (planner, workers, API and
  dashboard), ``python manage.py tickwork_worker`` a worker (docs/integration.md).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from tickwork.config import Settings, load_settings

__all__ = ["JOBS_MODULE", "autodiscover_jobs", "tickwork_settings"]

JOBS_MODULE = "jobs"


def tickwork_settings(**overrides: object) -> Settings:
    """tickwork's settings from ``settings.TICKWORK``, then ``overrides`` (a management
    command's options; None leaves a value alone). Unknown names are errors that say which."""
    from django.conf import settings  # noqa: PLC0415  (Django: only for this integration)

    configured: object = getattr(settings, "TICKWORK", {})
    if not isinstance(configured, Mapping):
        from tickwork.errors import ConfigError  # noqa: PLC0415

        raise ConfigError("TICKWORK", "must be a dict of tickwork settings, e.g. "
                          "{'database': 'postgresql://...'}")
    flags: dict[str, object] = {}
    for name, value in configured.items():
        if name == "executors" and isinstance(value, Mapping):
            flags.update(value)  # executor settings have names of their own
        else:
            flags[str(name)] = value
    flags.update({k: v for k, v in overrides.items() if v is not None})
    return load_settings(flags=flags)


def autodiscover_jobs() -> list[str]:
    """Import ``<app>.jobs`` of every installed app that has one; the names of those imported.

    A ``jobs.py`` that fails to import raises: a job module with a mistake is never skipped."""
    from django.apps import apps  # noqa: PLC0415

    found = []
    for app in apps.get_app_configs():
        name = f"{app.name}.{JOBS_MODULE}"
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name)
        found.append(name)
    return found


def declared_jobs() -> list[dict[str, Any]]:
    """The documents of every ``@tickwork.job`` imported so far."""
    from tickwork import registry  # noqa: PLC0415

    return registry.registered()
