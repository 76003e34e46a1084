"""Who may call the API: bearer tokens, the dashboard's cookie session, or open access.

- ``Authorization: Bearer tw_...``: the token's SHA-256 is looked up in the store (never a
  query string). No token or an unknown one is 401; a token without the scope is 403
  (read < write < admin).
- The dashboard signs in with a token once (``POST /api/v1/session``); the token then rides in
  an HttpOnly, SameSite=Strict cookie the page's JavaScript cannot read. Every state-changing
  request that authenticates by cookie must also carry ``X-CSRF-Token`` equal to the
  ``tw_csrf`` cookie (double submit) and must not come from another site (Fetch Metadata).
- Open access (``--open``, loopback only) needs no token; state-changing requests from a browser
  must still be same-origin, and the Host header must name a loopback address (DNS rebinding).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request, Response

from tickwork.api.access import TOKEN_STATE
from tickwork.api.body import json_body
from tickwork.api.deps import PRINCIPAL_STATE, Client, state_of
from tickwork.api.errors import forbidden, problems, unauthorized
from tickwork.client.namespaces import check_namespace
from tickwork.drivers.admin import Scope, TokenAuthenticateParams, TokenCreateParams, TokenInfo
from tickwork.drivers.namespaces import NAMESPACE_RULE
from tickwork.errors import ValidationError

TOKEN_PREFIX = "tw_"  # noqa: S105  (a prefix that marks tokens, not a secret)
SESSION_COOKIE = "tw_session"
CSRF_COOKIE = "tw_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, slots=True)
class Principal:
    scope: Scope
    via: str  # "bearer", "cookie" or "open"
    token: TokenInfo | None = None

    @property
    def namespace(self) -> str | None:
        """The only namespace it sees; None: every namespace (open access, unscoped token)."""
        return self.token.namespace if self.token is not None else None


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


async def create_token(client: Client, name: object, scope: object, namespace: object = None,
                       *, creator: str | None = None) -> tuple[str, TokenInfo]:
    """A new token: the secret (shown once) and what is stored about it (its hash only).
    ``namespace``: the only one it sees (None: every one). ``creator``: the namespace of whoever
    asks, if it has one: it makes tokens of that namespace only (by default, of its own)."""
    name = name.strip() if isinstance(name, str) else ""
    if not 1 <= len(name) <= 64 or not name.isprintable():
        raise ValidationError("name", "must be 1 to 64 printable characters")
    if scope not in ("read", "write", "admin"):
        raise ValidationError("scope", "must be read, write or admin")
    chosen = Scope(scope)
    if namespace is None:
        namespace = creator
    if namespace is not None:
        if not isinstance(namespace, str):
            raise ValidationError("namespace", NAMESPACE_RULE)
        if creator is not None and namespace != creator:
            raise forbidden(f"a token of namespace {creator!r} creates tokens of that "
                            "namespace only")
        check_namespace(namespace)
    secret = new_token()
    info = await client.admin.token_create(TokenCreateParams(
        id=f"tok_{uuid.uuid4().hex[:12]}", name=name, scope=chosen, token_hash=hash_token(secret),
        now=client.clock.now(), namespace=namespace))
    return secret, info


async def _token_principal(client: Client, secret: str, via: str) -> Principal | None:
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    info = await client.admin.token_authenticate(
        TokenAuthenticateParams(token_hash=hash_token(secret), now=client.clock.now()))
    return None if info is None else Principal(scope=info.scope, via=via, token=info)


def _host_name(value: str) -> str:
    return (urlsplit(f"//{value}").hostname or "").lower()


def _check_same_origin(request: Request) -> None:
    """Refuse a state-changing request a browser sent on behalf of another site."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise forbidden("cross-site request refused")
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise forbidden("cross-origin request refused")


def _check_csrf(request: Request) -> None:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    header = request.headers.get(CSRF_HEADER, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), header.encode()):
        raise forbidden(f"missing or wrong {CSRF_HEADER} header (CSRF check)")


async def authenticate(request: Request) -> Principal:
    state = state_of(request)
    unsafe = request.method not in SAFE_METHODS
    if state.open_access:
        if _host_name(request.headers.get("host", "")) not in state.allowed_hosts:
            raise forbidden("open access answers only requests to a loopback host name")
        if unsafe:
            _check_same_origin(request)
        return Principal(scope=Scope.ADMIN, via="open")
    header = request.headers.get("authorization")
    if header is not None:
        kind, _, secret = header.partition(" ")
        if kind.lower() != "bearer" or not secret.strip():
            raise unauthorized("use 'Authorization: Bearer <token>'")
        principal = await _token_principal(state.client, secret.strip(), "bearer")
        if principal is None:
            raise unauthorized("unknown or revoked token")
        return principal
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        principal = await _token_principal(state.client, cookie, "cookie")
        if principal is None:
            raise unauthorized("the session has ended; sign in again")
        if unsafe:
            _check_same_origin(request)
            _check_csrf(request)
        return principal
    raise unauthorized("an API token is required: 'Authorization: Bearer <token>'")


def require(scope: Scope) -> Callable[[Request], Awaitable[Principal]]:
    async def check(request: Request) -> Principal:
        principal = await authenticate(request)
        if principal.token is not None:  # the access log names it
            setattr(request.state, TOKEN_STATE, principal.token.name)
        setattr(request.state, PRINCIPAL_STATE, principal)  # client_of scopes the client by it
        if not principal.scope.allows(scope):
            raise forbidden(f"this needs a token with scope '{scope.value}' "
                            f"(this one has '{principal.scope.value}')")
        return principal

    return check


def actor_of(request: Request) -> str:
    """Who a change is recorded as: the token's name; ``open-access`` without a token. Set
    by ``require``, which runs first (route dependencies come before the handler's own)."""
    name = getattr(request.state, TOKEN_STATE, None)
    return name if isinstance(name, str) and name else "open-access"


async def every_namespace(request: Request) -> None:
    """Refuse a token of one namespace: what is shared by every namespace (calendars, quotas)
    is changed only by a caller that sees them all. After ``require``. (Queues and limit keys
    may be owned by a namespace: the client decides, client/owners.py.)"""
    principal = getattr(request.state, PRINCIPAL_STATE, None)
    if principal is not None and principal.namespace is not None:
        raise forbidden("calendars and quotas are shared by every namespace: changing them "
                        "needs a token without a namespace")


Actor = Annotated[str, Depends(actor_of)]
READ = Depends(require(Scope.READ))
WRITE = Depends(require(Scope.WRITE))
ADMIN = Depends(require(Scope.ADMIN))
SHARED = Depends(every_namespace)

# -- the dashboard's session -----------------------------------------------------------------

router = APIRouter(prefix="/api/v1/session", tags=["session"])

SESSION_BODY = {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["token"], "additionalProperties": False,
    "properties": {"token": {"type": "string"}}}}}}


def _set_csrf(request: Request, response: Response) -> str:
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    response.set_cookie(CSRF_COOKIE, token, httponly=False, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
    return token


@router.get("", summary="Who am I: open access, a signed-in session, or neither")
async def session_get(request: Request, response: Response) -> dict[str, Any]:
    _set_csrf(request, response)
    try:
        principal = await authenticate(request)
    except Exception:  # any failure to authenticate means "not signed in"
        return {"authenticated": False, "open": False, "scope": None, "token_name": None,
                "namespace": None}
    return {"authenticated": True, "open": principal.via == "open",
            "scope": principal.scope.value,
            "token_name": principal.token.name if principal.token else None,
            "namespace": principal.namespace}


@router.post("", summary="Sign the dashboard in with an API token", status_code=200,
             openapi_extra={"requestBody": SESSION_BODY}, responses=problems(401, 403, 422))
async def session_create(request: Request, response: Response,
                         body: Annotated[Any, Depends(json_body)]) -> dict[str, Any]:
    _check_same_origin(request)
    if not isinstance(body, dict) or not isinstance(body.get("token"), str) or set(body) != {
            "token"}:
        raise ValidationError("token", "send {\"token\": \"tw_...\"}")
    principal = await _token_principal(state_of(request).client, body["token"].strip(), "cookie")
    if principal is None:
        raise unauthorized("unknown or revoked token")
    response.set_cookie(SESSION_COOKIE, body["token"].strip(), httponly=True,
                        samesite="strict", path="/", secure=request.url.scheme == "https")
    _set_csrf(request, response)
    assert principal.token is not None
    return {"authenticated": True, "open": False, "scope": principal.scope.value,
            "token_name": principal.token.name, "namespace": principal.namespace}


@router.delete("", summary="Sign the dashboard out", status_code=204,
               responses=problems(403))
async def session_delete(request: Request) -> Response:
    _check_same_origin(request)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/", samesite="strict", httponly=True)
    return response
