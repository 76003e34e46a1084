"""What a job document's values may hold: valid Unicode text without NUL, and plain JSON values
(strings, numbers, booleans, null, lists and string-keyed objects) no deeper than MAX_DEPTH.
Every face checks input here: the API, the CLI and the Python client."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from tickwork.errors import ValidationError

MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
_SCALARS = (int, float, bool)


def plain_text(text: str) -> bool:
    """No NUL and no lone surrogate: text every store, wire and terminal can carry."""
    return "\x00" not in text and (text.isascii() or _SURROGATE.search(text) is None)


def not_unicode(text: str) -> str | None:
    """Why ``text`` is not valid Unicode text (the lone surrogate it holds), or None."""
    found = None if text.isascii() else _SURROGATE.search(text)
    if found is None:
        return None
    return f"must be valid Unicode text (it holds the lone surrogate U+{ord(found.group()):04X})"


def check_text(value: object, field: str) -> None:
    """ValidationError naming the first string or object key, anywhere in a JSON value, that
    is not valid Unicode text. Walks with its own stack: any depth json.loads returns."""
    stack: list[tuple[object, str]] = [(value, field)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            reason = not_unicode(item)
            if reason is not None:
                raise ValidationError(path, reason)
        elif isinstance(item, Mapping):
            children: list[tuple[object, str]] = []
            for key, child in item.items():
                reason = not_unicode(key) if isinstance(key, str) else None
                if reason is not None:
                    raise ValidationError(path, f"object keys {reason}")
                children.append((child, f"{path}.{key}" if path else str(key)))
            stack.extend(reversed(children))  # document order: the first problem is raised
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(child, f"{path}[{index}]")
                                   for index, child in enumerate(item)]))


def is_plain(value: object, depth: int = 0) -> bool:
    """True when ``check_strings`` would accept ``value``: the usual dicts, lists and scalars,
    walked without building a path for every item. False means "let check_strings decide"."""
    if type(value) is str:
        return plain_text(value) and depth <= MAX_DEPTH
    children: Collection[object] | None
    if type(value) is dict:
        children = value.values() if _plain_keys(value) else None
    elif type(value) is list:
        children = value
    else:
        return depth <= MAX_DEPTH and (value is None or type(value) in _SCALARS)
    if children is None or depth > MAX_DEPTH or (depth == MAX_DEPTH and children):
        return False
    for child in children:
        if not (plain_text(child) if type(child) is str else is_plain(child, depth + 1)):
            return False
    return True


def _plain_keys(obj: dict[Any, Any]) -> bool:
    try:
        return plain_text("".join(obj))
    except TypeError:  # a key that is not a string
        return False


def check_strings(value: object, field: str, depth: int) -> None:
    """No NUL or lone surrogate in any string or key, keys are strings, nesting is bounded."""
    if depth > MAX_DEPTH:
        raise ValidationError(field, f"is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(field, "must not contain NUL characters")
        reason = not_unicode(value)
        if reason is not None:
            raise ValidationError(field, reason)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(field, f"object keys must be strings ({got(key)})")
            if "\x00" in key:
                raise ValidationError(field, "object keys must not contain NUL characters")
            reason = not_unicode(key)
            if reason is not None:
                raise ValidationError(field, f"object keys {reason}")
            check_strings(item, f"{field}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_strings(item, f"{field}[{index}]", depth + 1)


def got(value: object) -> str:
    """``got 'text'``, ``got 3.5``, ``got true``, ``got null``, ``got an array``."""
    if isinstance(value, str):
        return f"got {value if len(value) <= 40 else value[:37] + '...'!r}"
    if isinstance(value, bool | int | float) or value is None:
        shown = json.dumps(value)  # true, null, 1.5; a huge integer is cut short
        return f"got {shown if len(shown) <= 40 else shown[:37] + '...'}"
    if isinstance(value, Mapping):
        return "got an object"
    if isinstance(value, list | tuple):
        return "got an array"
    return f"got a {type(value).__name__}"
