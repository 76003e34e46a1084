"""``tickwork tokens create|list|revoke --api URL``: API tokens through the REST API's
``/api/v1/tokens`` (admin scope), returning the store's ``TokenInfo``, so the commands print
what they print on a database.

Secrets have no endpoint, by design: a secret's value never crosses the API, so ``tickwork
secrets`` works on a database only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickwork.cli.remote import RemoteClient, _segment
from tickwork.cli.remote_json import instant, maybe_instant
from tickwork.drivers.admin import Scope, TokenInfo


class RemoteTokens(RemoteClient):
    """``RemoteClient`` with the token methods the ``tokens`` commands use."""

    async def token_list(self) -> list[TokenInfo]:
        """Every token the API's token sees (a namespace's token: its namespace's)."""
        body = await self._call("GET", "/tokens")
        return [token_from_json(item) for item in body["items"]]

    async def token_create(self, name: str, scope: str,
                           namespace: str | None) -> tuple[str, TokenInfo]:
        """The new token's secret (shown once) and what the store keeps about it."""
        body = await self._call("POST", "/tokens", json={
            "name": name, "scope": scope,
            **({"namespace": namespace} if namespace is not None else {})})
        return body["token"], token_from_json(body)

    async def token_revoke(self, ref: str) -> TokenInfo:
        """Revoke the active token with id or name ``ref``: found in the list first (the
        API's DELETE answers 204, with nothing to print), then revoked by its id. When the
        list has no such token, the DELETE of ``ref`` brings the API's own 404."""
        token = _active(await self.token_list(), ref)
        await self._call("DELETE", f"/tokens/{_segment(ref if token is None else token.id)}")
        if token is not None:
            return token
        # made and revoked between the two calls: the latest revoked token of that id or name
        return max((t for t in await self.token_list() if ref in (t.id, t.name)),
                   key=lambda t: t.revoked_at or t.created_at)


def _active(tokens: list[TokenInfo], ref: str) -> TokenInfo | None:
    """The active token whose id is ``ref``, else the one of that name (as the store picks)."""
    found = [t for t in tokens if t.revoked_at is None and ref in (t.id, t.name)]
    return next((t for t in found if t.id == ref), found[0] if found else None)


def token_from_json(doc: Mapping[str, Any]) -> TokenInfo:
    return TokenInfo(id=doc["id"], name=doc["name"], scope=Scope(doc["scope"]),
                     created_at=instant(doc["created_at"]),
                     last_used_at=maybe_instant(doc.get("last_used_at")),
                     revoked_at=maybe_instant(doc.get("revoked_at")),
                     namespace=doc.get("namespace"))
