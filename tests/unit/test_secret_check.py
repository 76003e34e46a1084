"""SecretCheck: a bulk's specs are checked against one namespace's secret names; a payload
object bulk parsing shares between equal payloads is walked once, and a refusal still names
its field."""

from __future__ import annotations

import pytest

from tickwork.client import references
from tickwork.client.references import SecretCheck
from tickwork.client.specs import to_specs
from tickwork.errors import ValidationError


def doc(name: str, secret: str) -> dict[str, object]:
    return {"name": name, "kind": "http", "schedule": {"at": "2030-01-01T00:00:00Z"},
            "payload": {"url": "https://example.org/hook",
                        "headers": {"Authorization": {"$secret": secret}}}}


def test_a_shared_payload_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[object] = []
    real = references.find_references

    def counted(value: object) -> list[str]:
        walks.append(value)
        return real(value)

    monkeypatch.setattr(references, "find_references", counted)
    check = SecretCheck("a", frozenset({"tok"}))
    specs = list(to_specs([doc(f"j{i}", "tok") for i in range(50)], check.check))
    assert len({id(s.payload) for s in specs}) == 1  # bulk parsing shared it
    assert len(walks) == 1


def test_a_shared_payload_is_refused_at_its_first_job_and_in_another_namespace() -> None:
    docs = [doc("fine", "tok"), doc("missing", "gone"), doc("again", "gone")]
    with pytest.raises(ValidationError) as caught:
        list(to_specs(docs, SecretCheck("a", frozenset({"tok"})).check))
    assert caught.value.field == "[1].payload.headers.Authorization"
    # What resolved in namespace a is walked again for b, which lacks the name.
    with pytest.raises(ValidationError) as other:
        list(to_specs(docs[:1], SecretCheck("b", frozenset()).check))
    assert "no secret 'tok' in namespace 'b'" in other.value.reason
