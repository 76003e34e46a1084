"""The Django app of tickwork's integration: its management commands live under it."""

from __future__ import annotations

from django.apps import AppConfig


class TickworkConfig(AppConfig):  # type: ignore[misc]  # Django ships no type information
    name = "tickwork.contrib.django"
    label = "tickwork"
    verbose_name = "tickwork"
