"""fast_init: the same constructor as the dataclass's, only cheaper; the instance as frozen."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.drivers.base import Completion, LeaseRef
from tickwork.executors.base import ExecutionContext
from tickwork.frozen import OPEN_FROM, direct, fast_init
from tickwork.models import (
    Claim,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
    Trigger,
    idempotency_key,
)


def _example() -> type[Any]:
    """The same class each call: Plain keeps the dataclass's __init__, Fast gets fast_init's."""

    @dataclass(frozen=True, slots=True)
    class Example:
        a: int
        b: str = "b"
        c: list[int] = field(default_factory=list)
        d: int = field(default=4, kw_only=True)

    return Example


def _wide() -> type[Any]:
    """As _example, with enough fields to be built open (through the unfrozen twin)."""

    @dataclass(frozen=True, slots=True)
    class Wide:
        a: int
        b: str = "b"
        c: list[int] = field(default_factory=list)
        e: int = 5
        f: int = 6
        g: int = 7
        d: int = field(default=4, kw_only=True)

    assert len(dataclasses.fields(Wide)) >= OPEN_FROM
    return Wide


@dataclass(frozen=True, slots=True)
class _Base:
    a: int


def _derived() -> type[Any]:
    """Wide enough, but with a base of its own: built through the slots' descriptors."""

    @dataclass(frozen=True, slots=True)
    class Derived(_Base):
        b: str = "b"
        c: list[int] = field(default_factory=list)
        e: int = 5
        f: int = 6
        d: int = field(default=4, kw_only=True)

    return Derived


Plain = _example()
Fast = fast_init(_example())
PAIRS = [(Plain, Fast), (_wide(), fast_init(_wide())), (_derived(), fast_init(_derived()))]


@pytest.mark.parametrize(("plain_cls", "fast_cls"), PAIRS)
@pytest.mark.parametrize(("args", "kwargs"), [
    ((1,), {}), ((1, "x"), {}), ((1, "x", [2]), {"d": 7}), ((), {"a": 1, "c": [3]}),
])
def test_it_takes_the_arguments_the_dataclass_takes(
        plain_cls: type[Any], fast_cls: type[Any], args: tuple[object, ...],
        kwargs: dict[str, object]) -> None:
    plain = plain_cls(*args, **kwargs)
    fast = fast_cls(*args, **kwargs)
    built = direct(fast_cls)(*args, **kwargs)
    assert dataclasses.astuple(plain) == dataclasses.astuple(fast) == dataclasses.astuple(built)
    assert type(fast) is type(built) is fast_cls
    assert built == fast


@pytest.mark.parametrize("fast_cls", [fast for _, fast in PAIRS])
def test_each_instance_gets_its_own_default_from_a_factory(fast_cls: type[Any]) -> None:
    one, two, three = fast_cls(1), fast_cls(2), direct(fast_cls)(3)
    assert one.c == [] == three.c
    assert one.c is not two.c
    assert three.c is not one.c


@pytest.mark.parametrize(("args", "kwargs"), [((), {}), ((1, "x", [], 5), {}), ((1,), {"e": 1})])
def test_it_refuses_what_the_dataclass_refuses(args: tuple[object, ...],
                                               kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        Plain(*args, **kwargs)
    with pytest.raises(TypeError):
        Fast(*args, **kwargs)
    with pytest.raises(TypeError):
        direct(Fast)(*args, **kwargs)


@pytest.mark.parametrize("fast_cls", [fast for _, fast in PAIRS])
def test_the_instance_stays_frozen_equal_and_hashable(fast_cls: type[Any]) -> None:
    fast = fast_cls(1, "x", d=2)
    built = direct(fast_cls)(1, "x", d=2)
    for made in (fast, built):
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.a = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.d = 3
        assert (made.a, made.d) == (1, 2)
    assert built == fast
    assert fast == fast_cls(1, "x", d=2)
    assert fast != fast_cls(1, "y", d=2)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert LeaseRef("j", at, 1) in {LeaseRef("j", at, 1)}


def test_a_model_built_open_is_its_own_class_frozen_and_copies() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    occ = Occurrence(job_id="job-1", scheduled_at=at, due_at=at, queue="default", priority=0,
                     state=OccurrenceState.SCHEDULED, attempt=0, max_attempts=3,
                     trigger=Trigger.SCHEDULE, idempotency_key=idempotency_key("job-1", at),
                     created_at=at, updated_at=at)
    assert type(occ) is Occurrence
    with pytest.raises(dataclasses.FrozenInstanceError):
        occ.attempt = 2  # type: ignore[misc]
    assert copy.copy(occ) == occ
    assert pickle.loads(pickle.dumps(occ)) == occ
    later = dataclasses.replace(occ, attempt=2)
    assert (type(later), later.attempt, later.job_id) == (Occurrence, 2, "job-1")
    assert later != occ


@pytest.mark.parametrize("cls", [JobSpec, Job, Occurrence, Claim, Completion, LeaseRef,
                                 ExecutionContext])
def test_the_models_keep_their_signatures(cls: type) -> None:
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.kind is inspect.Parameter.KEYWORD_ONLY for p in params] == [
        f.kw_only is True for f in fields]


def test_a_subclass_keeps_its_class_and_its_fields() -> None:
    wide = fast_init(_wide())

    class Sub(wide):  # type: ignore[misc,valid-type]
        __slots__ = ("extra",)

    sub = Sub(1, "x", d=2)
    assert type(sub) is Sub
    assert (sub.a, sub.b, sub.c, sub.d) == (1, "x", [], 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.a = 3


@pytest.mark.parametrize("names", [("type", "len"), ("type", "object", "len", "setattr", "id")])
def test_fields_may_take_the_names_of_builtins(names: tuple[str, ...]) -> None:
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Shadowing:
        __annotations__ = dict.fromkeys(names, "int")

    values = range(len(names))
    made = Shadowing(*values)
    assert type(made) is Shadowing
    assert [getattr(made, n) for n in names] == list(values)
    assert direct(Shadowing)(*values) == made


def test_direct_serves_only_what_fast_init_made() -> None:
    with pytest.raises(TypeError, match="fast_init"):
        direct(Plain)
    assert direct(Occurrence) is direct(Occurrence)


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

    with pytest.raises(TypeError, match="twice"):
        fast_init(Fast)
