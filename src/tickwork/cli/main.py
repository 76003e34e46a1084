"""``tickwork``: one entry point; settings from flags, then TICKWORK_* variables, then TOML.

Bad input exits with status 2 and a one-line message; a store (or API) that cannot be reached
exits 1. Nothing the user types produces a traceback.

The commands are Click commands, one group per module; a command's callback may be a
coroutine function, which ``main`` runs once the command line is parsed. A new group is a
module with a ``click.Group`` and one ``add_command`` line in ``build_cli``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from tickwork import __version__
from tickwork.cli import (
    alerts,
    api,
    audit,
    bench,
    calendars,
    consume,
    distributed,
    enqueue,
    jobs,
    limits,
    namespaces,
    queues,
    runs,
    secrets,
    service,
)
from tickwork.cli.options import LOG_FORMAT_ENV, LOG_LEVEL_ENV, LOGGING, Group, examples
from tickwork.config import LOG_LEVELS
from tickwork.document.text import not_unicode
from tickwork.errors import (
    ConfigError,
    Conflict,
    Forbidden,
    NotMigrated,
    StoreUnavailable,
    TickworkError,
    ValidationError,
)
from tickwork.logs import LOG_FORMATS, TEXT, configure
from tickwork.runtime import eventloop

EXIT_INPUT = 2
EXIT_FAILURE = 1
PROG = "tickwork"
COMPLETE_VAR = "_TICKWORK_COMPLETE"  # Click's shell completion asks through this variable
SHELLS = ("bash", "zsh", "fish")


@click.group(cls=Group, epilog=examples(
    "tickwork run --demo                       # everything in one process, on SQLite",
    "tickwork jobs create --json jobs.ndjson",
    "tickwork runs list --state dead --json",
    "tickwork jobs list --api https://tickwork.example.org   # with TICKWORK_API_TOKEN set",
    "tickwork COMMAND --help                   # what a command does, its options, examples"))
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s",
                      help="print the version and exit")
def cli() -> None:
    """A distributed job scheduler: cron, intervals and one-off jobs as webhooks, shell
    commands and Python callables.

    Settings come from flags, then TICKWORK_* environment variables, then a TOML file
    (--config, TICKWORK_CONFIG or ./tickwork.toml).
    """


@cli.command("completion", epilog=examples(
    "tickwork completion bash > ~/.local/share/bash-completion/completions/tickwork",
    "tickwork completion zsh > \"${fpath[1]}/_tickwork\"",
    "tickwork completion fish > ~/.config/fish/completions/tickwork.fish",
    "eval \"$(tickwork completion bash)\"      # this shell only"))
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> int:
    """Print the shell completion script (bash, zsh, fish).

    Commands, options, choices and file names then complete with Tab.
    """
    from click.shell_completion import get_completion_class  # noqa: PLC0415  (this command only)

    completer = get_completion_class(shell)
    assert completer is not None  # every name of SHELLS has one
    sys.stdout.write(completer(cli, {}, PROG, COMPLETE_VAR).source() + "\n")
    return 0


def build_cli() -> click.Group:
    for group in (service.run, service.migrate, distributed.scheduler, distributed.worker,
                  consume.consume, api.api, jobs.jobs, enqueue.enqueue, calendars.calendars,
                  runs.runs, queues.queues, limits.limits, audit.audit, alerts.alerts,
                  api.tokens, namespaces.namespaces, secrets.secrets, bench.bench):
        cli.add_command(group)
    return cli


build_cli()


def main(argv: Sequence[str] | None = None) -> int:  # noqa: PLR0911  (a status per outcome)
    args = list(sys.argv[1:] if argv is None else argv)
    if COMPLETE_VAR in os.environ:  # the shell asks for completions: Click answers and exits
        cli.main(args, prog_name=PROG, complete_var=COMPLETE_VAR)
    try:
        return _run(args)
    except KeyboardInterrupt:
        return 130
    except click.exceptions.Exit as exc:  # --help, --version
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:  # `tickwork jobs`: what it offers
        sys.stdout.write(exc.format_message() + "\n")
        return EXIT_INPUT
    except click.UsageError as exc:
        return fail(_usage_line(exc), EXIT_INPUT)
    except click.ClickException as exc:
        return fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        return 130
    except (ValidationError, LookupError, Conflict, Forbidden, NotMigrated) as exc:
        return fail(str(exc), EXIT_INPUT)
    except StoreUnavailable as exc:
        return fail(str(exc), EXIT_FAILURE)
    except TickworkError as exc:
        return fail(str(exc), EXIT_FAILURE)
    except BrokenPipeError:
        return 0


def _run(args: list[str]) -> int:
    """Parse the command line, set up logging, then run the command (its coroutine)."""
    _text_arguments(args)
    with cli.make_context(PROG, args) as ctx:
        work = cli.invoke(ctx)
        chosen = ctx.meta.get(LOGGING)
    try:
        configure_logging(*_log_choice(chosen))
    except ConfigError:
        if asyncio.iscoroutine(work):
            work.close()  # never started: a bad log setting stops the command first
        raise
    if asyncio.iscoroutine(work):
        work = eventloop.run(work)
    return int(work or 0)


def _usage_line(exc: click.UsageError) -> str:
    """Click's message on one line, with the command it concerns and where to read more."""
    message = " ".join(exc.format_message().split())
    message = (message[:1].lower() + message[1:]).rstrip(".")
    path = exc.ctx.command_path if exc.ctx is not None else PROG
    return f"{message}; see '{path} --help'"


def _text_arguments(argv: Sequence[str]) -> Sequence[str]:
    """``argv``, if each argument is text: bytes that are not UTF-8 arrive as surrogates."""
    for number, arg in enumerate(argv, 1):
        if not_unicode(arg) is not None:
            shown = arg.encode("utf-8", "backslashreplace").decode()
            raise ValidationError("", f"argument {number} ({shown}) is not valid UTF-8 text")
    return argv


def _log_choice(chosen: dict[str, Any] | None) -> tuple[str, str]:
    """The level and format to log in: ``--log-level`` and ``--log-format`` of the
    long-running commands, else TICKWORK_LOG_LEVEL (those commands only) and
    TICKWORK_LOG_FORMAT (every command), read as the command starts, before any other
    setting. The long-running commands log at info unless told otherwise; the others log
    warnings only, so their output stays what they print."""
    given = chosen or {}
    fmt = given.get("log_format") or _from_env(LOG_FORMAT_ENV, "log_format", LOG_FORMATS) or TEXT
    if chosen is None:
        return "warning", fmt
    level = given.get("log_level") or _from_env(LOG_LEVEL_ENV, "log_level", LOG_LEVELS)
    return level or "info", fmt


def _from_env(variable: str, setting: str, allowed: Sequence[str]) -> str | None:
    value = (os.environ.get(variable) or "").lower() or None
    if value is not None and value not in allowed:
        raise ConfigError(setting, f"must be one of {', '.join(allowed)} (got {value!r} from "
                                   f"{variable})")
    return value


def configure_logging(level: str, fmt: str) -> None:
    """The one place the command line sets up logging: ``level`` (debug ... critical) and
    ``fmt`` (``text``, or ``json``: one object a line), on standard error (tickwork.logs)."""
    configure(level, fmt)


def fail(message: str, status: int) -> int:
    sys.stderr.write(f"tickwork: error: {message}\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
