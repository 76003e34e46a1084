"""What every executor receives and returns.

An executor turns one attempt into one outcome value (Success, Fail or Cancel). The worker owns
the timeout: it cancels the executor's coroutine when the deadline passes, and an executor that
holds outside resources (a child process) must release them on cancellation.
"""

from __future__ import annotations

import asyncio
import codecs
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from tickwork.errors import ValidationError
from tickwork.frozen import fast_init
from tickwork.models import Upstream
from tickwork.outcomes import Fail, Outcome


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    python_allowed_modules: tuple[str, ...] = ()  # import-path prefixes a python job may use
    shell_enabled: bool = False
    shell_allowed_executables: tuple[str, ...] = ()  # names or absolute paths
    # "EXECUTABLE=REGEX" entries: an executable with entries takes only arguments that each
    # match one of its patterns in full; interpreters and shells must have some.
    shell_allowed_arguments: tuple[str, ...] = ()
    shell_allowed_env: tuple[str, ...] = ()  # variable names a job may set, or NAME_* prefixes
    shell_allowed_cwd: tuple[str, ...] = ()  # absolute directories a job may run in, and below
    output_limit_bytes: int = 64 * 1024  # captured output and bodies are cut here
    http_user_agent: str = "tickwork"
    http_max_connections: int = 1000  # open connections one http executor keeps, all hosts together
    # CIDRs, addresses or host names outbound HTTP may reach although they are private,
    # loopback, link-local... (the SSRF guard, executors/ssrf.py). Nothing by default.
    outbound_allow: tuple[str, ...] = ()
    # "URL_PREFIX=SECRET_NAME" entries: http requests to a URL starting with the prefix are
    # signed (Standard Webhooks) with that secret; the longest matching prefix wins.
    webhook_signing_secrets: tuple[str, ...] = ()
    smtp_host: str = ""  # the email kind is off until this is set
    smtp_port: int = 587
    smtp_tls: str = "starttls"  # none | starttls | tls (implicit TLS, usually port 465)
    smtp_username: str = ""
    smtp_password: str = field(default="", repr=False)  # or "$secret:NAME"
    smtp_from: str = ""
    smtp_ca_file: str = ""  # PEM bundle to trust instead of the system's (a private CA)
    # (name, URL) of the brokers publish jobs may name; a URL may be "$secret:NAME". URLs hold
    # credentials: kept out of repr.
    brokers: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """Everything one attempt knows (G6)."""

    job_id: str
    job_name: str
    kind: str
    payload: dict[str, Any]
    scheduled_at: datetime
    attempt: int
    max_attempts: int
    idempotency_key: str
    deadline: datetime
    timeout_seconds: float
    # Trace context to pass on (``traceparent``, ``tracestate``) when the worker traces
    # attempts (tickwork.worker.otel); http jobs send them as headers, publish jobs with the
    # message (publish.message_for).
    trace_headers: Mapping[str, str] = field(default_factory=dict)
    # For a run a chain triggered: the run of the other job whose end triggered it.
    upstream: Upstream | None = None
    # The job's namespace: its payload's secret references are resolved there, and only there.
    namespace: str = "default"


class ThreadRunsOn(asyncio.CancelledError):
    """The attempt was cancelled while its work ran in a thread, which cannot be stopped: the
    work runs to its end, and its result is discarded. A cancellation still (the task ends
    cancelled), which the worker notes on the attempt when the store had ended it."""


class Executor(Protocol):
    kind: str

    async def execute(self, ctx: ExecutionContext) -> Outcome: ...

    async def close(self) -> None:
        """Release what the executor holds (connection pools); called once, at shutdown."""
        ...


def payload_object(payload: object, fields: tuple[str, ...]) -> dict[str, Any]:
    """``payload`` as a dict with only known ``fields``, or ValidationError naming the field."""
    if not isinstance(payload, dict):
        raise ValidationError("payload", "must be a JSON object")
    for key in payload:
        if key not in fields:
            raise ValidationError(
                f"payload.{key}", f"unknown field; expected one of {', '.join(fields)}"
            )
    return payload


TRUNCATED = "\n[truncated]"
ERROR_LIMIT_BYTES = 4 * 1024  # error messages are cut here (or at output_limit_bytes if smaller)


def cap_text(data: bytes | str, limit: int) -> str:
    """``data`` as text of at most ``limit`` UTF-8 bytes; a cut one ends with ``[truncated]``.

    Undecodable bytes become U+FFFD; a character split by the cut is dropped.
    """
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    text = raw.decode("utf-8", "replace")
    if len(raw) <= limit and len(text.encode()) <= limit:
        return text
    marker = TRUNCATED if limit > 2 * len(TRUNCATED) else ""
    keep = limit - len(marker)
    head = codecs.getincrementaldecoder("utf-8")("replace").decode(raw[:keep], final=False)
    while len(head.encode()) > keep:  # U+FFFD takes three bytes where the bad byte took one
        head = head[:-1]
    return head + marker


def json_problem(value: object) -> str | None:
    """Why ``value`` is not plain JSON, or None if it is."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as exc:  # NaN, Infinity, a circular reference
        return "NaN and Infinity are not JSON" if "float" in str(exc) else str(exc)
    except TypeError as exc:  # an object json cannot encode
        return str(exc)
    return None


def is_secret_reference(value: object) -> bool:
    """``{"$secret": "name"}``: accepted wherever a payload takes a string."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("$secret"), str)


def unresolved_secrets(payload: object) -> str | None:
    """An error if a payload still holds secret references when it is executed.

    Executors built by ``build_executors`` get resolved payloads; one used on its own does not.
    """
    from tickwork.secrets import find_references  # noqa: PLC0415  (base stays free of crypto imports)

    names = find_references(payload)
    if not names:
        return None
    return (f"the payload refers to secrets ({', '.join(names)}) but was not resolved; "
            "run executors built by build_executors with a secret store")


T = TypeVar("T")


class PayloadMemo(Generic[T]):
    """Results that depend only on a job's payload, remembered across its executions.

    The store hands every execution of a job version the same payload dict (it caches specs
    per version), so entries are keyed by identity; each keeps its dict alive, so an id is
    never reused while remembered. Payloads are never mutated after validation.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._items: dict[int, tuple[object, T]] = {}

    def lookup(self, payload: object) -> T | None:
        hit = self._items.get(id(payload))
        return hit[1] if hit is not None and hit[0] is payload else None

    def remember(self, payload: object, value: T) -> T:
        if len(self._items) >= self._size:
            self._items.clear()
        self._items[id(payload)] = (payload, value)
        return value


def checked_payload(validate: Callable[[object], dict[str, Any]],
                    payload: object) -> dict[str, Any] | Fail:
    """``validate(payload)`` with every secret resolved, or a fatal Fail saying what is wrong:
    the preamble of every executor that runs a stored payload."""
    try:
        checked = validate(payload)
    except ValidationError as exc:
        return Fail(str(exc), retriable=False)
    problem = unresolved_secrets(checked)
    return checked if problem is None else Fail(problem, retriable=False)
