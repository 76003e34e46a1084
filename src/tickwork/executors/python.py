"""The ``python`` kind: call an allowlisted function with JSON arguments.

Payload: ``{"callable": "package.module:function", "args": [...], "kwargs": {...}}``. The module
must sit under one of ``ExecutorSettings.python_allowed_modules``; arguments are JSON values, never
pickles. A function with a parameter named ``ctx`` receives the ExecutionContext. Async functions
are awaited on the worker's loop, sync ones run in a thread so the loop never blocks.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import importlib
import inspect
import json
import re
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, cast

from tickwork.errors import ValidationError
from tickwork.executors.base import (
    ERROR_LIMIT_BYTES,
    ExecutionContext,
    ExecutorSettings,
    PayloadMemo,
    ThreadRunsOn,
    cap_text,
    json_problem,
    payload_object,
)
from tickwork.outcomes import Cancel, Fail, Outcome, Success

KIND = "python"
FIELDS = ("callable", "args", "kwargs")
TRACEBACK_FRAMES = 3  # how many of the innermost frames an error keeps
# Sync callables at once per executor, a thread each (started on demand). Not the loop's
# default executor (min(32, cores + 4) threads): a worker running more sync jobs at once than
# that would have them wait for a thread while their timeout runs, then time out mid-run and
# be retried while the abandoned thread still finishes the first attempt.
SYNC_THREADS = 1024

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_CALLABLE = re.compile(rf"({_DOTTED}):({_DOTTED})")
_NOTHING = Success()  # a callable returned None: frozen, so one serves every run


def validate_payload(payload: object, *, decoded: bool = False) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field. ``decoded``: the payload
    was just decoded from JSON (a stored job), so its arguments are JSON values already and
    are not walked again."""
    payload = payload_object(payload, FIELDS)
    target = payload.get("callable")
    if not isinstance(target, str) or not target:
        raise ValidationError("payload.callable", "is required: 'package.module:function'")
    if _CALLABLE.fullmatch(target) is None:
        raise ValidationError(
            "payload.callable",
            f"{target[:200]!r} is not 'package.module:function' (dotted names around one colon)",
        )
    if any(_is_dunder(name) for name in re.split(r"[.:]", target)):
        raise ValidationError(
            "payload.callable", f"{target[:200]!r} names a dunder attribute or module; "
            "a callable is a function or class by its own name")
    args = payload.get("args", [])
    if not isinstance(args, list):
        raise ValidationError("payload.args", "must be a JSON array")
    if not decoded:
        _require_json("payload.args", args)
    kwargs = payload.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ValidationError("payload.kwargs", "must be a JSON object")
    if "ctx" in kwargs:
        raise ValidationError("payload.kwargs.ctx", "is reserved for the execution context")
    if not decoded:
        _require_json("payload.kwargs", kwargs)
    return {"callable": target, "args": list(args), "kwargs": dict(kwargs)}


def _require_json(field: str, value: object) -> None:
    problem = json_problem(value)
    if problem is not None:
        raise ValidationError(field, f"must hold JSON values only ({problem})")


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def module_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    """True if ``module`` is one of ``allowed`` or inside one, compared by dotted components."""
    for entry in allowed:
        prefix = entry.strip(".")
        if prefix and (module == prefix or module.startswith(prefix + ".")):
            return True
    return False


class PythonExecutor:
    """Runs ``python`` jobs in the worker's process."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings) -> None:
        self._settings = settings
        self._threads = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="tickwork-python")
        self._prepared: PayloadMemo[
            tuple[Callable[..., Any], list[Any], dict[str, Any], bool, bool]] = PayloadMemo()

    async def close(self) -> None:
        """Take no more calls; threads of calls still running are left to finish."""
        self._threads.shutdown(wait=False)

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        call = await self._prepare(ctx)
        if isinstance(call, Fail):
            return call
        func, args, kwargs, is_async = call
        try:
            result = await _call(func, args, kwargs, is_async, self._threads)
        except (Fail, Cancel) as outcome:
            return self._capped(outcome)
        except (Exception, SystemExit) as exc:  # a job's sys.exit() must not stop the worker
            return Fail(_describe(exc, self._error_limit()), retriable=True)
        if result is None:
            return _NOTHING
        if isinstance(result, Success | Fail | Cancel):
            return self._capped(result)
        return Success(output=self._render(result))

    async def _prepare(
        self, ctx: ExecutionContext
    ) -> tuple[Callable[..., Any], list[Any], dict[str, Any], bool] | Fail:
        """The callable, its arguments and whether it is async, or a fatal Fail saying why it
        cannot run.

        Validating, importing and binding depend only on the payload: done once per payload
        and remembered (the hot path of many short jobs); only ``ctx`` is added each time."""
        prepared = self._prepared.lookup(ctx.payload)
        if prepared is None:
            found = await self._prepare_payload(ctx)
            if isinstance(found, Fail):
                return found  # not remembered: a later execution may find the module fixed
            prepared = self._prepared.remember(ctx.payload, found)
        func, args, kwargs, takes_ctx, is_async = prepared
        return func, args, ({**kwargs, "ctx": ctx} if takes_ctx else kwargs), is_async

    async def _prepare_payload(
        self, ctx: ExecutionContext
    ) -> tuple[Callable[..., Any], list[Any], dict[str, Any], bool, bool] | Fail:
        try:
            payload = validate_payload(ctx.payload, decoded=True)
        except ValidationError as exc:
            return Fail(str(exc), retriable=False)
        target = payload["callable"]
        allowed = self._settings.python_allowed_modules
        refusal = module_refusal(target, allowed)
        if refusal is not None:
            return Fail(refusal, retriable=False)
        module = await _import(target.partition(":")[0])
        if isinstance(module, Fail):
            return module
        func = resolve_callable(module, target, allowed)
        if isinstance(func, str):
            return Fail(func, retriable=False)
        args, kwargs = payload["args"], payload["kwargs"]
        takes_ctx = _takes_ctx(func)
        problem = _bind_problem(func, args, {**kwargs, "ctx": ctx} if takes_ctx else kwargs)
        if problem is not None:
            return Fail(f"arguments do not match {payload['callable']}: {problem}", retriable=False)
        return func, args, kwargs, takes_ctx, _is_async(func)

    def _error_limit(self) -> int:
        return min(ERROR_LIMIT_BYTES, self._settings.output_limit_bytes)

    def _render(self, value: object) -> str | None:
        if value is None:
            return None
        if isinstance(value, str):
            text = value
        else:
            try:
                text = json.dumps(value)
            except (TypeError, ValueError):
                text = repr(value)
        return cap_text(text, self._settings.output_limit_bytes)

    def _capped(self, outcome: Outcome) -> Outcome:
        limit = self._settings.output_limit_bytes
        if isinstance(outcome, Success):
            return Success(None if outcome.output is None else cap_text(outcome.output, limit))
        if isinstance(outcome, Fail):
            output = None if outcome.output is None else cap_text(outcome.output, limit)
            return dataclasses.replace(
                outcome, error=cap_text(outcome.error, self._error_limit()), output=output
            )
        return Cancel(cap_text(outcome.reason, self._error_limit()))


def module_refusal(target: str, allowed: tuple[str, ...]) -> str | None:
    """Why the module of ``target`` ('module:attr.path') may not run, or None."""
    module_name = target.partition(":")[0]
    if module_allowed(module_name, allowed):
        return None
    return (f"module {module_name!r} is not allowed; add it (or a parent package) to "
            "python_allowed_modules")


def resolve_callable(
    module: ModuleType, target: str, allowed: tuple[str, ...]
) -> Callable[..., Any] | str:
    """The function or class ``target`` names in ``module``, or why it may not be called.

    Each step of the attribute path must stay out of module objects and dunders (an allowed
    module's imports are not allowed with it: ``mod:os.system`` is refused), and what it ends
    on must be a function, method or class defined in an allowed module, by its own
    ``__module__``, so a name the module merely imported from elsewhere is refused too."""
    attr_path = target.partition(":")[2]
    found: object = module
    for name in attr_path.split("."):
        if _is_dunder(name):
            return f"{target} names a dunder attribute"
        try:
            # Static first: a module is refused before anything of it is bound or run;
            # attributes made up by a __getattr__ do not count as existing.
            step = inspect.getattr_static(found, name)
            if not inspect.ismodule(step):
                step = getattr(found, name)
        except AttributeError:
            return f"{target} does not exist"
        if inspect.ismodule(step):
            return (f"{target} steps into module {step.__name__!r}; name a function or class "
                    "defined in an allowed module")
        found = step
    defined_in = _defined_in(found)
    if defined_in is None:
        return f"{target} is not a function or class"
    if not module_allowed(defined_in, allowed):
        return (f"{target} is defined in module {defined_in!r}, which is not allowed; "
                "add it (or a parent package) to python_allowed_modules")
    return cast("Callable[..., Any]", found)


def _defined_in(found: object) -> str | None:
    """The module a function, method or class was defined in; None for anything else."""
    if inspect.ismethod(found):
        found = found.__func__
    if not (inspect.isfunction(found) or inspect.isclass(found)):
        return None
    module = getattr(found, "__module__", None)
    return module if isinstance(module, str) else None


async def _import(module_name: str) -> ModuleType | Fail:
    """The module, imported once; a fatal Fail saying why it cannot be."""
    module: ModuleType | None = sys.modules.get(module_name)
    if module is not None and not _initializing(module):
        return module
    # A first import runs module code: keep it off the loop. A module another execution is
    # importing right now is in sys.modules half-built; import_module waits for it.
    try:
        return await asyncio.to_thread(importlib.import_module, module_name)
    except Exception as exc:
        return Fail(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}",
                    retriable=False)


def _initializing(module: ModuleType) -> bool:
    """Whether ``module`` is still being imported (by another thread)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


_SIGNATURES: dict[Callable[..., Any], inspect.Signature | None] = {}


def _signature(func: Callable[..., Any]) -> inspect.Signature | None:
    """``inspect.signature``, remembered per function: thousands of jobs share a few."""
    try:
        return _SIGNATURES[func]
    except (KeyError, TypeError):  # TypeError: an unhashable callable object
        pass
    try:
        sig: inspect.Signature | None = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have none
        sig = None
    try:
        if len(_SIGNATURES) >= 4096:
            _SIGNATURES.clear()
        _SIGNATURES[func] = sig
    except TypeError:
        pass
    return sig


def _takes_ctx(func: Callable[..., Any]) -> bool:
    sig = _signature(func)
    if sig is None or "ctx" not in sig.parameters:
        return False
    kind = sig.parameters["ctx"].kind
    return kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _bind_problem(func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> str | None:
    sig = _signature(func)
    if sig is None:
        return None
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None


def _is_async(func: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004  (an object with an async __call__)
    )


async def _call(func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                is_async: bool, threads: ThreadPoolExecutor) -> object:
    if is_async:
        result = func(*args, **kwargs)
    else:
        # A thread cannot be stopped: on cancellation the worker moves on and the call runs out.
        # asyncio.to_thread on a thread pool of our own (the job's context variables too).
        call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
        try:
            result = await asyncio.get_running_loop().run_in_executor(threads, call)
        except asyncio.CancelledError as exc:
            raise ThreadRunsOn(*exc.args) from exc
    if inspect.isawaitable(result):  # async functions, and sync ones returning a coroutine
        result = await result
    return result


def _describe(exc: BaseException, limit: int) -> str:
    """``Type: message`` and the innermost few traceback lines."""
    head = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)[-TRACEBACK_FRAMES:]
    lines = "".join(traceback.format_list(frames)).rstrip()
    return cap_text(f"{head}\n{lines}" if lines else head, limit)
