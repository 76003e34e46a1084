"""fast_init: the same constructor as the dataclass's, only cheaper; the instance as frozen."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.drivers.base import Completion, LeaseRef
from tickwork.executors.base import ExecutionContext
from tickwork.frozen import fast_init
from tickwork.models import Claim, Job, JobSpec, Occurrence


def _example() -> type[Any]:
    """The same class each call: Plain keeps the dataclass's __init__, Fast gets fast_init's."""

    @dataclass(frozen=True, slots=True)
    class Example:
        a: int
        b: str = "b"
        c: list[int] = field(default_factory=list)
        d: int = field(default=4, kw_only=True)

    return Example


Plain = _example()
Fast = fast_init(_example())


@pytest.mark.parametrize(("args", "kwargs"), [
    ((1,), {}), ((1, "x"), {}), ((1, "x", [2]), {"d": 7}), ((), {"a": 1, "c": [3]}),
])
def test_it_takes_the_arguments_the_dataclass_takes(args: tuple[object, ...],
                                                     kwargs: dict[str, object]) -> None:
    plain = Plain(*args, **kwargs)
    fast = Fast(*args, **kwargs)
    assert dataclasses.astuple(plain) == dataclasses.astuple(fast)


def test_each_instance_gets_its_own_default_from_a_factory() -> None:
    one, two = Fast(1), Fast(2)
    assert one.c == []
    assert one.c is not two.c


@pytest.mark.parametrize(("args", "kwargs"), [((), {}), ((1, "x", [], 5), {}), ((1,), {"e": 1})])
def test_it_refuses_what_the_dataclass_refuses(args: tuple[object, ...],
                                               kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        Plain(*args, **kwargs)
    with pytest.raises(TypeError):
        Fast(*args, **kwargs)


def test_the_instance_stays_frozen_equal_and_hashable() -> None:
    fast = Fast(1, "x", d=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2
    assert fast == Fast(1, "x", d=2)
    assert fast != Fast(1, "y", d=2)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert LeaseRef("j", at, 1) in {LeaseRef("j", at, 1)}


@pytest.mark.parametrize("cls", [JobSpec, Job, Occurrence, Claim, Completion, LeaseRef,
                                 ExecutionContext])
def test_the_models_keep_their_signatures(cls: type) -> None:
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.kind is inspect.Parameter.KEYWORD_ONLY for p in params] == [
        f.kw_only is True for f in fields]


def test_classes_it_cannot_serve_are_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="frozen, slotted"):
        fast_init(dataclass(type("Open", (), {"__annotations__": {"a": "int"}})))

    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__post_init__"):
        fast_init(Checked)

    @dataclass(frozen=True, slots=True)
    class Partial:
        a: int
        b: int = field(default=0, init=False)

    with pytest.raises(TypeError, match="other than its fields"):
        fast_init(Partial)
