"""The pieces every command is built from: the group class (typo hints), options that show the
TICKWORK_* variable behind them, the store and API options, ``--json``, and examples in help.

Click reads only the variables that are not settings (``TICKWORK_API_URL``,
``TICKWORK_API_TOKEN``). A setting's variable (``TICKWORK_DATABASE_URL``, ...) is shown in
the option's help but read by ``tickwork.config.load_settings``, which keeps the order flag >
variable > TOML > default and says where a bad value came from; ``TICKWORK_LOG_LEVEL`` and
``TICKWORK_LOG_FORMAT`` are read by ``main`` as a command starts, to set up logging.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

API_URL_ENV = "TICKWORK_API_URL"
API_TOKEN_ENV = "TICKWORK_API_TOKEN"  # noqa: S105  (the variable's name, not a token)
NAMESPACE_ENV = "TICKWORK_NAMESPACE"
LOG_LEVEL_ENV = "TICKWORK_LOG_LEVEL"
LOG_FORMAT_ENV = "TICKWORK_LOG_FORMAT"
# Variables the command line reads itself; the settings loader is given the environment
# without them, so they are not "unknown settings" to it.
CLI_ONLY_ENV = frozenset({API_URL_ENV, API_TOKEN_ENV, NAMESPACE_ENV})
LOGGING = "tickwork.logging"  # ctx.meta key: the --log-level and --log-format given
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Group(click.Group):
    """A command group that answers an unknown command with the closest known one."""

    group_class = type  # subgroups are of this class too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        super().__init__(*args, **kwargs)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise click.UsageError(f"no such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)


class SettingOption(click.Option):
    """An option backed by a setting: its help shows the TICKWORK_* variable, which
    ``load_settings`` reads (Click leaves it alone, so the precedence and messages are
    the settings loader's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("show_envvar", True)
        super().__init__(*args, **kwargs)

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        return None


def setting(*decls: str, env: str, **kwargs: Any) -> Callable[[F], F]:
    """``click.option`` for a setting whose variable is ``env``."""
    return click.option(*decls, cls=SettingOption, envvar=env, **kwargs)


def examples(*lines: str) -> str:
    """An epilog of example command lines, printed as written under ``--help``."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def json_flag(help_text: str = "print JSON instead of a table") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a command finds tickwork: a database (through the settings), or a REST API."""

    database: str | None = None
    config: str | None = None
    redis: str | None = None
    api: str | None = None
    token: str | None = None
    api_from_env: bool = False
    namespace: str | None = None  # the one namespace the command sees (None: every one)

    @property
    def remote(self) -> bool:
        return self.api is not None


REDIS_HELP = "redis://host:port/db when the deployment dispatches through Redis"


def store_options(*, redis: str | None = None, api: bool = False,
                  namespace: bool = True) -> Callable[[F], F]:
    """--database and --config (with ``redis``, --redis with that help; with ``api``, --api,
    --token and, unless ``namespace`` is False, --namespace), handed to the command as one
    ``target: Target``. The token commands take no --namespace target: theirs names the
    token's namespace."""
    scoped = api and namespace

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def with_target(*args: Any, **params: Any) -> Any:
            ctx = click.get_current_context()
            source = ctx.get_parameter_source("api") if api else None
            target = Target(database=params.pop("database"), config=params.pop("config"),
                            redis=params.pop("redis") if redis else None,
                            api=params.pop("api") if api else None,
                            token=params.pop("token") if api else None,
                            api_from_env=source is click.core.ParameterSource.ENVIRONMENT,
                            namespace=params.pop("namespace") if scoped else None)
            return command(*args, target=target, **params)

        options: list[Callable[[F], F]] = [
            setting("--database", metavar="URL", env="TICKWORK_DATABASE_URL",
                    help="sqlite:///path (default sqlite:///tickwork.db) or postgresql://..."),
            setting("--config", metavar="FILE", env="TICKWORK_CONFIG",
                    help="a TOML settings file (default ./tickwork.toml if present)"),
        ]
        if redis:
            options.append(setting("--redis", metavar="URL", env="TICKWORK_REDIS_URL",
                                   help=redis))
        if api:
            options += [
                click.option("--api", metavar="URL", envvar=API_URL_ENV, show_envvar=True,
                             help="manage tickwork through its REST API at URL (e.g. "
                             "https://tickwork.example.org) instead of a database"),
                click.option("--token", metavar="TOKEN", envvar=API_TOKEN_ENV,
                             show_envvar=True, help="the API token for --api (tickwork "
                             "tokens create); prefer the variable, which stays out of "
                             "shell history"),
            ]
        if scoped:
            options.append(
                click.option("--namespace", metavar="NAME", envvar=NAMESPACE_ENV,
                             show_envvar=True, help="the only namespace to see and change "
                             "(default: every one, creating in 'default'; with --api, a "
                             "token of one namespace always sees its own)"))
        wrapped: Any = with_target
        for option in reversed(options):
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]  # click's decorators are untyped here

    return decorate


def _remember_logging(ctx: click.Context, param: click.Parameter, value: object) -> None:
    ctx.meta.setdefault(LOGGING, {})[param.name] = value.lower() if isinstance(value,
                                                                                str) else value


def logging_options(command: F) -> F:
    """--log-level and --log-format of the long-running processes; main() configures
    logging from them, in one place."""
    command = setting(
        "--log-format", type=click.Choice(["text", "json"], case_sensitive=False),
        metavar="FORMAT", env=LOG_FORMAT_ENV, expose_value=False, callback=_remember_logging,
        help="text (default) or json: one JSON object a line")(command)
    return setting(
        "--log-level", type=click.Choice(["debug", "info", "warning", "error", "critical"],
                                         case_sensitive=False),
        metavar="LEVEL", env=LOG_LEVEL_ENV, expose_value=False, callback=_remember_logging,
        help="debug, info (default), warning, error")(command)
