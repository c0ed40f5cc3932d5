"""A one-line progress bar on stderr for long operations (cluster-dump, rsync-up to many
nodes), no dependency.

On a terminal the line is redrawn in place; elsewhere (CI logs, pipes) each step prints one
line, so logs stay readable.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

WIDTH = 30


class ProgressBar:
    """`done` of `total` steps plus a byte count; thread-safe."""

    def __init__(self, label: str, total: int, out: TextIO = sys.stderr) -> None:
        self.label, self.total, self.out = label, total, out
        self.done = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._tty = out.isatty()

    def add_bytes(self, count: int) -> None:
        with self._lock:
            self.bytes += count
            if self._tty:
                self._draw("")

    def step(self, note: str) -> None:
        with self._lock:
            self.done += 1
            self._draw(note)

    def close(self) -> None:
        if self._tty:
            print(file=self.out, flush=True)

    def _draw(self, note: str) -> None:
        filled = WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (WIDTH - filled)
        line = f"{self.label} [{bar}] {self.done}/{self.total} nodes"
        if self.bytes:
            line += f", {self.bytes / 1e6:.1f} MB"
        if note:
            line += f": {note}"
        if self._tty:
            print(f"\r\033[K{line}", end="", file=self.out, flush=True)
        elif note:
            print(line, file=self.out, flush=True)
