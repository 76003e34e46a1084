"""``python manage.py tickwork_run``: planner, workers, API and dashboard in one process."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from tickwork.contrib.django.command import TickworkCommand
from tickwork.contrib.django.runner import run_service


class Command(TickworkCommand):
    help = ("Run tickwork's embedded service (planner, workers, API and dashboard) with the "
            "jobs declared in each installed app's jobs.py")

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--host", help="serve the API and dashboard on this address")
        parser.add_argument("--port", help="serve the API and dashboard on this port")
        parser.add_argument("--no-api", dest="api_enabled", action="store_false", default=None,
                            help="do not serve the API and dashboard")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = self.settings(options, host=options.get("host"), port=options.get("port"),
                                 api_enabled=options.get("api_enabled"))
        self.serve(run_service(settings, self.discover()))
