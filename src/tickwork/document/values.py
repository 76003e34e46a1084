"""The shapes every document field is built from: objects, strings, integers, seconds,
choices, and the key under which a parsed value is remembered (``memo_key``)."""

from __future__ import annotations

import difflib
import marshal
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tickwork.document.text import check_strings, got, is_plain
from tickwork.errors import ValidationError
from tickwork.schedules import parse_duration

DURATION_RULE = "must be a number of seconds or a duration such as '30s', '15m', '1h' or '1d'"
Parser = Callable[[object, str], Any]


# --- shared checks --------------------------------------------------------------------------


def memo_key(value: object) -> bytes | None:
    """An exact key under which to remember what ``value`` parsed to, or None.

    ``marshal`` writes the type of every item (``1``, ``1.0`` and ``true`` differ, and so do
    ``0.0`` and ``-0.0``) and refuses subclasses and other objects, so two values with the same
    key are equal, of the same types, throughout: they parse the same, and pass the same string
    checks. Only what parsed without error is remembered.
    """
    try:
        return marshal.dumps(value)  # type: ignore[arg-type]  # any object; it refuses some
    except ValueError:  # an object marshal does not write: parsed the long way
        return None


def check_plain(value: object, field: str) -> None:
    """``check_strings`` for a field, walking the usual shapes the short way first."""
    if not is_plain(value):
        check_strings(value, field, 0)


def fields(obj: Mapping[str, Any], field: str, parsers: Mapping[str, Parser]) -> dict[str, Any]:
    """Parse each key of a nested object in document order; unknown keys are errors."""
    out: dict[str, Any] = {}
    for key, raw in obj.items():
        parser = parsers.get(key)
        if parser is None:
            raise unknown(key, parsers, field)
        out[key] = parser(raw, f"{field}.{key}")
    return out


def unknown(key: object, known: Iterable[str], parent: str) -> ValidationError:
    text = str(key)
    close = difflib.get_close_matches(text, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValidationError(parent, f"unknown field {text!r}{hint}")


def mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be an object ({got(value)})")
    return value


def string(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string ({got(value)})")
    return value


def integer(value: object, field: str, low: int, high: int) -> int:
    """An int (or a float with no fraction, as JSON allows); never a bool or a string."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None or not low <= number <= high:
        raise ValidationError(field, f"must be an integer from {low} to {high} ({got(value)})")
    return number


def seconds(value: object, field: str) -> float:
    """A number of seconds, or a duration string in the forms parse_duration reads."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(field, f"{DURATION_RULE} ({got(value)})")
    if isinstance(value, str):
        amount = parse_duration(value, field)
    else:
        amount = float(value) if abs(value) < 1e300 else math.inf  # a huge int would overflow
    if not math.isfinite(amount):
        raise ValidationError(field, f"must be a finite number ({got(value)})")
    return amount


def bounded_seconds(*, zero_ok: bool, most: float | None = None) -> Parser:
    """A parser of seconds that must be > 0 (or >= 0 with ``zero_ok``) and at most ``most``."""

    def parse(value: object, field: str) -> float:
        amount = seconds(value, field)
        if amount < 0 or (amount == 0 and not zero_ok):
            bound = "at least 0" if zero_ok else "greater than 0"
            raise ValidationError(field, f"must be {bound} (got {fmt(amount)})")
        if most is not None and amount > most:
            reason = f"must be at most {fmt(most)} seconds (got {fmt(amount)})"
            raise ValidationError(field, reason)
        return amount

    return parse


def choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    hint = ""
    if isinstance(value, str):
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValidationError(field, f"must be one of {', '.join(choices)} ({got(value)}{hint})")


def fmt(amount: float) -> str:
    """634.0 -> '634', 1.25 -> '1.25'."""
    if float(amount).is_integer():
        return str(int(amount))
    return f"{amount:.3f}".rstrip("0").rstrip(".")
