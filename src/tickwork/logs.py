"""Logs: the standard ``logging`` tree, configured in one place (docs/observability.md).

Every module logs to a logger under ``tickwork`` (``tickwork.runs``, ``tickwork.api.access``,
...). ``configure`` sets up the root logger once per process, in one of two formats:

- ``text``: ``2025-03-01T12:00:00.123Z INFO    tickwork.runs: message``, for a terminal;
- ``json``: one object a line, ``{"time": ..., "level": ..., "logger": ..., "message": ...}``
  and the record's structured fields (``extra=``) as keys of their own, for a log pipeline.

Times are ISO 8601 in UTC with milliseconds and a ``Z``, in both. The structured fields a
record carries (a run's ``job``, ``occurrence_key``, ``attempt``, ``queue``, ``state``; an
access line's ``method``, ``path``, ``status``, ``duration_ms``, ``token``) are left out of the
text format, whose message already says what they say.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

TEXT, JSON = "text", "json"
LOG_FORMATS = (TEXT, JSON)
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
# Extras other libraries add that say nothing new (uvicorn's coloured copy of the message).
_IGNORED = frozenset({"color_message", "taskName"})
_HANDLER_NAME = "tickwork"


def utc_timestamp(created: float) -> str:
    """``created`` (seconds since the epoch) as ``2025-03-01T12:00:00.123Z``."""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{millis:03d}Z"


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER: MESSAGE``, the time in UTC; structured fields are left out."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord,
                   datefmt: str | None = None) -> str:
        return utc_timestamp(record.created)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the record's structured fields,
    and ``exception`` (the formatted traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": utc_timestamp(record.created),
                               "level": record.levelname, "logger": record.name,
                               "message": record.getMessage()}
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in _IGNORED and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def formatter(fmt: str) -> logging.Formatter:
    if fmt == TEXT:
        return TextFormatter()
    if fmt == JSON:
        return JsonFormatter()
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)} (got {fmt!r})")


def configure(level: str | int = "info", fmt: str = TEXT, *,
              stream: TextIO | None = None) -> logging.Handler:
    """Send every record at ``level`` or above to ``stream`` (stderr) in format ``fmt``.

    Replaces the handler an earlier call installed, so calling it again reconfigures; other
    handlers (a test runner's capture) stay. Returns the handler."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # psycopg_pool warns at every failed connection attempt; the store says once that the
    # database is unreachable, and once that it answers again.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    # The API logs its own access lines (tickwork.api.access); uvicorn's would double them.
    logging.getLogger("uvicorn.access").disabled = True
    return handler
