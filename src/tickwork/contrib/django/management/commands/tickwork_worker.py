"""``python manage.py tickwork_worker``: runs the jobs declared in the installed apps."""

from __future__ import annotations

from typing import Any

from tickwork.contrib.django import declared_jobs
from tickwork.contrib.django.command import TickworkCommand
from tickwork.contrib.django.runner import run_worker


class Command(TickworkCommand):
    help = ("Run a tickwork worker for the jobs declared in each installed app's jobs.py "
            "(on SQLite: the embedded service without the API)")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = self.settings(options)
        modules = self.discover()
        self.serve(run_worker(settings, modules, declared_jobs()))
