"""The REST API under /api/v1, /metrics, /healthz and the dashboard, as one ASGI app."""

from tickwork.api.app import create_app

__all__ = ["create_app"]
