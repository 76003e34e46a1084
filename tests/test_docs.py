"""Docs that run: README and docs/ examples are executed or validated here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tickwork import registry
from tickwork.document import parse_job_document

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_job_documents_in_the_docs_are_valid(path: Path) -> None:
    for text in blocks(path, "json"):
        value = json.loads(text)
        for doc in value if isinstance(value, list) else [value]:
            if isinstance(doc, dict) and {"name", "schedule", "kind"} <= doc.keys():
                parse_job_document(doc)
