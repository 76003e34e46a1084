"""The layer rule of docs/development.md: each layer imports only the layers below it.

import-linter reads the contract in pyproject.toml ([tool.importlinter]) and checks every import
of src/tickwork against it, lazy ones inside functions included.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_layers_import_downward_only() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout
