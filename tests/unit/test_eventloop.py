"""The event loop the command line's processes run on (tickwork.runtime.eventloop)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest

from tickwork.config import load_settings
from tickwork.errors import ConfigError
from tickwork.runtime import eventloop


async def _loop_module() -> tuple[str, str]:
    return type(asyncio.get_running_loop()).__module__, eventloop.loop_name()


def test_a_process_runs_on_uvloop_by_default() -> None:
    module, name = eventloop.run(_loop_module(), environ={})
    assert module.startswith("uvloop")
    assert name == "uvloop"


@pytest.mark.parametrize("value", ["asyncio", " AsyncIO "])
def test_the_environment_chooses_asyncios_loop(value: str) -> None:
    module, name = eventloop.run(_loop_module(), environ={"TICKWORK_EVENT_LOOP": value})
    assert module.startswith("asyncio")
    assert name == "asyncio"


def test_without_uvloop_installed_the_loop_is_asyncios(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # importing it fails, as on Windows
    assert eventloop.loop_factory({}) is None
    assert eventloop.run(_loop_module(), environ={})[1] == "asyncio"


def test_an_unknown_loop_is_refused_and_the_command_never_starts() -> None:
    work = _loop_module()
    with pytest.raises(ConfigError, match=r"^TICKWORK_EVENT_LOOP: 'trio' is not an event "
                                          r"loop tickwork runs on: use uvloop or asyncio$"):
        eventloop.run(work, environ={"TICKWORK_EVENT_LOOP": "trio"})
    assert inspect.getcoroutinestate(work) == inspect.CORO_CLOSED


def test_the_variable_is_not_taken_for_a_misspelt_setting(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./tickwork.toml
    assert load_settings(env={"TICKWORK_EVENT_LOOP": "asyncio"}) == load_settings(env={})
