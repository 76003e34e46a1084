"""``tickwork``: one entry point; settings from flags, then TICKWORK_* variables, then TOML.

Bad input exits with status 2 and a one-line message; a store that cannot be reached exits 1.
Nothing the user types produces a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from tickwork import __version__
from tickwork.cli import api, bench, calendars, distributed, jobs, runs, secrets, service
from tickwork.document.text import not_unicode
from tickwork.errors import (
    ConfigError,
    Conflict,
    NotMigrated,
    StoreUnavailable,
    TickworkError,
    ValidationError,
)
from tickwork.logs import LOG_FORMATS, TEXT, configure

EXIT_INPUT = 2
EXIT_FAILURE = 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwork", description="A distributed job scheduler: cron, intervals and one-off "
        "jobs as webhooks, shell commands and Python callables.")
    parser.add_argument("--version", action="version", version=f"tickwork {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    service.add_commands(commands)
    distributed.add_commands(commands)
    api.add_commands(commands)
    jobs.add_commands(commands)
    calendars.add_commands(commands)
    runs.add_commands(commands)
    secrets.add_commands(commands)
    bench.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_text_arguments(sys.argv[1:] if argv is None else argv))
        _configure_logging(args)
        return int(asyncio.run(args.handler(args)) or 0)
    except KeyboardInterrupt:
        return 130
    except (ValidationError, LookupError, Conflict, NotMigrated) as exc:
        return fail(str(exc), EXIT_INPUT)
    except StoreUnavailable as exc:
        return fail(str(exc), EXIT_FAILURE)
    except TickworkError as exc:
        return fail(str(exc), EXIT_FAILURE)
    except BrokenPipeError:
        return 0


def _text_arguments(argv: Sequence[str]) -> Sequence[str]:
    """``argv``, if each argument is text: bytes that are not UTF-8 arrive as surrogates."""
    for number, arg in enumerate(argv, 1):
        if not_unicode(arg) is not None:
            shown = arg.encode("utf-8", "backslashreplace").decode()
            raise ValidationError("", f"argument {number} ({shown}) is not valid UTF-8 text")
    return argv


def _configure_logging(args: argparse.Namespace) -> None:
    fmt = (os.environ.get("TICKWORK_LOG_FORMAT") or TEXT).lower()
    if fmt not in LOG_FORMATS:
        raise ConfigError("log_format", f"must be one of {', '.join(LOG_FORMATS)} (got "
                                        f"{fmt!r} from TICKWORK_LOG_FORMAT)")
    configure(getattr(logging, str(getattr(args, "log_level", None) or "warning").upper(),
                      logging.INFO), fmt)


def fail(message: str, status: int) -> int:
    sys.stderr.write(f"tickwork: error: {message}\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
