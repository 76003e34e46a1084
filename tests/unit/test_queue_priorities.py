"""Queue priorities: how they are written (``queue_priorities``, ``--queues name:N@P``), and
the worker's gate that serves higher ones first in degraded mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickwork.config import Settings, load_settings
from tickwork.errors import ConfigError
from tickwork.runtime.assemble import queue_priorities
from tickwork.worker.priorities import PriorityGate


def test_a_priority_after_an_at_in_queues() -> None:
    s = load_settings(flags={"queues": "critical:8@10,default:16,bulk@-5"}, env={})
    assert s.queues == (("critical", 8), ("default", 16), ("bulk", 256))
    assert s.queue_priorities == (("critical", 10), ("bulk", -5))
    assert queue_priorities(s) == {"critical": 10, "default": 0, "bulk": -5}


def test_queue_priorities_from_env_and_toml_with_at_over_them(tmp_path: Path) -> None:
    toml = tmp_path / "tickwork.toml"
    toml.write_text('queues = ["critical:4", "mail:2"]\n[queue_priorities]\nmail = 3\n')
    s = load_settings(env={}, toml_path=str(toml))
    assert s.queue_priorities == (("mail", 3),)
    s = load_settings(env={"TICKWORK_QUEUE_PRIORITIES": "critical:7,mail:1"},
                      toml_path=str(toml))
    assert s.queue_priorities == (("critical", 7), ("mail", 1))
    s = load_settings(flags={"queues": "critical:4@9,mail:2"},
                      env={"TICKWORK_QUEUE_PRIORITIES": "critical:7,mail:1"})
    assert s.queue_priorities == (("critical", 9), ("mail", 1))


@pytest.mark.parametrize(("flags", "message"), [
    ({"queues": "critical:8@high"}, "queues: priority of 'critical' must be a whole number"),
    ({"queues": "critical:8@5000"}, "must be from -1000 to 1000 (got 5000)"),
    ({"queue_priorities": "critical"}, "'critical' must be NAME:PRIORITY"),
    ({"queue_priorities": "a:1,a:2"}, "lists 'a' twice"),
    ({"queue_priorities": "a:1.5"}, "priority of 'a' must be a whole number"),
])
def test_bad_priorities_are_refused_with_the_field(flags: dict[str, str],
                                                   message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings(flags=flags, env={})


def test_validate_checks_priorities_set_in_code() -> None:
    with pytest.raises(ConfigError, match="queue_priorities"):
        Settings(queue_priorities=(("a", 2000),)).validate()


def test_the_gate_holds_lower_queues_while_a_higher_one_is_behind() -> None:
    gate = PriorityGate({"critical": 10, "mail": 5, "default": 0})
    woken: list[str] = []
    gate.degraded()  # until they claim, the queues above the lowest count as behind
    assert not gate.may_claim("default")
    assert not gate.may_claim("mail")
    assert gate.may_claim("critical")
    gate.claimed("critical", 4, 1, woken.append)  # fewer than asked: caught up
    assert woken == ["mail"]  # default still waits for mail
    assert gate.may_claim("mail")
    gate.claimed("mail", 4, 4, woken.append)  # full: maybe more due
    assert not gate.may_claim("default")
    gate.claimed("mail", 4, 0, woken.append)
    assert woken == ["mail", "default"]
    assert gate.may_claim("default")
    assert not gate.holding("default")


def test_equal_priorities_never_wait_and_reset_wakes_the_held() -> None:
    gate = PriorityGate({"a": 0, "b": 0})
    gate.degraded()
    gate.claimed("a", 2, 2, lambda _q: None)
    assert gate.may_claim("b")
    gate = PriorityGate({"critical": 1, "default": 0})
    gate.degraded()
    assert not gate.may_claim("default")
    woken: list[str] = []
    gate.reset(woken.append, ["critical"])
    assert sorted(woken) == ["critical", "default"]
    assert gate.may_claim("default")
