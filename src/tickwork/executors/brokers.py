"""The broker clients of the ``publish`` kind: one connection per configured broker, reused.

Each client publishes one message and returns what the broker acknowledged (a Redis stream
entry id, a RabbitMQ confirm, a JetStream PubAck, an MQTT PUBACK). The libraries come with the
``brokers`` extra and are imported on first use, so a worker without it refuses publish jobs
instead of failing to start.

Before every connect the broker's host goes through the outbound guard (``ssrf.py``): it is
resolved here, every address is checked, and the client connects to the checked address, not
to the name (a DNS answer that changes between the check and the connect is never used).
Over TLS the client connects by name, so the certificate can be checked against it.

Errors raised: ``BrokerRefused`` (fatal: the guard, a missing library, a rejected login) and
``BrokerUnavailable`` (retriable: a refused or dropped connection, a nack, no ack in time).
Neither carries the broker's URL, which may hold credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ipaddress
import json
import socket
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, unquote, urlsplit

from tickwork.errors import TickworkError
from tickwork.executors.ssrf import OutboundPolicy, OutboundRefused

EXTRA_HINT = "install the brokers extra: pip install 'tickwork[brokers]'"
SCHEMES = {
    "redis": "redis", "rediss": "redis",
    "amqp": "amqp", "amqps": "amqp",
    "nats": "nats", "tls": "nats",
    "mqtt": "mqtt", "mqtts": "mqtt",
}
TLS_SCHEMES = frozenset({"rediss", "amqps", "tls", "mqtts"})
DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "amqp": 5672, "amqps": 5671, "nats": 4222,
                 "tls": 4222, "mqtt": 1883, "mqtts": 8883}


class BrokerRefused(TickworkError):
    """Publishing cannot work as configured: not worth another attempt."""


class BrokerUnavailable(TickworkError):
    """The broker did not take the message this time: worth another attempt."""


@dataclass(frozen=True, slots=True)
class Message:
    body: bytes  # the payload's body as JSON
    meta: dict[str, str]  # Idempotency-Key and the Tickwork-* headers
    fields: dict[str, str]  # the same as Redis stream fields / envelope keys


def broker_family(url: str) -> str | None:
    """``redis``, ``amqp``, ``nats`` or ``mqtt`` for a broker URL, else None."""
    return SCHEMES.get(urlsplit(url).scheme.lower())


async def guarded_host(parts: SplitResult, policy: OutboundPolicy) -> str:
    """The address to connect to for ``parts``' host, after the outbound guard.

    Raises BrokerRefused when the host (or any address it resolves to) is refused.
    """
    host = parts.hostname or ""
    try:
        policy.check_host(host)
        if policy.host_allowed(host):
            return host
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            return host
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, parts.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot resolve {host}: {exc.strerror or exc}") from None
        addresses = [str(info[4][0]) for info in infos]
        for address in addresses:
            policy.check_address(ipaddress.ip_address(address.split("%", 1)[0]), host)
    except OutboundRefused as exc:
        raise BrokerRefused(str(exc)) from None
    if parts.scheme.lower() in TLS_SCHEMES or not addresses:
        return host
    return addresses[0]


def with_host(parts: SplitResult, host: str) -> str:
    """``parts`` as a URL whose host is ``host`` (credentials and port kept)."""
    auth = parts.netloc.rpartition("@")[0]
    shown = f"[{host}]" if ":" in host else host
    port = parts.port or DEFAULT_PORTS[parts.scheme.lower()]
    netloc = f"{auth}@{shown}:{port}" if auth else f"{shown}:{port}"
    return parts._replace(netloc=netloc).geturl()


class BrokerClient(Protocol):
    family: str
    connects: int  # connections opened so far (1 while one connection serves every firing)

    async def publish(self, destination: dict[str, Any], message: Message,
                      ack_seconds: float) -> str: ...

    async def close(self) -> None: ...


def _missing(library: str) -> BrokerRefused:
    return BrokerRefused(f"publish jobs need {library}: {EXTRA_HINT}")


def _require(module: str, library: str) -> None:
    """Raise BrokerRefused naming the extra unless ``module`` can be imported."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise _missing(library) from None


class _Base:
    family = ""

    def __init__(self, url: str, policy: OutboundPolicy) -> None:
        self.parts = urlsplit(url)
        self.policy = policy
        self.connects = 0
        self._lock = asyncio.Lock()

    async def _address(self) -> str:
        address = await guarded_host(self.parts, self.policy)
        self.connects += 1
        return address


class RedisBroker(_Base):
    """XADD on one redis-py client (its pool keeps one connection while firings come one at a
    time)."""

    family = "redis"

    def __init__(self, url: str, policy: OutboundPolicy) -> None:
        super().__init__(url, policy)
        self._client: Any = None

    async def _connected(self) -> Any:
        async with self._lock:
            if self._client is None:
                try:
                    from redis.asyncio import Redis  # noqa: PLC0415  (the brokers extra)
                except ImportError:
                    raise _missing("redis") from None
                address = await self._address()
                self._client = Redis.from_url(with_host(self.parts, address),
                                              client_name="tickwork-publish",
                                              socket_connect_timeout=10)
            return self._client

    async def publish(self, destination: dict[str, Any], message: Message,
                      ack_seconds: float) -> str:
        _require("redis.asyncio", "redis")
        from redis.exceptions import (  # noqa: PLC0415  (the brokers extra)
            AuthenticationError,
            ConnectionError,
            RedisError,
            ResponseError,
        )
        client = await self._connected()
        maxlen = destination.get("maxlen")
        try:
            async with asyncio.timeout(ack_seconds):
                entry = await client.xadd(destination["stream"], message.fields,
                                          maxlen=maxlen, approximate=True)
        except TimeoutError:
            await self.close()
            raise BrokerUnavailable(f"no reply to XADD within {ack_seconds:g}s") from None
        except AuthenticationError as exc:
            await self.close()
            raise BrokerRefused(f"login refused: {exc}") from None
        except ResponseError as exc:  # WRONGTYPE, a read-only replica, OOM
            raise BrokerUnavailable(f"XADD refused: {exc}") from None
        except (ConnectionError, OSError) as exc:
            await self.close()
            raise BrokerUnavailable(f"connection failed: {type(exc).__name__}") from None
        except RedisError as exc:
            raise BrokerUnavailable(f"XADD failed: {exc}") from None
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class AmqpBroker(_Base):
    """One aiormq connection and one channel in confirm mode; messages are persistent."""

    family = "amqp"

    def __init__(self, url: str, policy: OutboundPolicy) -> None:
        super().__init__(url, policy)
        self._connection: Any = None
        self._channel: Any = None

    async def _connected(self, ack_seconds: float) -> Any:
        try:
            import aiormq  # noqa: PLC0415  (the brokers extra)
        except ImportError:
            raise _missing("aiormq") from None
        async with self._lock:
            if self._connection is None or self._connection.is_closed:
                self._connection = self._channel = None
                address = await self._address()
                try:
                    async with asyncio.timeout(ack_seconds):
                        self._connection = await aiormq.connect(
                            with_host(self.parts, address),
                            client_properties={"connection_name": "tickwork-publish"})
                except aiormq.exceptions.ProbableAuthenticationError:
                    raise BrokerRefused("login refused") from None
                except (aiormq.exceptions.AMQPError, OSError, TimeoutError) as exc:
                    raise BrokerUnavailable(f"connection failed: {type(exc).__name__}"
                                            ) from None
            if self._channel is None or self._channel.is_closed:  # closed by a 404, say
                self._channel = await self._connection.channel(publisher_confirms=True)
            return self._channel

    async def publish(self, destination: dict[str, Any], message: Message,
                      ack_seconds: float) -> str:
        _require("aiormq", "aiormq")
        import aiormq  # noqa: PLC0415  (the brokers extra)
        from pamqp.commands import Basic  # noqa: PLC0415  (aiormq's own dependency)

        properties = aiormq.spec.Basic.Properties(
            content_type="application/json", delivery_mode=2, headers=dict(message.meta),
            message_id=message.meta["Idempotency-Key"], app_id="tickwork")
        exchange, key = destination["exchange"], destination.get("routing_key", "")
        try:
            async with asyncio.timeout(ack_seconds):
                channel = await self._connected(ack_seconds)
                confirm = await channel.basic_publish(message.body, exchange=exchange,
                                                      routing_key=key, properties=properties)
        except TimeoutError:
            await self.close()
            raise BrokerUnavailable(f"no confirm within {ack_seconds:g}s") from None
        except aiormq.exceptions.ChannelNotFoundEntity:
            raise BrokerUnavailable(f"the broker has no exchange {exchange!r}") from None
        except aiormq.exceptions.ChannelAccessRefused:
            raise BrokerRefused(f"access to exchange {exchange!r} refused") from None
        except (aiormq.exceptions.AMQPError, OSError) as exc:
            await self.close()
            raise BrokerUnavailable(f"publish failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(confirm, Basic.Ack):
            raise BrokerUnavailable("the broker nacked the message")
        return f"confirmed (delivery tag {confirm.delivery_tag})"

    async def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and not connection.is_closed:
            await connection.close()


class NatsBroker(_Base):
    """One nats-py connection; JetStream publishes with ``Nats-Msg-Id``, so the stream drops a
    second copy of a message within its duplicate window."""

    family = "nats"

    def __init__(self, url: str, policy: OutboundPolicy) -> None:
        super().__init__(url, policy)
        self._client: Any = None

    async def _connected(self, ack_seconds: float) -> Any:
        try:
            import nats  # noqa: PLC0415  (the brokers extra)
        except ImportError:
            raise _missing("nats-py") from None
        async with self._lock:
            if self._client is None or self._client.is_closed:
                address = await self._address()
                parts = self.parts
                try:
                    self._client = await nats.connect(
                        f"{parts.scheme}://{'[' + address + ']' if ':' in address else address}"
                        f":{parts.port or DEFAULT_PORTS[parts.scheme.lower()]}",
                        user=unquote(parts.username) if parts.username else None,
                        password=unquote(parts.password) if parts.password else None,
                        name="tickwork-publish", connect_timeout=max(1, int(ack_seconds)),
                        allow_reconnect=False, max_reconnect_attempts=0)
                except Exception as exc:  # nats-py raises its own errors and OSErrors
                    if "authorization" in str(exc).lower():
                        raise BrokerRefused("login refused") from None
                    raise BrokerUnavailable(f"connection failed: {type(exc).__name__}"
                                            ) from None
            return self._client

    async def publish(self, destination: dict[str, Any], message: Message,
                      ack_seconds: float) -> str:
        _require("nats", "nats-py")
        from nats.errors import Error as NatsError  # noqa: PLC0415  (the brokers extra)
        from nats.js.errors import NoStreamResponseError  # noqa: PLC0415

        subject = destination["subject"]
        headers = {**message.meta, "Nats-Msg-Id": message.meta["Idempotency-Key"]}
        client = await self._connected(ack_seconds)
        try:
            ack = await client.jetstream().publish(subject, message.body, timeout=ack_seconds,
                                                   headers=headers)
        except NoStreamResponseError:
            raise BrokerUnavailable(f"no stream takes subject {subject!r}") from None
        except (NatsError, OSError, TimeoutError) as exc:
            if client.is_closed:
                await self.close()
            raise BrokerUnavailable(f"publish failed: {type(exc).__name__}: {exc}") from None
        duplicate = " (a duplicate: already stored)" if ack.duplicate else ""
        return f"stream {ack.stream} sequence {ack.seq}{duplicate}"

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and not client.is_closed:
            await client.close()


class MqttBroker(_Base):
    """One aiomqtt client speaking MQTT 5 (``?protocol=3.1.1`` for older brokers, whose
    messages then carry the JSON envelope); QoS 1, success is the PUBACK."""

    family = "mqtt"

    def __init__(self, url: str, policy: OutboundPolicy) -> None:
        super().__init__(url, policy)
        self.v5 = "protocol=3.1.1" not in self.parts.query
        self._client: Any = None

    async def _connected(self, ack_seconds: float) -> Any:
        try:
            import aiomqtt  # noqa: PLC0415  (the brokers extra)
        except ImportError:
            raise _missing("aiomqtt") from None
        async with self._lock:
            if self._client is None:
                address = await self._address()
                parts = self.parts
                version = aiomqtt.ProtocolVersion.V5 if self.v5 else aiomqtt.ProtocolVersion.V311
                client = aiomqtt.Client(
                    address, parts.port or DEFAULT_PORTS[parts.scheme.lower()],
                    username=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password else None,
                    protocol=version, timeout=ack_seconds,
                    tls_params=aiomqtt.TLSParameters() if parts.scheme == "mqtts" else None)
                try:
                    await client.__aenter__()
                except aiomqtt.MqttCodeError as exc:
                    if exc.rc in (4, 5, 134, 135):  # bad credentials, not authorised
                        raise BrokerRefused("login refused") from None
                    raise BrokerUnavailable(f"connection failed: {exc}") from None
                except aiomqtt.MqttError as exc:
                    raise BrokerUnavailable(f"connection failed: {exc}") from None
                self._client = client
            return self._client

    async def publish(self, destination: dict[str, Any], message: Message,
                      ack_seconds: float) -> str:
        _require("aiomqtt", "aiomqtt")
        import aiomqtt  # noqa: PLC0415  (the brokers extra)

        client = await self._connected(ack_seconds)
        topic = destination["topic"]
        if self.v5:
            from paho.mqtt.packettypes import PacketTypes  # noqa: PLC0415  (aiomqtt's own)
            from paho.mqtt.properties import Properties  # noqa: PLC0415

            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]  # paho is untyped
            properties.UserProperty = list(message.meta.items())
            properties.ContentType = "application/json"
            payload = message.body
        else:
            properties = None
            payload = envelope(message)
        try:
            await client.publish(topic, payload, qos=1, properties=properties, timeout=ack_seconds)
        except aiomqtt.MqttError as exc:
            await self.close()
            raise BrokerUnavailable(f"no PUBACK: {exc}") from None
        return f"PUBACK for topic {topic}"

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # already gone: nothing left to close
                await client.__aexit__(None, None, None)


def envelope(message: Message) -> bytes:
    """The JSON envelope, for a broker without headers."""
    fields = {k: v for k, v in message.fields.items() if k != "body"}
    tickwork: dict[str, object] = {**fields, "attempt": int(fields["attempt"])}
    return json.dumps({"body": json.loads(message.body), "tickwork": tickwork}).encode()


CLIENTS: dict[str, type[_Base]] = {
    "redis": RedisBroker, "amqp": AmqpBroker, "nats": NatsBroker, "mqtt": MqttBroker,
}


def open_client(url: str, policy: OutboundPolicy) -> BrokerClient:
    family = broker_family(url)
    if family is None:
        raise BrokerRefused(f"unsupported broker scheme {urlsplit(url).scheme!r}")
    client: BrokerClient = CLIENTS[family](url, policy)  # type: ignore[assignment]  # each subclass has publish
    return client
