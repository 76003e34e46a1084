"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), with their files served by the app itself.

FastAPI's own pages load Swagger UI, ReDoc and Google Fonts from CDNs, so they are blank on a
machine without internet. These pages load only same-origin files: Swagger UI's bundle and
stylesheet and ReDoc's standalone bundle as shipped in the ``fastapi-offline`` wheel (pinned
in pyproject.toml; Swagger UI is Apache-2.0, ReDoc MIT), under ``/docs/assets/``, and ReDoc
without web fonts. Swagger UI's validator badge (another outside request) is off.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"  # under the app: behind its mount prefix when it is mounted
ASSET_PACKAGE = "fastapi_offline"  # its static/ folder: the Swagger UI and ReDoc bundles


def install(app: FastAPI, *, openapi_url: str = "/openapi.json") -> None:
    """Add ``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and the assets they load (the app
    must be made with ``docs_url=None, redoc_url=None``). The pages name every URL with the
    prefix the app is mounted at, if any (``root_path``)."""
    title = app.title
    static = resources.files(ASSET_PACKAGE) / "static"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url, title=f"{title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
            swagger_ui_parameters={"validatorUrl": None})

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_redoc_html(openapi_url=root + openapi_url, title=f"{title} - ReDoc",
                              redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
                              with_google_fonts=False)

    app.mount(ASSETS, StaticFiles(directory=str(static)), name="api-docs-assets")


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")
