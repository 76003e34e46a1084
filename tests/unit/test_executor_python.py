"""The python executor: allowlist, sync and async callables, ctx, outcomes, caps."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tickwork.errors import ValidationError
from tickwork.executors import ExecutorSettings, build_executors, validate_payload
from tickwork.executors.python import PythonExecutor, module_allowed
from tickwork.outcomes import Cancel, Fail, Success
from tickwork.testing import jobs
from tickwork.testing.jobs import make_context

ALLOWED = ExecutorSettings(python_allowed_modules=("tickwork.testing",))
DOCS = Path(__file__).resolve().parents[2] / "docs" / "executors.md"


async def run(target: str, args: Any = None, kwargs: Any = None,
              settings: ExecutorSettings = ALLOWED, **ctx: Any) -> Any:
    payload: dict[str, Any] = {"callable": target}
    if args is not None:
        payload["args"] = args
    if kwargs is not None:
        payload["kwargs"] = kwargs
    executor = PythonExecutor(settings)
    try:
        return await executor.execute(make_context("python", payload, **ctx))
    finally:
        await executor.close()


# --- allowlist ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "allowed", "expected"),
    [
        ("myapp", ("myapp",), True),
        ("myapp.tasks", ("myapp",), True),
        ("myapp.tasks.deep", ("myapp.tasks",), True),
        ("myapplication", ("myapp",), False),
        ("myapplication.tasks", ("myapp",), False),
        ("myapp", ("myapp.tasks",), False),
        ("other", ("myapp", "other"), True),
        ("myapp", (), False),
        ("myapp", ("",), False),
    ],
)
def test_module_allowed_matches_whole_components(module: str, allowed: tuple[str, ...],
                                                 expected: bool) -> None:
    assert module_allowed(module, allowed) is expected


async def test_allowed_module_runs() -> None:
    assert await run("tickwork.testing.jobs:add", [2, 3]) == Success(output="5")


async def test_parent_package_allowlist_allows_submodule() -> None:
    settings = ExecutorSettings(python_allowed_modules=("tickwork",))
    assert await run("tickwork.testing.jobs:add", [1, 1], settings=settings) == Success("2")


async def test_module_outside_allowlist_is_refused() -> None:
    outcome = await run("json:dumps", [1])
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert outcome.error == (
        "module 'json' is not allowed; add it (or a parent package) to python_allowed_modules"
    )


async def test_allowlist_prefix_is_component_wise() -> None:
    settings = ExecutorSettings(python_allowed_modules=("tickwork.test",))
    outcome = await run("tickwork.testing.jobs:add", [1, 1], settings=settings)
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "'tickwork.testing.jobs' is not allowed" in outcome.error


async def test_nothing_allowed_by_default() -> None:
    outcome = await run("tickwork.testing.jobs:add", [1, 1], settings=ExecutorSettings())
    assert isinstance(outcome, Fail)
    assert not outcome.retriable


# --- calling -----------------------------------------------------------------------------


async def test_json_args_and_kwargs() -> None:
    outcome = await run("tickwork.testing.jobs:echo", [1, "two", [3], None],
                        {"k": {"nested": True}})
    assert isinstance(outcome, Success)
    assert outcome.output is not None
    assert json.loads(outcome.output) == {
        "args": [1, "two", [3], None], "kwargs": {"k": {"nested": True}},
    }


async def test_kwargs_only() -> None:
    outcome = await run("tickwork.testing.jobs:greet", ["ann"], {"punctuation": "?"})
    assert outcome == Success(output="hello ann?")


async def test_dotted_attribute_path() -> None:
    assert await run("tickwork.testing.jobs:Namespace.shout", ["hi"]) == Success("HI")


async def test_async_callable_is_awaited() -> None:
    assert await run("tickwork.testing.jobs:async_add", [4, 5]) == Success("9")


async def test_none_result_has_no_output() -> None:
    assert await run("tickwork.testing.jobs:nothing") == Success(output=None)


async def test_returned_outcome_is_used() -> None:
    assert await run("tickwork.testing.jobs:returns_success") == Success(output="explicit")


async def test_ctx_passed_to_sync_callable() -> None:
    outcome = await run("tickwork.testing.jobs:with_ctx", ["x"], attempt=2)
    assert isinstance(outcome, Success)
    assert outcome.output is not None
    assert json.loads(outcome.output) == {
        "label": "x", "key": "job-1:2030-01-02T03:04:05Z", "attempt": 2,
    }


async def test_ctx_passed_as_keyword_to_async_callable() -> None:
    outcome = await run("tickwork.testing.jobs:async_with_ctx", job_name="nightly", attempt=3)
    assert outcome == Success(output="nightly#3")


async def test_arguments_that_do_not_bind_are_fatal() -> None:
    outcome = await run("tickwork.testing.jobs:add", [1])
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert outcome.error.startswith("arguments do not match tickwork.testing.jobs:add: ")
    assert "'b'" in outcome.error


async def test_sync_callable_does_not_block_the_loop() -> None:
    jobs.EVENTS["gate"] = threading.Event()
    jobs.EVENTS["gate:started"] = started = threading.Event()
    task = asyncio.create_task(run("tickwork.testing.jobs:block_until", ["gate"]))
    # The job blocks its thread until this loop, still free to run, opens the gate.
    assert await asyncio.wait_for(asyncio.to_thread(started.wait, 10), 10)
    assert not task.done()
    jobs.EVENTS["gate"].set()
    assert await asyncio.wait_for(task, 10) == Success(output="released")


async def test_cancelling_an_async_callable_propagates() -> None:
    jobs.EVENTS["forever"] = stopped = threading.Event()
    jobs.EVENTS["forever:started"] = started = threading.Event()
    task = asyncio.create_task(run("tickwork.testing.jobs:wait_forever", ["forever"]))
    assert await asyncio.wait_for(asyncio.to_thread(started.wait, 10), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert stopped.is_set()


# --- outcomes ----------------------------------------------------------------------------


async def test_raised_fail_is_the_outcome() -> None:
    outcome = await run("tickwork.testing.jobs:fail_fatal", ["no such customer"])
    assert outcome == Fail("no such customer", retriable=False)


async def test_raised_retriable_fail_keeps_retry_after() -> None:
    outcome = await run("tickwork.testing.jobs:fail_later", [12.5])
    assert outcome == Fail("busy", retriable=True, retry_after=12.5)


async def test_raised_cancel_is_the_outcome() -> None:
    assert await run("tickwork.testing.jobs:cancel", ["not needed"]) == Cancel("not needed")


async def test_other_exception_is_retriable_with_message_and_traceback() -> None:
    outcome = await run("tickwork.testing.jobs:boom", ["disk on fire"])
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.error.startswith("RuntimeError: disk on fire\n")
    assert "jobs.py" in outcome.error
    assert "in boom" in outcome.error


async def test_system_exit_does_not_escape() -> None:
    outcome = await run("tickwork.testing.jobs:leave")
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.error.startswith("SystemExit: 3")


async def test_output_is_capped() -> None:
    settings = ExecutorSettings(python_allowed_modules=("tickwork.testing",),
                                output_limit_bytes=100)
    outcome = await run("tickwork.testing.jobs:big", [10_000], settings=settings)
    assert isinstance(outcome, Success)
    assert outcome.output is not None
    assert len(outcome.output.encode()) <= 100
    assert outcome.output.startswith("xxxx")
    assert outcome.output.endswith("[truncated]")


async def test_error_is_capped() -> None:
    settings = ExecutorSettings(python_allowed_modules=("tickwork.testing",),
                                output_limit_bytes=200)
    outcome = await run("tickwork.testing.jobs:boom", ["e" * 5000], settings=settings)
    assert isinstance(outcome, Fail)
    assert len(outcome.error.encode()) <= 200


# --- resolution failures are fatal -------------------------------------------------------


async def test_missing_module_is_fatal() -> None:
    outcome = await run("tickwork.testing.nonexistent:f")
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert outcome.error.startswith(
        "cannot import 'tickwork.testing.nonexistent': ModuleNotFoundError: "
    )


async def test_missing_attribute_is_fatal() -> None:
    outcome = await run("tickwork.testing.jobs:nope")
    assert outcome == Fail("tickwork.testing.jobs:nope does not exist", retriable=False)


async def test_not_callable_is_fatal() -> None:
    outcome = await run("tickwork.testing.jobs:NOT_CALLABLE")
    assert outcome == Fail("tickwork.testing.jobs:NOT_CALLABLE is not a function or class",
                           retriable=False)


async def test_invalid_payload_at_execution_is_fatal() -> None:
    outcome = await run("no colon here")
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert outcome.error.startswith("payload.callable: ")


# --- validate_payload --------------------------------------------------------------------


def test_validate_normalises() -> None:
    assert validate_payload("python", {"callable": "a.b:c"}) == {
        "callable": "a.b:c", "args": [], "kwargs": {},
    }


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        ([], "payload", "must be a JSON object"),
        ({"callable": "a:b", "extra": 1}, "payload.extra",
         "unknown field; expected one of callable, args, kwargs"),
        ({}, "payload.callable", "is required: 'package.module:function'"),
        ({"callable": 5}, "payload.callable", "is required: 'package.module:function'"),
        ({"callable": "a.b"}, "payload.callable",
         "'a.b' is not 'package.module:function' (dotted names around one colon)"),
        ({"callable": "a:b:c"}, "payload.callable",
         "'a:b:c' is not 'package.module:function' (dotted names around one colon)"),
        ({"callable": "a-b:c"}, "payload.callable",
         "'a-b:c' is not 'package.module:function' (dotted names around one colon)"),
        ({"callable": "a:b", "args": {"x": 1}}, "payload.args", "must be a JSON array"),
        ({"callable": "a:b", "kwargs": [1]}, "payload.kwargs", "must be a JSON object"),
        ({"callable": "a:b", "kwargs": {1: 2}}, "payload.kwargs", "must be a JSON object"),
        ({"callable": "a:b", "kwargs": {"ctx": 1}}, "payload.kwargs.ctx",
         "is reserved for the execution context"),
    ],
)
def test_validate_rejects(payload: object, field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("python", payload)
    assert (info.value.field, info.value.reason) == (field, reason)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("args", [object()],
         "must hold JSON values only (Object of type object is not JSON serializable)"),
        ("kwargs", {"x": float("inf")},
         "must hold JSON values only (NaN and Infinity are not JSON)"),
    ],
)
def test_validate_rejects_non_json_values(field: str, value: Any, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("python", {"callable": "a:b", field: value})
    assert (info.value.field, info.value.reason) == (f"payload.{field}", reason)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("x", "unknown kind 'x'; expected one of http, slack, email, shell, python, "
         "publish"),
    ],
)
def test_validate_rejects_kinds(kind: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload(kind, {})
    assert (info.value.field, info.value.reason) == ("kind", reason)


async def test_build_executors_has_every_available_kind() -> None:
    executors = build_executors(ExecutorSettings())
    assert sorted(executors) == ["email", "http", "publish", "python", "shell", "slack"]
    assert all(kind == e.kind for kind, e in executors.items())
    for executor in executors.values():
        await executor.close()


# --- the documentation's examples are valid ----------------------------------------------


def _doc_documents() -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.DOTALL)
    docs = [json.loads(b) for b in blocks]
    return [d for d in docs if isinstance(d, dict) and "kind" in d]


def test_docs_examples_validate() -> None:
    documents = _doc_documents()
    assert {d["kind"] for d in documents} >= {"http", "shell", "python"}
    for document in documents:
        validate_payload(document["kind"], document["payload"])


async def test_executions_that_start_during_a_first_import_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several jobs of a module nobody imported yet start together: the ones that find it
    half-imported wait for the import instead of failing with 'does not exist'."""
    import sys
    import uuid

    name = f"slow_import_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "import time\ntime.sleep(0.5)  # a module whose import takes a while\n"
        "def answer():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    executor = PythonExecutor(ExecutorSettings(python_allowed_modules=(name,)))
    try:
        outcomes = await asyncio.gather(*(
            executor.execute(make_context("python", {"callable": f"{name}:answer"}))
            for _ in range(4)))
    finally:
        await executor.close()
        sys.modules.pop(name, None)
    assert outcomes == [Success(output="42")] * 4
