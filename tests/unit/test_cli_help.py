"""The command line explains itself: every command and group has a description and examples,
every option a help text, the TICKWORK_* variable behind an option is shown, listings and
shows take --json, mistakes are one line with a hint, and shells complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import click
import pytest

from tickwork.cli.main import cli, main
from tickwork.cli.options import CLI_ONLY_ENV, SettingOption
from tickwork.config import CONFIG_ENV, ENV_VARS

TICKWORK = (sys.executable, "-m", "tickwork.cli.main")


def commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


ALL = list(commands())
IDS = [" ".join(path) for path, _ in ALL]


def help_of(*path: str) -> str:
    result = subprocess.run([*TICKWORK, *path, "--help"], capture_output=True, text=True,
                            check=False, env={**os.environ, "COLUMNS": "100"}, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    return result.stdout


def test_every_command_is_here() -> None:
    assert {" ".join(path) for path, _ in ALL} >= {
        "run", "migrate", "scheduler", "worker", "api", "bench w1", "bench w2", "bench w3",
        "bench http", "completion", "jobs create", "jobs list", "jobs show", "jobs update",
        "jobs pause", "jobs resume", "jobs trigger", "jobs delete", "runs list", "runs show",
        "tokens create", "tokens list", "tokens revoke", "secrets set", "secrets list",
        "secrets delete", "secrets rotate", "queues list", "queues pause", "queues resume",
        "queues set", "limits list", "limits set", "limits delete"}


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_a_description_examples_and_help_for_each_option(path: tuple[str, ...],
                                                         command: click.Command) -> None:
    assert command.help, f"{' '.join(path)} has no description"
    assert command.epilog is not None
    assert "Examples:" in command.epilog
    assert f"tickwork {' '.join(path)}" in command.epilog or isinstance(command, click.Group)
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{' '.join(path)} {param.opts[0]} has no help"


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_the_variable_behind_an_option_is_a_real_one(path: tuple[str, ...],
                                                     command: click.Command) -> None:
    known = {*ENV_VARS, CONFIG_ENV, *CLI_ONLY_ENV, "TICKWORK_LOG_LEVEL"}
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar is not None:
            assert param.show_envvar
            assert param.envvar in known, (path, param.envvar)
        # bench's --database is a fresh database of its own, not the setting
        if path[0] != "bench" and isinstance(param, click.Option) and param.name in (
                "database", "redis", "queues", "host", "port", "worker_id"):
            assert isinstance(param, SettingOption), (path, param.name)


def test_help_shows_the_description_the_examples_and_the_variables() -> None:
    text = help_of("jobs", "list")
    assert "List jobs by name" in text
    assert "Examples:\n    tickwork jobs list\n" in text
    flat = " ".join(text.split())
    for variable in ("TICKWORK_DATABASE_URL", "TICKWORK_CONFIG", "TICKWORK_API_URL",
                     "TICKWORK_API_TOKEN"):
        assert f"[env var: {variable}]" in flat
    assert "TICKWORK_REDIS_URL" in help_of("run")
    assert "TICKWORK_LOG_FORMAT" in help_of("worker")
    top = help_of()
    for group in ("jobs", "runs", "queues", "tokens", "secrets", "bench", "completion"):
        assert f"\n  {group} " in top


@pytest.mark.parametrize(("path", "command"), [
    (p, c) for p, c in ALL if p[-1] in ("list", "show") or p[-1] == "trigger"], ids=lambda x: x)
def test_every_listing_and_show_takes_json(path: tuple[str, ...], command: click.Command) -> None:
    assert any("--json" in p.opts for p in command.params), path


@pytest.fixture
def tw(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
       tmp_path: Any) -> Any:
    for key in [k for k in os.environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize(("args", "line"), [
    (("jbos", "list"), "no such command 'jbos' (did you mean 'jobs'?); see 'tickwork --help'"),
    (("jobs", "lsit"), "no such command 'lsit' (did you mean 'list'?); see 'tickwork jobs "
     "--help'"),
    (("jobs", "list", "--jsn"), "no such option '--jsn'. Did you mean '--json'?; see "
     "'tickwork jobs list --help'"),
    (("jobs", "create"), "missing option '--json'; see 'tickwork jobs create --help'"),
    (("jobs", "show"), "missing argument 'JOB'; see 'tickwork jobs show --help'"),
    (("jobs", "list", "--limit", "many"), "invalid value for '--limit': 'many' is not a valid "
     "integer; see 'tickwork jobs list --help'"),
    (("jobs", "list", "--limit", "0"), None),
    (("runs", "list", "--state", "dean"), None),
    (("completion", "tcsh"), None),
])
def test_a_mistake_is_one_line_with_a_hint(tw: Any, args: tuple[str, ...],
                                           line: str | None) -> None:
    code, out, err = tw(*args)
    assert (code, out) == (2, "")
    assert err.startswith("tickwork: error: ")
    assert err.count("\n") == 1
    if line is not None:
        assert err == f"tickwork: error: {line}\n"


def test_a_group_without_a_command_shows_what_it_offers(tw: Any) -> None:
    code, out, err = tw("jobs")
    assert (code, err) == (2, "")
    assert "Commands:" in out
    assert "create" in out


def test_version_and_help_exit_0(tw: Any) -> None:
    assert tw("--version")[:2] == (0, "tickwork 0.1.0\n")
    code, out, _ = tw("-h")
    assert code == 0
    assert "Usage: tickwork" in out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script_for_each_shell(tw: Any, shell: str) -> None:
    code, out, err = tw("completion", shell)
    assert (code, err) == (0, "")
    assert "_TICKWORK_COMPLETE" in out


def test_the_shell_gets_completions() -> None:
    def complete(words: str) -> list[str]:
        env = {**os.environ, "_TICKWORK_COMPLETE": "bash_complete", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
        done = subprocess.run(TICKWORK, env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert complete("tickwork jo") == ["jobs"]
    assert set(complete("tickwork jobs ")) >= {"create", "list", "trigger"}
    assert "--json" in complete("tickwork jobs list --j")
    assert complete("tickwork runs list --state dea") == ["dead"]


def test_json_logs_are_one_object_a_line() -> None:
    code = ("import logging; from tickwork.cli.main import configure_logging; "
            "configure_logging('info', 'json'); logging.getLogger('tickwork.x').info('hi %s', 1)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    line = json.loads(done.stderr)
    assert (line["level"], line["logger"], line["message"]) == ("INFO", "tickwork.x", "hi 1")
