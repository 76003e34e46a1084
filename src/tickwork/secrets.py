"""Secrets: referenced in payloads, encrypted at rest, resolved only at execution, masked after.

A payload names a secret with ``{"$secret": "name"}`` wherever a string goes (a header value,
a URL, an env value, a python argument). The job document keeps the reference; the value is
looked up, decrypted and substituted only for the attempt that runs, and every value used is
replaced by ``****`` in what the attempt returns (output and error), in every spelling
``mask`` knows.

A secret belongs to a namespace, as a job does: a job's references are resolved in the job's
namespace only (``resolve(payload, namespace=job.namespace)``), and checked there when it is
created or changed. What the operator's settings name (``$secret:NAME``: an SMTP password, a
broker URL, an endpoint's signing secret) is read from ``default``.

Values are encrypted with Fernet. ``TICKWORK_SECRET_KEY`` holds one key, or several separated
by commas while rotating: the first encrypts, all decrypt (MultiFernet).
"""

from __future__ import annotations

import base64
import contextvars
import json
import os
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, TypeGuard
from urllib.parse import quote, quote_plus

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from tickwork.drivers import Driver
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.drivers.secrets import MAX_SECRET_NAME, SecretNotFound, SecretStore
from tickwork.errors import ConfigError, TickworkError, ValidationError

KEY_ENV = "TICKWORK_SECRET_KEY"
REF_KEY = "$secret"
CONFIG_REF_PREFIX = "$secret:"  # a setting's value that names a secret: "$secret:smtp"
MASK = "****"
SECRET_NAME = re.compile(rf"[A-Za-z0-9_.\-]{{1,{MAX_SECRET_NAME}}}")
SECRET_NAME_RULE = f"must be 1 to {MAX_SECRET_NAME} of A-Z a-z 0-9 _ . -"
MAX_SECRET_BYTES = 64 * 1024
KEY_HELP = ('create one with: python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"')

__all__ = [
    "KEY_ENV",
    "MASK",
    "SecretKeyring",
    "SecretNotFound",
    "SecretResolver",
    "SecretsUnavailable",
    "check_name",
    "config_reference",
    "find_references",
    "is_reference",
    "mask",
    "mask_outcome_text",
    "reference_paths",
    "resolver_for",
    "start_recording",
    "stop_recording",
    "validate_references",
]


class SecretsUnavailable(TickworkError):
    """Secrets cannot be used here: no key, a wrong key, or no secret store."""


def check_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or SECRET_NAME.fullmatch(name) is None:
        raise ValidationError(field, f"secret name {str(name)[:140]!r} {SECRET_NAME_RULE}")
    return name


# --- references ---------------------------------------------------------------------------


def is_reference(value: object) -> TypeGuard[dict[str, Any]]:
    """True for ``{"$secret": "name"}`` (exactly that one key)."""
    return isinstance(value, dict) and len(value) == 1 and REF_KEY in value


def config_reference(value: str) -> str | None:
    """The secret a setting names with ``$secret:NAME``, or None for a plain value."""
    if not value.startswith(CONFIG_REF_PREFIX):
        return None
    return value.removeprefix(CONFIG_REF_PREFIX)


def _walk(value: object, path: str) -> Iterator[tuple[str, object]]:
    yield path, value
    if isinstance(value, dict) and not is_reference(value):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def find_references(payload: object) -> list[str]:
    """The names of the secrets a payload refers to, in order of appearance, once each.

    Runs once per payload an execution sees (every one-off job has its own): no paths built."""
    names: list[str] = []
    _collect(payload, names)
    return names


def _collect(value: object, names: list[str]) -> None:
    if isinstance(value, dict):
        if len(value) == 1 and REF_KEY in value:
            name = value[REF_KEY]
            if isinstance(name, str) and name not in names:
                names.append(name)
            return
        for item in value.values():
            if isinstance(item, dict | list):
                _collect(item, names)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                _collect(item, names)


def reference_paths(value: object, root: str) -> list[tuple[str, str]]:
    """``(field, name)`` for each reference, the field as errors name it (``payload.url``)."""
    return [(path, item[REF_KEY]) for path, item in _walk(value, root)
            if is_reference(item) and isinstance(item[REF_KEY], str)]


def validate_references(payload: object) -> None:
    """ValidationError naming the field for a malformed ``$secret`` object anywhere."""
    for path, value in _walk(payload, "payload"):
        if isinstance(value, dict) and REF_KEY in value:
            if len(value) != 1:
                raise ValidationError(path, 'a secret reference is {"$secret": "name"}, with no '
                                      "other keys")
            check_name(value[REF_KEY], path)


# --- masking ------------------------------------------------------------------------------


# JSON's two-character escapes; any character may also be written \\uXXXX (either case).
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
               "\r": "\\r", "\t": "\\t"}


def _any_case(hex_digits: str) -> str:
    return "".join(f"[{d.upper()}{d.lower()}]" if d.isalpha() else d for d in hex_digits)


def _char_pattern(char: str) -> str:
    """A regex for one character of a value as output may spell it: as is, percent-encoded
    (upper or lower hex; ``+`` for a space), or JSON-escaped (``\\uXXXX`` in either case,
    ``\\"``, ``\\/``, ...)."""
    forms = [re.escape(char),
             "".join("%" + _any_case(f"{byte:02X}") for byte in char.encode("utf-8",
                                                                             "surrogatepass"))]
    if char == " ":
        forms.append(r"\+")
    if char in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[char]))
    units = char.encode("utf-16-be", "surrogatepass")
    forms.append("".join(r"\\u" + _any_case(units[i:i + 2].hex())
                         for i in range(0, len(units), 2)))
    return f"(?:{'|'.join(forms)})"


def _base64_forms(value: str) -> set[str]:
    raw = value.encode("utf-8", "surrogatepass")
    return {base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode().rstrip("=")}


@lru_cache(maxsize=256)
def _pattern(values: frozenset[str]) -> re.Pattern[str]:
    """One regex for every spelling of every value, the longest values first."""
    spelled = ["".join(_char_pattern(char) for char in value)
               for value in sorted(values, key=len, reverse=True)]
    encoded = sorted({f for value in values for f in _base64_forms(value)}, key=len, reverse=True)
    return re.compile("|".join([*spelled, *(re.escape(f) + "={0,2}" for f in encoded)]))


def _forms(value: str) -> list[str]:
    """The usual whole spellings of a value, for a value cut off at the output cap."""
    quoted = {quote(value, safe=""), quote(value), quote_plus(value), quote_plus(value, safe="/")}
    lower = {re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), q) for q in quoted}
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             *quoted, *lower}
    return sorted((f for f in forms if f), key=len, reverse=True)


def mask(text: str, values: set[str] | frozenset[str]) -> str:
    """``text`` with every occurrence of each value as ****: raw, percent-encoded (upper or
    lower hex, ``+`` for a space, any characters left unescaped), JSON-escaped, and base64 of
    the whole value (standard or URL-safe alphabet).

    Text cut at the output cap may end in the first part of a value: that part is masked too.
    """
    values = frozenset(v for v in values if v)
    if not values or not text:
        return text
    text = _pattern(values).sub(MASK, text)
    head, marker, tail = text.rpartition("\n[truncated]")
    if marker and not tail:
        forms = sorted({f for v in values for f in _forms(v)}, key=len, reverse=True)
        for form in forms:
            for cut in range(len(form) - 1, 0, -1):
                if head.endswith(form[:cut]):
                    head = head[:-cut] + MASK
                    break
        text = head + marker
    return text


def mask_outcome_text(text: str | None, values: set[str] | frozenset[str]) -> str | None:
    return None if text is None else mask(text, values)


# Values looked up while an attempt runs, so the executor wrapper can mask them all, including
# those an executor fetched itself (an SMTP password, an endpoint's signing secret).
_used: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "tickwork_secrets_used", default=None)


def start_recording() -> tuple[set[str], contextvars.Token[set[str] | None]]:
    values: set[str] = set()
    return values, _used.set(values)


def stop_recording(token: contextvars.Token[set[str] | None]) -> None:
    _used.reset(token)


# --- keys ---------------------------------------------------------------------------------


class SecretKeyring:
    """Fernet keys from ``TICKWORK_SECRET_KEY``: the first encrypts, every one decrypts."""

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise SecretsUnavailable(f"{KEY_ENV} is not set; secrets need a key ({KEY_HELP})")
        fernets = []
        for number, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key.encode()))
            except ValueError:
                raise ConfigError(KEY_ENV, f"key {number} is not a Fernet key (32 url-safe "
                                  f"base64-encoded bytes); {KEY_HELP}") from None
        self._fernet = MultiFernet(fernets)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SecretKeyring:
        raw = (os.environ if environ is None else environ).get(KEY_ENV, "")
        return cls([part.strip() for part in raw.split(",") if part.strip()])

    def encrypt(self, value: str) -> bytes:
        return self._fernet.encrypt(value.encode())

    def decrypt(self, name: str, token: bytes) -> str:
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken:
            raise SecretsUnavailable(f"secret {name!r} cannot be decrypted with {KEY_ENV} "
                                     "(was it set with another key?)") from None

    def rotate(self, token: bytes) -> bytes:
        """The token re-encrypted with the first key."""
        return self._fernet.rotate(token)


# --- resolution ---------------------------------------------------------------------------


class SecretResolver:
    """Looks secrets up in a SecretStore and decrypts them, at execution time only.

    The key is read when the first secret is needed: a service whose jobs use no secrets runs
    without one.
    """

    def __init__(self, store: SecretStore, keyring: SecretKeyring | None = None) -> None:
        self.store = store
        self._keyring = keyring

    def keyring(self) -> SecretKeyring:
        if self._keyring is None:
            self._keyring = SecretKeyring.from_env()
        return self._keyring

    async def get(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> str:
        """The plaintext of one secret of ``namespace`` (SecretNotFound, SecretsUnavailable).
        Recorded for masking when called while an attempt runs."""
        keyring = self.keyring()
        value = keyring.decrypt(name, await self.store.secret_get(name, namespace=namespace))
        used = _used.get()
        if used is not None:
            used.add(value)
        return value

    async def resolve(self, payload: dict[str, Any], *, namespace: str) -> dict[str, Any]:
        """A copy of ``payload`` with each ``{"$secret": name}`` replaced by its value in
        ``namespace`` (the job's own: never another's)."""
        values = {name: await self.get(name, namespace=namespace)
                  for name in find_references(payload)}
        resolved = _substitute(payload, values)
        assert isinstance(resolved, dict)
        return resolved


def _substitute(value: object, values: dict[str, str]) -> object:
    if is_reference(value):
        return values[value[REF_KEY]]
    if isinstance(value, dict):
        return {key: _substitute(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, values) for item in value]
    return value



def resolver_for(driver: Driver) -> SecretResolver | None:
    """A resolver over the driver's secret store, or None where there is none (an in-memory
    SQLite database)."""
    try:
        return SecretResolver(driver.secret_store())
    except TickworkError:
        return None
