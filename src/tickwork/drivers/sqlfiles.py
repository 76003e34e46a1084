"""Named SQL, kept in ``.sql`` files and loaded with importlib.resources.

A file holds one or more queries, each introduced by a ``-- name: <name>`` line.
"""

from __future__ import annotations

from importlib import resources


def load_queries(package: str, folder: str = "queries") -> dict[str, str]:
    """Every named query in ``package/folder/*.sql``, by name."""
    queries: dict[str, str] = {}
    for entry in sorted(resources.files(package).joinpath(folder).iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        name: str | None = None
        lines: list[str] = []
        for line in entry.read_text(encoding="utf-8").splitlines():
            if line.startswith("-- name:"):
                if name:
                    queries[name] = "\n".join(lines).strip()
                name, lines = line.removeprefix("-- name:").strip(), []
            elif name is not None:
                lines.append(line)
        if name:
            queries[name] = "\n".join(lines).strip()
    return queries


def load_migrations(package: str, folder: str = "migrations") -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for each ``NNN_name.sql``, in version order."""
    found = []
    for entry in resources.files(package).joinpath(folder).iterdir():
        stem, dot, ext = entry.name.partition(".")
        if ext != "sql" or not dot:
            continue
        number, _, name = stem.partition("_")
        found.append((int(number), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def split_statements(sql: str) -> list[str]:
    """The statements of a migration file, split on ``;`` after dropping ``--`` comments (so a
    semicolon in a comment is harmless). No procedural bodies or ``--`` inside strings."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return [statement.strip() for statement in code.split(";") if statement.strip()]
