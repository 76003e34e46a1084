"""The namespace commands and ``--namespace`` on a database and through ``--api``: a token of
one namespace stays in it, quotas refuse with one line and a status, and usage is listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli_api import ApiThread, new_database
from test_cli_api import tw as tw  # noqa: PLC0414  (the fixture, re-exported for pytest)

JOB = {"name": "ping", "kind": "http", "schedule": {"every": "1h"},
       "payload": {"url": "https://example.org/"}}


def test_namespaces_through_the_api_and_on_the_database(tw: Any, tmp_path: Path) -> None:
    url, tokens = new_database(tw, tmp_path / "ns.db")
    code, out, err = tw("tokens", "create", "--name", "acme-admin", "--scope", "admin",
                        "--namespace", "acme", "--database", url)
    assert code == 0, err
    assert "namespace acme" in out
    acme = out.splitlines()[-1]
    assert tw("namespaces", "set", "acme", "--max-runs-per-hour", "0", "--database", url)[0] == 0
    with ApiThread(url) as server:
        as_acme = ("--api", server.url, "--token", acme)
        as_root = ("--api", server.url, "--token", tokens["admin"])
        code, out, err = tw("jobs", "create", "--json", "-", *as_acme, stdin=json.dumps(JOB))
        assert code == 0, err
        assert tw("jobs", "create", "--json", "-", *as_root, stdin=json.dumps(JOB))[0] == 0
        code, out, _ = tw("jobs", "list", "--json", *as_root, "--namespace", "acme")
        assert [j["namespace"] for j in json.loads(out)] == ["acme"]
        code, out, _ = tw("jobs", "list", "--json", *as_root)
        assert sorted(j["namespace"] for j in json.loads(out)) == ["acme", "default"]
        # The token's own namespace wins over --namespace.
        code, out, _ = tw("jobs", "list", "--json", *as_acme, "--namespace", "default")
        assert [j["namespace"] for j in json.loads(out)] == ["acme"]
        code, out, _ = tw("namespaces", "list", "--json", *as_acme)
        assert [n["name"] for n in json.loads(out)] == ["acme"]
        code, _, err = tw("namespaces", "set", "acme", "--max-jobs", "none", *as_acme)
        assert code == 2
        assert "token without a namespace" in err
        code, _, err = tw("jobs", "trigger", "ping", *as_acme)
        assert code == 1
        assert "max_runs_per_hour" in err
        assert "retry after" in err
        assert "Traceback" not in err
    code, out, _ = tw("namespaces", "list", "--database", url)
    assert code == 0
    assert [line.split()[:3] for line in out.splitlines()[1:]] == [
        ["acme", "1", "0/0"], ["default", "1", "0"]]
    code, _, err = tw("jobs", "trigger", "ping", "--database", url, "--namespace", "acme")
    assert code == 1
    assert "quota max_runs_per_hour (0)" in err
