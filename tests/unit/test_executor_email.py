"""The email executor against a real SMTP server (aiosmtpd) on 127.0.0.1, plain and with TLS."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tickwork.config import load_settings
from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors import ExecutorSettings, build_executors, validate_payload
from tickwork.executors.email import EmailExecutor
from tickwork.outcomes import Fail, Success
from tickwork.secrets import SecretKeyring, SecretResolver
from tickwork.testing.jobs import make_context

PASSWORD = "smtp-pa55word"


@dataclass
class Mailbox:
    port: int = 0
    received: list[tuple[Envelope, EmailMessage]] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)


class Handler:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, options: list[str]) -> str:
        if address.startswith("busy@"):
            return "450 4.2.1 mailbox busy, try later"
        if address.startswith("nobody@"):
            return "550 5.1.1 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session,
                          envelope: Envelope) -> str:
        assert isinstance(envelope.content, bytes)
        msg = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(msg, EmailMessage)
        self.box.received.append((envelope, msg))
        return "250 OK"


def make_cert(tmp_path: Path) -> tuple[ssl.SSLContext, str]:
    """A self-signed certificate for 127.0.0.1: the server's context and the CA file."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tickwork test")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context, str(cert_file)


def authenticator(box: Mailbox) -> Callable[..., AuthResult]:
    def check(server: SMTP, session: Session, envelope: Envelope, mechanism: str,
              auth_data: Any) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        box.logins.append((login, password))
        return AuthResult(success=(login, password) == ("mailer", PASSWORD), handled=False)
    return check


async def serve(box: Mailbox, *, tls: ssl.SSLContext | None = None,
                starttls: ssl.SSLContext | None = None) -> asyncio.Server:
    loop = asyncio.get_running_loop()

    def factory() -> SMTP:
        return SMTP(Handler(box), hostname="tickwork-test", tls_context=starttls,
                    require_starttls=starttls is not None, authenticator=authenticator(box),
                    auth_require_tls=True)

    server = await loop.create_server(factory, "127.0.0.1", 0, ssl=tls)
    box.port = server.sockets[0].getsockname()[1]
    return server


@pytest.fixture
async def plain() -> AsyncIterator[Mailbox]:
    box = Mailbox()
    async with await serve(box):
        yield box


def settings(box: Mailbox, **overrides: Any) -> ExecutorSettings:
    values: dict[str, Any] = {"smtp_host": "127.0.0.1", "smtp_port": box.port,
                              "smtp_tls": "none", "smtp_from": "tickwork@example.org"}
    return ExecutorSettings(**{**values, **overrides})


async def send(s: ExecutorSettings, payload: dict[str, Any], resolver: Any = None) -> Any:
    ex = EmailExecutor(s, resolver)
    return await asyncio.wait_for(ex.execute(make_context("email", payload)), 10)


PAYLOAD = {"to": ["a@example.org", "b@example.org"], "cc": "c@example.org",
           "bcc": ["d@example.org"], "subject": "Nightly report", "text": "All good.",
           "html": "<p>All <b>good</b>.</p>"}


async def test_a_message_is_delivered(plain: Mailbox) -> None:
    outcome = await send(settings(plain), PAYLOAD)
    assert isinstance(outcome, Success)
    [(envelope, msg)] = plain.received
    assert envelope.mail_from == "tickwork@example.org"
    assert envelope.rcpt_tos == ["a@example.org", "b@example.org", "c@example.org",
                                 "d@example.org"]
    assert msg["To"] == "a@example.org, b@example.org"
    assert msg["Cc"] == "c@example.org"
    assert msg["Bcc"] is None  # bcc recipients get it without being named
    assert msg["Subject"] == "Nightly report"
    assert msg["Tickwork-Idempotency-Key"] == "job-1:2030-01-02T03:04:05Z"
    text = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert text is not None
    assert html is not None
    assert text.get_content().strip() == "All good."
    assert html.get_content().strip() == "<p>All <b>good</b>.</p>"
    assert outcome.output == f"sent to 4 recipient(s), Message-ID {msg['Message-ID']}"


async def test_the_message_id_is_the_same_on_every_attempt(plain: Mailbox) -> None:
    ex = EmailExecutor(settings(plain))
    for attempt in (1, 2):
        await ex.execute(make_context("email", {"to": "a@example.org", "subject": "s",
                                                "text": "t"}, attempt=attempt))
    ids = {msg["Message-ID"] for _, msg in plain.received}
    assert len(ids) == 1
    assert [msg["Tickwork-Attempt"] for _, msg in plain.received] == ["1", "2"]


async def test_4xx_is_retriable_and_5xx_fatal(plain: Mailbox) -> None:
    busy = await send(settings(plain), {"to": "busy@example.org", "subject": "s", "text": "t"})
    assert isinstance(busy, Fail)
    assert busy.retriable
    assert "450 4.2.1 mailbox busy" in busy.error
    gone = await send(settings(plain), {"to": "nobody@example.org", "subject": "s", "text": "t"})
    assert isinstance(gone, Fail)
    assert not gone.retriable
    assert "550 5.1.1 no such user" in gone.error
    assert plain.received == []


async def test_a_refused_connection_is_retriable() -> None:
    box = Mailbox()
    server = await serve(box)
    server.close()
    await server.wait_closed()
    outcome = await send(settings(box), {"to": "a@example.org", "subject": "s", "text": "t"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.error.startswith(f"SMTP server 127.0.0.1:{box.port} failed: ")


async def test_starttls_with_a_password_from_a_secret(tmp_path: Path) -> None:
    context, ca_file = make_cert(tmp_path)
    box = Mailbox()
    url = f"sqlite:///{tmp_path}/tickwork.db"
    store = SqliteStore(url)
    await store.migrate()
    await store.close()
    keyring = SecretKeyring([Fernet.generate_key().decode()])
    secret_store = SqliteSecretStore(url)
    await secret_store.secret_set("smtp", keyring.encrypt(PASSWORD), dt.datetime.now(dt.UTC))
    async with await serve(box, starttls=context):
        s = settings(box, smtp_tls="starttls", smtp_ca_file=ca_file, smtp_username="mailer",
                     smtp_password="$secret:smtp")
        executors = build_executors(s, SecretResolver(secret_store, keyring))
        outcome = await executors["email"].execute(make_context(
            "email", {"to": "a@example.org", "subject": "s", "text": f"pw is {PASSWORD}"}))
        assert isinstance(outcome, Success)
        assert box.logins == [("mailer", PASSWORD)]
        assert len(box.received) == 1

        wrong = settings(box, smtp_tls="starttls", smtp_ca_file=ca_file,
                         smtp_username="mailer", smtp_password="wrong")
        outcome = await send(wrong, {"to": "a@example.org", "subject": "s", "text": "t"})
        assert isinstance(outcome, Fail)
        assert not outcome.retriable  # 535: authentication failed
        assert " 535 " in outcome.error


async def test_implicit_tls(tmp_path: Path) -> None:
    context, ca_file = make_cert(tmp_path)
    box = Mailbox()
    async with await serve(box, tls=context):
        outcome = await send(settings(box, smtp_tls="tls", smtp_ca_file=ca_file),
                             {"to": "a@example.org", "subject": "s", "html": "<p>hi</p>"})
        assert isinstance(outcome, Success), outcome
        [(_, msg)] = box.received
        assert msg.get_content_type() == "text/html"
        # the system's CAs do not know this certificate: refused, and worth a retry later
        outcome = await send(settings(box, smtp_tls="tls"),
                             {"to": "a@example.org", "subject": "s", "text": "t"})
        assert isinstance(outcome, Fail)
        assert len(box.received) == 1


async def test_not_configured_is_fatal() -> None:
    outcome = await send(ExecutorSettings(), {"to": "a@example.org", "subject": "s",
                                              "text": "t"})
    assert outcome == Fail("email jobs need an SMTP server: set smtp_host and smtp_from in the "
                           "config", retriable=False)


@pytest.mark.parametrize(("payload", "field", "reason"), [
    ({"subject": "s", "text": "t"}, "payload.to", "must be an email address or a list of them"),
    ({"to": [], "subject": "s", "text": "t"}, "payload.to",
     "must be an email address or a list of them"),
    ({"to": "not an address", "subject": "s", "text": "t"}, "payload.to",
     "'not an address' is not an email address"),
    ({"to": "a@example.org", "cc": ["x"], "subject": "s", "text": "t"}, "payload.cc",
     "'x' is not an email address"),
    ({"to": "a@example.org", "text": "t"}, "payload.subject", "is required: a non-empty string"),
    ({"to": "a@example.org", "subject": "a\nBcc: x@evil.example", "text": "t"},
     "payload.subject", "must be one line of at most 998 characters"),
    ({"to": "a@example.org", "subject": "s"}, "payload.text", "give text or html (or both)"),
    ({"to": "a@example.org", "subject": "s", "text": "t", "from": "x@y.z"}, "payload.from",
     "unknown field; expected one of to, cc, bcc, subject, text, html"),
])
def test_validate_rejects(payload: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("email", payload)
    assert (info.value.field, info.value.reason) == (field, reason)


def test_smtp_settings() -> None:
    loaded = load_settings(env={"TICKWORK_SMTP_HOST": "mail.example.org",
                                "TICKWORK_SMTP_PORT": "465", "TICKWORK_SMTP_TLS": "tls",
                                "TICKWORK_SMTP_FROM": "jobs@example.org",
                                "TICKWORK_SMTP_PASSWORD": "$secret:smtp"})
    assert (loaded.executors.smtp_port, loaded.executors.smtp_tls) == (465, "tls")
    for env, name in [({"TICKWORK_SMTP_TLS": "ssl"}, "executors.smtp_tls"),
                      ({"TICKWORK_SMTP_HOST": "h"}, "executors.smtp_from"),
                      ({"TICKWORK_SMTP_PORT": "70000"}, "executors.smtp_port"),
                      ({"TICKWORK_SMTP_PASSWORD": "$secret:no way"}, "executors.smtp_password")]:
        with pytest.raises(ConfigError) as info:
            load_settings(env=env)
        assert info.value.field == name
