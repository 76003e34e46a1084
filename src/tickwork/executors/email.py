"""The ``email`` kind: send one message over SMTP (aiosmtplib).

Payload: ``{"to": ["a@example.org"], "cc": [...], "bcc": [...], "subject": "...", "text": "...",
"html": "..."}`` (``text`` or ``html`` or both; ``to`` may be one address). The server, TLS mode,
credentials and From address come from the settings (``smtp_*``), never from a job; the
password may be ``$secret:NAME``. Every attempt of an occurrence sends the same ``Message-ID``
and a ``Tickwork-Idempotency-Key`` header (G6), so a receiver can drop a duplicate.

Transient failures are retriable: a 4xx reply, a refused or dropped connection, a timeout.
Permanent ones are fatal: a 5xx reply (an unknown recipient, a rejected login).
"""

from __future__ import annotations

import hashlib
import re
import ssl
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from typing import TYPE_CHECKING, Any

import aiosmtplib

from tickwork.errors import TickworkError, ValidationError
from tickwork.executors.base import (
    ERROR_LIMIT_BYTES,
    ExecutionContext,
    ExecutorSettings,
    cap_text,
    checked_payload,
    is_secret_reference,
    payload_object,
)
from tickwork.models import rfc3339
from tickwork.outcomes import Fail, Outcome, Success
from tickwork.secrets import config_reference

if TYPE_CHECKING:
    from tickwork.secrets import SecretResolver

KIND = "email"
FIELDS = ("to", "cc", "bcc", "subject", "text", "html")
TLS_MODES = ("none", "starttls", "tls")
MAX_RECIPIENTS = 100
MAX_SUBJECT = 998  # RFC 5322's line limit
NOT_CONFIGURED = "email jobs need an SMTP server: set smtp_host and smtp_from in the config"
# Deliberately simple: one @, no spaces or angle brackets. The server has the last word.
_ADDRESS = re.compile(r"[^\s@<>,;\"]+@[^\s@<>,;\"]+\.[^\s@<>,;\"]+|[^\s@<>,;\"]+@localhost")


def validate_payload(payload: object) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field."""
    payload = payload_object(payload, FIELDS)
    out: dict[str, Any] = {"to": _addresses("to", payload.get("to"), required=True)}
    for name in ("cc", "bcc"):
        if payload.get(name) is not None:
            out[name] = _addresses(name, payload[name], required=False)
    if len(out["to"]) + len(out.get("cc", [])) + len(out.get("bcc", [])) > MAX_RECIPIENTS:
        raise ValidationError("payload.to", f"at most {MAX_RECIPIENTS} recipients in all "
                              "(to, cc and bcc)")
    subject = payload.get("subject")
    if not isinstance(subject, str) or not subject.strip():
        raise ValidationError("payload.subject", "is required: a non-empty string")
    if len(subject) > MAX_SUBJECT or any(c in subject for c in "\r\n\0"):
        raise ValidationError("payload.subject", f"must be one line of at most {MAX_SUBJECT} "
                              "characters")
    out["subject"] = subject
    if payload.get("text") is None and payload.get("html") is None:
        raise ValidationError("payload.text", "give text or html (or both)")
    for name in ("text", "html"):
        value = payload.get(name)
        if value is not None:
            if not isinstance(value, str) and not is_secret_reference(value):
                raise ValidationError(f"payload.{name}", "must be a string")
            out[name] = value
    return out


def _addresses(name: str, value: object, *, required: bool) -> list[str]:
    items = [value] if isinstance(value, str) else value
    field = f"payload.{name}"
    if not isinstance(items, list) or (required and not items):
        raise ValidationError(field, "must be an email address or a list of them")
    for item in items:
        if not isinstance(item, str) or _ADDRESS.fullmatch(item) is None:
            raise ValidationError(field, f"{str(item)[:200]!r} is not an email address")
    return list(items)


def check_settings(settings: ExecutorSettings) -> str | None:
    """Why the SMTP settings cannot work, or None (config.py reports it with the field)."""
    if settings.smtp_tls not in TLS_MODES:
        return f"smtp_tls must be one of {', '.join(TLS_MODES)} (got {settings.smtp_tls!r})"
    if settings.smtp_host and not settings.smtp_from:
        return "smtp_from must be set when smtp_host is"
    if settings.smtp_from and _ADDRESS.fullmatch(sender_address(settings)) is None:
        return f"smtp_from {settings.smtp_from!r} is not an email address"
    return None


def sender_address(settings: ExecutorSettings) -> str:
    """The address in smtp_from, which may be ``Name <address>``."""
    return parseaddr(settings.smtp_from)[1]


def message_id(ctx: ExecutionContext, sender: str) -> str:
    """The same on every attempt of an occurrence."""
    digest = hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()[:32]
    domain = sender.rpartition("@")[2] or "tickwork"
    return f"<{digest}@{domain}>"


class EmailExecutor:
    """Sends ``email`` jobs, one SMTP connection per message."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings, secrets: SecretResolver | None = None
                 ) -> None:
        self._settings = settings
        self._secrets = secrets

    async def close(self) -> None:
        """Nothing is kept open between messages."""

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        prepared = await self._prepare(ctx)
        if isinstance(prepared, Fail):
            return prepared
        payload, password = prepared
        message = self._message(payload, ctx)
        recipients = [*payload["to"], *payload.get("cc", []), *payload.get("bcc", [])]
        failed = await self._send(message, recipients, password, ctx.timeout_seconds)
        if failed is not None:
            return failed
        return Success(output=f"sent to {len(recipients)} recipient(s), Message-ID "
                       f"{message['Message-ID']}")

    async def _prepare(self, ctx: ExecutionContext) -> tuple[dict[str, Any], str | None] | Fail:
        """The payload and the SMTP password, or a fatal Fail."""
        if not self._settings.smtp_host or not self._settings.smtp_from:
            return Fail(NOT_CONFIGURED, retriable=False)
        payload = checked_payload(validate_payload, ctx.payload)
        if isinstance(payload, Fail):
            return payload
        try:
            return payload, await self._password()
        except TickworkError as exc:
            return Fail(f"smtp_password: {exc}", retriable=False)

    async def _send(self, message: EmailMessage, recipients: list[str], password: str | None,
                    timeout_seconds: float) -> Fail | None:
        """Send; None on success, else a Fail retriable for 4xx and connection trouble."""
        s = self._settings
        where = f"SMTP server {s.smtp_host}:{s.smtp_port}"
        try:
            await aiosmtplib.send(
                message, sender=sender_address(s), recipients=recipients, hostname=s.smtp_host,
                port=s.smtp_port, username=s.smtp_username or None, password=password,
                use_tls=s.smtp_tls == "tls", start_tls=s.smtp_tls == "starttls",
                tls_context=self._tls_context(), timeout=timeout_seconds)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [r.code for r in exc.recipients]
            said = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
            return Fail(self._short(f"{where} refused every recipient: {said}"),
                        retriable=all(400 <= c < 500 for c in codes))
        except aiosmtplib.SMTPResponseException as exc:
            return Fail(self._short(f"{where} answered {exc.code} {exc.message}"),
                        retriable=400 <= exc.code < 500)
        except aiosmtplib.SMTPNotSupported as exc:  # no STARTTLS, no AUTH: a config problem
            return Fail(self._short(f"{where}: {exc}"), retriable=False)
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            return Fail(self._short(f"{where} failed: {type(exc).__name__}: {exc}"))
        return None

    async def _password(self) -> str | None:
        raw = self._settings.smtp_password
        name = config_reference(raw)
        if name is None:
            return raw or None
        if self._secrets is None:
            raise TickworkError(f"names secret {name!r}, but this worker has no secret store")
        return await self._secrets.get(name)

    def _tls_context(self) -> ssl.SSLContext | None:
        if self._settings.smtp_tls == "none":
            return None
        return ssl.create_default_context(cafile=self._settings.smtp_ca_file or None)

    def _message(self, payload: dict[str, Any], ctx: ExecutionContext) -> EmailMessage:
        s = self._settings
        msg = EmailMessage()
        msg["From"] = s.smtp_from
        msg["To"] = ", ".join(payload["to"])
        if payload.get("cc"):
            msg["Cc"] = ", ".join(payload["cc"])
        msg["Subject"] = payload["subject"]
        msg["Date"] = formatdate(localtime=False, usegmt=True)
        msg["Message-ID"] = message_id(ctx, sender_address(s))
        msg["Tickwork-Idempotency-Key"] = ctx.idempotency_key
        msg["Tickwork-Attempt"] = str(ctx.attempt)
        msg["Tickwork-Scheduled-At"] = rfc3339(ctx.scheduled_at)
        text, html = payload.get("text"), payload.get("html")
        if text is not None:
            msg.set_content(text)
            if html is not None:
                msg.add_alternative(html, subtype="html")
        else:
            msg.set_content(html, subtype="html")
        return msg

    def _short(self, text: str) -> str:
        return cap_text(text, min(ERROR_LIMIT_BYTES, self._settings.output_limit_bytes))
