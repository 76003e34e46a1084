"""The SecretStore conformance suite: every driver passes it (STYLE habit 2).

A driver's test module subclasses ``SecretStoreConformance`` and defines ``secret_store``: a
SecretStore on a fresh, migrated database. Instants come from ``factories.NOW``.
"""

from __future__ import annotations

import pytest

from tickwork.drivers.secrets import SecretNotFound, SecretStore
from tickwork.testing.factories import NOW, seconds


class SecretStoreConformance:
    async def test_set_get_list_delete(self, secret_store: SecretStore) -> None:
        assert await secret_store.secret_list() == []
        await secret_store.secret_set("b", b"one", NOW)
        await secret_store.secret_set("a", b"two", NOW)
        await secret_store.secret_set("b", b"three", NOW + seconds(5))
        assert await secret_store.secret_get("b") == b"three"
        assert await secret_store.secret_list() == [("a", NOW), ("b", NOW + seconds(5))]
        await secret_store.secret_delete("a")
        with pytest.raises(SecretNotFound, match="no secret 'a'"):
            await secret_store.secret_get("a")
        with pytest.raises(SecretNotFound):
            await secret_store.secret_delete("a")
        assert [name for name, _ in await secret_store.secret_list()] == ["b"]

    async def test_values_are_bytes_kept_exactly(self, secret_store: SecretStore) -> None:
        value = bytes(range(256))
        await secret_store.secret_set("raw", value, NOW)
        assert await secret_store.secret_get("raw") == value

    async def test_names_are_case_sensitive_and_listed_in_byte_order(
            self, secret_store: SecretStore) -> None:
        for name in ("b", "B", "a-1", "a.1", "A_1"):
            await secret_store.secret_set(name, name.encode(), NOW)
        assert await secret_store.secret_get("B") == b"B"
        assert await secret_store.secret_get("b") == b"b"
        assert [name for name, _ in await secret_store.secret_list()] == [
            "A_1", "B", "a-1", "a.1", "b"]
        with pytest.raises(SecretNotFound) as info:
            await secret_store.secret_get("A")
        assert isinstance(info.value, LookupError)

    async def test_a_secret_belongs_to_one_namespace(self, secret_store: SecretStore) -> None:
        await secret_store.secret_set("tok", b"of-a", NOW, namespace="a")
        await secret_store.secret_set("tok", b"of-b", NOW + seconds(1), namespace="b")
        await secret_store.secret_set("only-b", b"b", NOW, namespace="b")
        assert await secret_store.secret_get("tok", namespace="a") == b"of-a"
        assert await secret_store.secret_get("tok", namespace="b") == b"of-b"
        with pytest.raises(SecretNotFound) as info:
            await secret_store.secret_get("only-b", namespace="a")
        assert str(info.value).startswith("no secret 'only-b' in namespace 'a'")
        assert "'b'" not in str(info.value)  # nothing said of the namespace that has one
        with pytest.raises(SecretNotFound):
            await secret_store.secret_get("tok")  # default has none
        assert [n for n, _ in await secret_store.secret_list(namespace="a")] == ["tok"]
        assert [n for n, _ in await secret_store.secret_list(namespace="b")] == [
            "only-b", "tok"]
        assert await secret_store.secret_list() == []
        assert await secret_store.secret_namespaces() == ["a", "b"]
        with pytest.raises(SecretNotFound):
            await secret_store.secret_delete("only-b", namespace="a")
        await secret_store.secret_delete("tok", namespace="a")
        assert await secret_store.secret_get("tok", namespace="b") == b"of-b"
        assert await secret_store.secret_namespaces() == ["b"]
