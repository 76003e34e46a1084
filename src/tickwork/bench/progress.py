"""One progress line on stderr: redrawn in place on a terminal, a line every few seconds
otherwise (CI logs)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR = 24
LINE_EVERY_SECONDS = 5.0


class Progress:
    def __init__(self, label: str, total: int, *, stream: TextIO | None = None,
                 enabled: bool = True) -> None:
        self.label = label
        self.total = max(total, 1)
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self._started = time.monotonic()
        self._last_line = 0.0
        self._width = 0

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        elapsed = now - self._started
        filled = min(BAR, BAR * done // self.total)
        text = (f"{self.label} [{'#' * filled}{'.' * (BAR - filled)}] {done:,}/{self.total:,} "
                f"{elapsed:5.1f}s {note}").rstrip()
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
            self.stream.flush()
        elif now - self._last_line >= LINE_EVERY_SECONDS:
            self._last_line = now
            self.stream.write(text + "\n")
            self.stream.flush()

    def say(self, message: str) -> None:
        """A line of its own (a phase starts), without breaking the bar."""
        if not self.enabled:
            return
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(message + "\n")
        self.stream.flush()

    def finish(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        self._last_line = 0.0
        self.update(done, note)
        if self.tty:
            self.stream.write("\n")
            self._width = 0
        self.stream.flush()
