"""Docs that run: README and docs/ examples are executed or validated here."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import click
import pytest

from tickwork import registry
from tickwork.cli.main import cli
from tickwork.document import parse_job_document
from tickwork.executors import AVAILABLE_KINDS
from tickwork.executors.outbound import MAX_REDIRECTS

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def test_ci_runs_the_readme_test_command() -> None:
    sh = blocks(ROOT / "README.md", "sh")
    run_cmd, test_cmd = sh[0].strip(), sh[1].strip()
    assert run_cmd.endswith("tickwork run --demo")
    assert test_cmd in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # jobs an example declares stay its own: a later service in this process would sync them
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    for code in blocks(path, "python"):
        if "# not run" in code:
            continue
        exec(compile(code, f"{path.name} example", "exec"), {"__name__": "docs_example"})


def job_documents(path: Path) -> list[dict[str, Any]]:
    """Every job document a page shows: JSON blocks, JSON in single quotes in shell blocks
    (``echo '{...}'``, ``curl -d '{...}'``), and dict literals in Python blocks."""
    values: list[Any] = [json.loads(text) for text in blocks(path, "json")]
    for text in blocks(path, "sh"):
        for quoted in re.findall(r"'(\{.*?\}|\[.*?\])'", text, re.S):
            values.append(json.loads(quoted))
    for text in blocks(path, "python"):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Dict):
                try:
                    values.append(ast.literal_eval(node))
                except ValueError:  # holds a name or a call: not a literal document
                    continue
    docs = []
    for value in values:
        for doc in value if isinstance(value, list) else [value]:
            if isinstance(doc, dict) and {"name", "schedule", "kind"} <= doc.keys():
                docs.append(doc)
    return docs


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_job_documents_in_the_docs_are_valid(path: Path) -> None:
    for doc in job_documents(path):
        parse_job_document(doc)


def test_the_docs_show_job_documents_from_every_kind_of_block() -> None:
    assert any(d["name"] == "ping" for d in job_documents(ROOT / "docs" / "api.md"))  # curl, python
    assert any(d["name"] == "standup" for d in job_documents(ROOT / "docs" / "cli.md"))  # echo


def test_the_job_document_page_lists_every_kind() -> None:
    text = (ROOT / "docs" / "job-document.md").read_text(encoding="utf-8")
    [row] = [line for line in text.splitlines() if line.startswith("| `kind` |")]
    assert set(re.findall(r"`(\w+)`", row)) - {"kind"} == set(AVAILABLE_KINDS)
    assert "refused" not in row
    kinds = {d["kind"] for d in job_documents(ROOT / "docs" / "job-document.md")}
    assert kinds == set(AVAILABLE_KINDS)  # an example of each
    for kind in AVAILABLE_KINDS:
        assert f"### `{kind}`" in text


def test_the_docs_say_what_the_http_kind_does_with_redirects() -> None:
    for page in ("job-document.md", "executors.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert f"are followed, at most {MAX_REDIRECTS}" in text
        assert "not followed" not in text


def test_names_in_the_docs_prose_are_valid() -> None:
    """A page that says 'a job named X' shows a name the validator accepts."""
    for path in DOCS:
        for name in re.findall(r"job\s+(?:named|called)\s+`([^`]+)`", path.read_text("utf-8")):
            parse_job_document({"name": name, "schedule": {"every": "1m"}, "kind": "python",
                                "payload": {"callable": "tickwork.cli.demo:tick"}})


def test_every_command_the_docs_give_redis_takes_it() -> None:
    """`tickwork api --redis`, `tickwork jobs trigger --redis`, ...: each exists."""
    found = set()
    for path in DOCS:
        found |= set(re.findall(r"`tickwork ((?:[a-z]+ )+)--redis", path.read_text("utf-8")))
    assert {"api ", "jobs trigger ", "run "} <= found
    for words in found:
        command: click.Command = cli
        for word in words.split():
            assert isinstance(command, click.Group), words
            command = command.commands[word]
        assert any("--redis" in p.opts for p in command.params), words
