"""Whether a process traces its attempts, and the OpenTelemetry set-up when it does.

Traces are on when the ``otel`` setting is true (``TICKWORK_OTEL=1``), or when the standard
OpenTelemetry variables ask for an exporter (``OTEL_TRACES_EXPORTER`` other than ``none``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and the ``otel``
extra is installed; never when ``OTEL_SDK_DISABLED=true``. The setting without the extra is an
error; the variables without it are someone else's and are ignored. When off, nothing of
OpenTelemetry is imported.

A tracer provider already set (by the program embedding tickwork, or by
``opentelemetry-instrument``) is used as it is. Otherwise tickwork sets the SDK's up: the
resource from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service name
``tickwork`` by default), spans batched to the exporter ``OTEL_TRACES_EXPORTER`` names:
``otlp`` (the default; needs ``opentelemetry-exporter-otlp-proto-http`` or ``-grpc``, as
``OTEL_EXPORTER_OTLP_PROTOCOL`` says), ``console`` or ``none``.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import Any

from tickwork.config import Settings
from tickwork.errors import ConfigError
from tickwork.worker.tracing import AttemptTracer

log = logging.getLogger("tickwork.runtime")

EXPORTER_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
EXTRA_HINT = "needs the otel extra: pip install 'tickwork[otel]'"


def otel_installed() -> bool:
    return (importlib.util.find_spec("opentelemetry") is not None
            and importlib.util.find_spec("opentelemetry.sdk") is not None)


def tracing_wanted(settings: Settings, environ: Mapping[str, str]) -> bool:
    """Whether traces are asked for, by the setting or the standard variables."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if settings.otel:
        return True
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    return exporter not in ("", "none") or any(
        environ.get(name, "").strip() for name in EXPORTER_VARIABLES[1:])


def attempt_tracer(settings: Settings, environ: Mapping[str, str] | None = None
                   ) -> AttemptTracer | None:
    """The worker pool's tracer, or None when traces are off (the common case: no import)."""
    env = os.environ if environ is None else environ
    if not tracing_wanted(settings, env):
        return None
    if not otel_installed():
        if settings.otel:
            raise ConfigError("otel", EXTRA_HINT)
        log.debug("OTEL_* variables are set but the otel extra is not installed: no traces")
        return None
    from tickwork.worker.otel import OtelAttempts  # noqa: PLC0415  (the otel extra)

    _set_up_sdk(env)
    return OtelAttempts()


def _set_up_sdk(env: Mapping[str, str]) -> None:
    """A batching SDK tracer provider as the global one, unless one is set already."""
    from opentelemetry import trace  # noqa: PLC0415  (the otel extra)
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return  # the embedding program or opentelemetry-instrument set one up
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": "tickwork"}
    provider = TracerProvider(resource=Resource.create(attributes))
    exporter = _exporter(env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp",
                         env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing attempts with OpenTelemetry (%s)",
             type(exporter).__name__ if exporter is not None else "no exporter")


def _exporter(name: str, protocol: str) -> Any:
    if name == "none":
        return None
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ConfigError("OTEL_TRACES_EXPORTER", f"tickwork knows otlp, console and none "
                                                  f"(got {name!r})")
    package = ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter" if protocol == "grpc"
               else "opentelemetry.exporter.otlp.proto.http.trace_exporter")
    try:
        module = importlib.import_module(package)
    except ImportError:
        wheel = "grpc" if protocol == "grpc" else "proto-http"
        log.warning("no OTLP exporter installed (pip install opentelemetry-exporter-otlp-%s): "
                    "attempts are traced, and their spans dropped", wheel)
        return None
    return module.OTLPSpanExporter()
