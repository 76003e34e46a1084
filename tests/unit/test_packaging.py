"""Every non-Python file the package needs is listed in package-data, so wheels carry it."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "tickwork"


def test_package_data_covers_every_data_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["tickwork"]
    data_files = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc")
                  and "__pycache__" not in p.parts]
    assert data_files, "the package has data files (SQL, Lua, static assets)"
    missing = [f for f in data_files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert missing == []
