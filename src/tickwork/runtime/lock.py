"""The embedded service's lock on its SQLite file: one service per file.

Holding ``<database>.lock`` tells the service it is the file's only worker, so attempts left
running by a crashed predecessor are orphans at once. A database that many processes share
(PostgreSQL), or an in-memory one, has nothing to lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from tickwork.drivers import Driver
from tickwork.drivers.sqlite.connection import path_from_url
from tickwork.errors import StoreUnavailable


class FileLock:
    def __init__(self, path: str | None) -> None:
        self.path = path  # the database file; None: nothing to lock
        self._handle: IO[str] | None = None

    @classmethod
    def for_database(cls, url: str, driver: Driver) -> FileLock:
        if driver.shared:
            return cls(None)
        path = path_from_url(url)
        return cls(None if path == ":memory:" else path)

    @property
    def held(self) -> bool:
        return self._handle is not None

    def take(self) -> None:
        if self.path is None:
            return
        lock_path = Path(f"{self.path}.lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = lock_path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StoreUnavailable(
                f"another tickwork service is already running on {self.path} "
                f"(it holds {lock_path}); stop it first, or use another --database") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
