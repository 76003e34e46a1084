"""What tickwork's management commands share: settings, autodiscovery, logging, errors."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tickwork.config import Settings
from tickwork.contrib.django import autodiscover_jobs, tickwork_settings
from tickwork.errors import TickworkError
from tickwork.runtime import eventloop


class TickworkCommand(BaseCommand):  # type: ignore[misc]  # Django ships no type information
    """A long-running tickwork process as a management command; SIGTERM or Ctrl-C stops it
    gracefully."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queues", metavar="SPEC",
                            help="queues and their concurrency, e.g. default:16,mail:4")
        parser.add_argument("--worker-id", metavar="NAME", help="name this worker in run history")

    def settings(self, options: dict[str, Any], **more: object) -> Settings:
        try:
            return tickwork_settings(queues=options.get("queues"),
                                     worker_id=options.get("worker_id"), **more)
        except TickworkError as exc:
            raise CommandError(f"TICKWORK settings: {exc}") from None

    def discover(self) -> list[str]:
        modules = autodiscover_jobs()
        self.stdout.write(f"tickwork: jobs from {', '.join(modules) or 'no app (no jobs.py)'}")
        return modules

    def serve(self, main: Coroutine[Any, Any, None]) -> None:
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, datefmt="%H:%M:%S",
                                format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
        try:
            eventloop.run(main)
        except KeyboardInterrupt:
            pass
        except TickworkError as exc:
            raise CommandError(str(exc)) from None
