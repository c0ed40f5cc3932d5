"""One-line progress on stderr for long operations (cluster-dump, syncs), no dependency.

On a terminal the line is redrawn in place. Elsewhere (CI logs, pipes) a bar prints one line
per node it finishes and a transfer count prints nothing (the sync's summary follows), so logs
stay readable.
"""

from __future__ import annotations

import sys
import threading
from typing import Protocol, TextIO

WIDTH = 30


class Transfers(Protocol):
    """What a sync reports as it goes: bytes as they move, then each file once it is there."""

    def add_bytes(self, count: int) -> None: ...

    def add_file(self, path: str) -> None: ...


class ProgressBar:
    """`done` of `total` nodes plus the files and bytes moved so far; thread-safe."""

    def __init__(self, label: str, total: int, out: TextIO = sys.stderr) -> None:
        self.label, self.total, self.out = label, total, out
        self.done = 0
        self.files = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._tty = out.isatty()

    def add_bytes(self, count: int) -> None:
        with self._lock:
            self.bytes += count
            if self._tty:
                self._draw("")

    def add_file(self, path: str) -> None:
        with self._lock:
            self.files += 1
            if self._tty:
                self._draw("")

    def step(self, note: str) -> None:
        with self._lock:
            self.done += 1
            self._draw(note)

    def say(self, line: str) -> None:
        """A line of its own (a node that failed), the bar drawn again below it."""
        with self._lock:
            print(f"\r\033[K{line}" if self._tty else line, file=self.out, flush=True)
            if self._tty:
                self._draw("")

    def close(self) -> None:
        if self._tty:
            print(file=self.out, flush=True)

    def _draw(self, note: str) -> None:
        filled = WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (WIDTH - filled)
        line = f"{self.label} [{bar}] {self.done}/{self.total} nodes"
        if self.files:
            line += f", {self.files} file(s)"
        if self.bytes:
            line += f", {self.bytes / 1e6:.1f} MB"
        if note:
            line += f": {note}"
        if self._tty:
            print(f"\r\033[K{line}", end="", file=self.out, flush=True)
        elif note:
            print(line, file=self.out, flush=True)


class TransferCount:
    """Files and bytes one sync has moved, with the file it is on; drawn on a terminal only."""

    def __init__(self, label: str, out: TextIO = sys.stderr) -> None:
        self.label, self.out = label, out
        self.files = 0
        self.bytes = 0
        self._tty = out.isatty()
        self._last = ""
        self._drawn = False

    def add_bytes(self, count: int) -> None:
        self.bytes += count
        self._draw()

    def add_file(self, path: str) -> None:
        self.files += 1
        self._last = path
        self._draw()

    def close(self) -> None:
        if self._drawn:
            print(file=self.out, flush=True)

    def _draw(self) -> None:
        if not self._tty:
            return
        line = f"{self.label}: {self.files} file(s), {self.bytes / 1e6:.1f} MB"
        if self._last:
            line += f": {self._last}"
        print(f"\r\033[K{line}", end="", file=self.out, flush=True)
        self._drawn = True
